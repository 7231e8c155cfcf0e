// Formatting and collection of input diagnostics.
#include "plan/spec/diagnostics.hpp"

namespace paratwin {

std::string Location::str() const {
  std::string s = file.empty() ? std::string("<input>") : file;
  if (line > 0) {
    s += ":" + std::to_string(line);
    if (column > 0) s += ":" + std::to_string(column);
  }
  return s;
}

std::string Diagnostic::str() const {
  return where.str() + (severity == Severity::Error ? ": error: " : ": warning: ") + message;
}

void Diagnostics::error(const Location& where, std::string message) {
  items_.push_back({Severity::Error, where, std::move(message)});
}

void Diagnostics::warning(const Location& where, std::string message) {
  items_.push_back({Severity::Warning, where, std::move(message)});
}

bool Diagnostics::has_errors() const {
  for (const auto& d : items_)
    if (d.severity == Severity::Error) return true;
  return false;
}

std::vector<Diagnostic> Diagnostics::warnings() const {
  std::vector<Diagnostic> out;
  for (const auto& d : items_)
    if (d.severity == Severity::Warning) out.push_back(d);
  return out;
}

void Diagnostics::throw_if_errors() const {
  std::vector<Diagnostic> errors;
  for (const auto& d : items_)
    if (d.severity == Severity::Error) errors.push_back(d);
  if (!errors.empty()) throw InputError(std::move(errors));
}

static std::string join_lines(const std::vector<Diagnostic>& diagnostics) {
  std::string text;
  for (const auto& d : diagnostics) {
    if (!text.empty()) text += "\n";
    text += d.str();
  }
  return text;
}

InputError::InputError(std::vector<Diagnostic> diagnostics)
    : std::runtime_error(join_lines(diagnostics)), diagnostics_(std::move(diagnostics)) {}

InputError::InputError(const Location& where, const std::string& message)
    : InputError(std::vector<Diagnostic>{{Severity::Error, where, message}}) {}

}  // namespace paratwin
