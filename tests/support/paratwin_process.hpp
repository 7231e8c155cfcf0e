// The `paratwin` binary (and other commands, such as mpirun) run as child processes by the end-to-end
// tests: their exit status and output, and the files they leave.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "source_tree.hpp"

namespace paratwin_test {

// A file's bytes ("" when it cannot be read).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

// A directory of this test process's own under the system's temporary directory, created on first use.
inline std::filesystem::path test_dir(const std::string& prefix) {
  const auto dir = std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

// Output in the order it was written: standard output and error together.
struct Output {
  int status = -1;
  std::string text;
};

// Runs `paratwin ARGS` from the build's bin/ and waits for it.
inline Output run_paratwin(const std::string& args) {
  const std::string command = bin_dir() + "/paratwin " + args + " 2>&1";
  Output out;
  FILE* pipe = ::popen(command.c_str(), "r");
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, pipe)) out.text.append(buf, n);
  const int status = ::pclose(pipe);
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

// Standard output and error apart, for tests of what goes where; status 128 + N for signal N.
struct Result {
  int status = -1;
  std::string out, err;
};

// Runs a shell command line and waits for it.
inline Result run_command(const std::string& command) {
  const auto dir = test_dir("paratwin-run-");
  const auto out = dir / "out", err = dir / "err";
  const int raw = std::system((command + " >" + out.string() + " 2>" + err.string()).c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw), slurp(out), slurp(err)};
}

inline Result paratwin(const std::string& args) {
  return run_command(bin_dir() + "/paratwin " + args);
}

}  // namespace paratwin_test
