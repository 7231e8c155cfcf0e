// Where user input went wrong, and the one exception type that carries it to main() or the GUI.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace paratwin {

// A position in a YAML file or on the command line; line and column are 1-based, 0 when unknown.
struct Location {
  std::string file;
  int line = 0;
  int column = 0;

  std::string str() const;  // "file:line:col", "file:line" or "file"
};

enum class Severity { Error, Warning };

struct Diagnostic {
  Severity severity = Severity::Error;
  Location where;
  std::string message;

  std::string str() const;  // "file:line:col: error: message"
};

// Collects every problem found in one pass so a user sees all of them at once.
class Diagnostics {
 public:
  void error(const Location& where, std::string message);
  void warning(const Location& where, std::string message);

  bool has_errors() const;
  const std::vector<Diagnostic>& all() const { return items_; }
  std::vector<Diagnostic> warnings() const;

  // Throws InputError with every error collected so far (warnings stay here).
  void throw_if_errors() const;

 private:
  std::vector<Diagnostic> items_;
};

// Bad user input: caught only in main() (exit status 2) and in the GUI.
class InputError : public std::runtime_error {
 public:
  explicit InputError(std::vector<Diagnostic> diagnostics);
  InputError(const Location& where, const std::string& message);

  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

 private:
  std::vector<Diagnostic> diagnostics_;
};

}  // namespace paratwin
