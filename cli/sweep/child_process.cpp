// posix_spawn with pipes.
#include "cli/sweep/child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

extern char** environ;

namespace paratwin::cli {

ChildProcess spawn_child(std::vector<std::string> argv, bool read_output) {
  // A child that dies leaves a closed pipe; writing to it must fail with EPIPE, not end this process.
  ::signal(SIGPIPE, SIG_IGN);
  // Close-on-exec everywhere: the child gets only the ends it dups onto 0 and 1, and no other child
  // (a later worker) inherits this one's pipes.
  int in[2] = {-1, -1}, out[2] = {-1, -1};
  if (::pipe2(in, O_CLOEXEC) != 0 || (read_output && ::pipe2(out, O_CLOEXEC) != 0))
    throw std::runtime_error(std::string("cannot create a pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  if (read_output) posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  std::vector<char*> c;
  for (auto& a : argv) c.push_back(a.data());
  c.push_back(nullptr);
  ChildProcess child;
  const int failed = ::posix_spawn(&child.pid, c[0], &actions, nullptr, c.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(in[0]);
  if (read_output) ::close(out[1]);
  if (failed) {
    ::close(in[1]);
    if (read_output) ::close(out[0]);
    throw std::runtime_error("cannot start " + argv.front() + ": " + std::strerror(failed));
  }
  child.to = in[1];
  child.from = out[0];
  return child;
}

int wait_child(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

std::string paratwin_executable() {
  return sibling_executable("paratwin");
}

std::string sibling_executable(const std::string& name) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot find the running executable: " + ec.message());
  return (self.parent_path() / name).string();
}

}  // namespace paratwin::cli
