// Re-executing paratwin under mpirun (Open MPI).
#include "exec/launch.hpp"

#include "exec/run/live_run.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>

namespace paratwin::exec {

namespace {

// mpirun -np ranks [--oversubscribe] [--allow-run-as-root] [-x NAME]... paratwin-rank args...
std::vector<std::string> mpirun_argv(int ranks, const std::vector<std::string>& args,
                                     const std::vector<std::string>& exported) {
  std::vector<std::string> argv = {"mpirun", "-np", std::to_string(ranks)};
  // More ranks than cores is fine for a functional run; Open MPI refuses it without this flag.
  if (ranks > int(std::thread::hardware_concurrency())) argv.push_back("--oversubscribe");
  if (::geteuid() == 0) argv.push_back("--allow-run-as-root");  // containers and CI run as root
  argv.push_back("--bind-to");
  argv.push_back("none");
  for (const auto& name : exported) {
    argv.push_back("-x");
    argv.push_back(name);
  }
  argv.push_back(rank_executable());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// In the child of fork: becomes mpirun; never returns.
[[noreturn]] void exec_mpirun(std::vector<std::string> argv) {
  std::vector<char*> c;
  for (auto& a : argv) c.push_back(a.data());
  c.push_back(nullptr);
  ::execvp("mpirun", c.data());
  std::fprintf(stderr, "paratwin: cannot run mpirun: %s (install Open MPI: openmpi-bin)\n",
               std::strerror(errno));
  ::_exit(127);  // the child of fork must not return into the caller
}

}  // namespace

int launch_ranks(int ranks, const std::vector<std::string>& args) {
  const std::vector<std::string> argv = mpirun_argv(ranks, args, {});
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("cannot start mpirun: ") + std::strerror(errno));
  if (pid == 0) exec_mpirun(argv);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw std::runtime_error(std::string("waiting for mpirun: ") + std::strerror(errno));
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

pid_t start_ranks(int ranks, const std::vector<std::string>& args,
                  const std::vector<std::pair<std::string, std::string>>& environment,
                  bool output_to_stderr) {
  std::vector<std::string> names;
  for (const auto& [name, value] : environment) {
    ::setenv(name.c_str(), value.c_str(), 1);
    names.push_back(name);
  }
  const std::vector<std::string> argv = mpirun_argv(ranks, args, names);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("cannot start mpirun: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, STDIN_FILENO);
    if (output_to_stderr) ::dup2(STDERR_FILENO, STDOUT_FILENO);
    exec_mpirun(argv);
  }
  return pid;
}

int replace_with_rank(const std::vector<std::string>& args) {
  std::string self = rank_executable();
  std::vector<std::string> argv = {self};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> c;
  for (auto& a : argv) c.push_back(a.data());
  c.push_back(nullptr);
  ::execv(self.c_str(), c.data());
  throw std::runtime_error("cannot run " + self + ": " + std::strerror(errno));
}

}  // namespace paratwin::exec
