// posix_spawn with pipes and /dev/null, exec, fork for work in a process of its own.
#include "plan/util/child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

extern char** environ;

namespace paratwin {
namespace {

std::vector<char*> c_argv(std::vector<std::string>& argv) {
  std::vector<char*> c;
  for (auto& a : argv) c.push_back(a.data());
  c.push_back(nullptr);
  return c;
}

void close_if_open(int fd) {
  if (fd >= 0) ::close(fd);
}

}  // namespace

ChildProcess spawn_process(std::vector<std::string> argv, const SpawnOptions& options) {
  const bool pipe_in = options.input == ChildStream::Pipe, pipe_out = options.output == ChildStream::Pipe;
  // A child that dies leaves a closed pipe; writing to it must fail with EPIPE, not end this process.
  if (pipe_in) ::signal(SIGPIPE, SIG_IGN);
  // Close-on-exec everywhere: the child gets only the ends it dups onto 0 and 1, and no other child
  // (a later worker) inherits this one's pipes.
  int in[2] = {-1, -1}, out[2] = {-1, -1};
  if ((pipe_in && ::pipe2(in, O_CLOEXEC) != 0) || (pipe_out && ::pipe2(out, O_CLOEXEC) != 0)) {
    const int error = errno;
    for (int fd : {in[0], in[1]}) close_if_open(fd);
    throw std::runtime_error(std::string("cannot create a pipe: ") + std::strerror(error));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (pipe_in) posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  if (options.input == ChildStream::Null)
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  if (pipe_out) posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  if (options.output == ChildStream::Null)
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  if (options.output == ChildStream::ToStandardError)
    posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  if (options.errors == ChildStream::Null)
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  if (options.own_process_group) {
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attributes, 0);
  }
  std::vector<char*> c = c_argv(argv);
  ChildProcess child;
  const int failed = options.search_path
                         ? ::posix_spawnp(&child.pid, c[0], &actions, &attributes, c.data(), environ)
                         : ::posix_spawn(&child.pid, c[0], &actions, &attributes, c.data(), environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  close_if_open(in[0]);
  close_if_open(out[1]);
  if (failed) {
    close_if_open(in[1]);
    close_if_open(out[0]);
    throw std::runtime_error("cannot start " + argv.front() + ": " + std::strerror(failed));
  }
  child.to = in[1];
  child.from = out[0];
  return child;
}

int wait_for_process(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

int exit_code_of(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

void replace_process(std::vector<std::string> argv, const std::string& hint) {
  std::vector<char*> c = c_argv(argv);
  ::execv(c[0], c.data());
  throw std::runtime_error("cannot run " + argv.front() + (hint.empty() ? "" : " (" + hint + ")") + ": " +
                           std::strerror(errno));
}

std::string sibling_executable(const std::string& name) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot find the running executable: " + ec.message());
  return (self.parent_path() / name).string();
}

ForkedResult run_forked(const std::function<std::pair<std::string, int>()>& work) {
  int fds[2];
  if (::pipe(fds) != 0)
    throw std::runtime_error(std::string("cannot create a pipe: ") + std::strerror(errno));
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int error = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error(std::string("cannot fork: ") + std::strerror(error));
  }
  if (pid == 0) {
    ::close(fds[0]);
    std::pair<std::string, int> reported{"", 1};
    try {
      reported = work();
    } catch (...) {  // the copy must never unwind into the caller's frames
    }
    const auto& [out, code] = reported;
    for (size_t sent = 0; sent < out.size();) {
      const ssize_t n = ::write(fds[1], out.data() + sent, out.size() - sent);
      if (n <= 0) ::_exit(2);
      sent += static_cast<size_t>(n);
    }
    ::close(fds[1]);
    ::_exit(code);  // the copy must not return into the caller
  }
  ::close(fds[1]);
  ForkedResult result;
  char buf[1 << 16];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
    result.output.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  result.status = wait_for_process(pid);
  return result;
}

}  // namespace paratwin
