// Re-executing paratwin under mpirun (Open MPI).
#include "exec/launch.hpp"

#include "exec/run/live_run.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>

namespace paratwin::exec {

int launch_ranks(int ranks, const std::vector<std::string>& args) {
  const std::string self = rank_executable();
  std::vector<std::string> argv = {"mpirun", "-np", std::to_string(ranks)};
  // More ranks than cores is fine for a functional run; Open MPI refuses it without this flag.
  if (ranks > int(std::thread::hardware_concurrency())) argv.push_back("--oversubscribe");
  if (::geteuid() == 0) argv.push_back("--allow-run-as-root");  // containers and CI run as root
  argv.push_back("--bind-to");
  argv.push_back("none");
  argv.push_back(self);
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> c;
  for (auto& a : argv) c.push_back(a.data());
  c.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("cannot start mpirun: ") + std::strerror(errno));
  if (pid == 0) {
    ::execvp("mpirun", c.data());
    std::fprintf(stderr, "paratwin: cannot run mpirun: %s (install Open MPI: openmpi-bin)\n",
                 std::strerror(errno));
    ::_exit(127);  // the child of fork must not return into the caller
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw std::runtime_error(std::string("waiting for mpirun: ") + std::strerror(errno));
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
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
