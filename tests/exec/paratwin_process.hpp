// The `paratwin` binary run as a child process by the end-to-end tests: its exit status and output.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace paratwin_test {

struct Output {
  int status = -1;
  std::string text;  // standard output and error
};

// Runs `paratwin ARGS` from the build's bin/ and waits for it.
inline Output run_paratwin(const std::string& args) {
  const std::string command = std::string(PARATWIN_BIN_DIR "/paratwin ") + args + " 2>&1";
  Output out;
  FILE* pipe = ::popen(command.c_str(), "r");
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, pipe)) out.text.append(buf, n);
  const int status = ::pclose(pipe);
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

inline nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

}  // namespace paratwin_test
