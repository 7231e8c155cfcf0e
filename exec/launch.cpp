// Re-executing paratwin under mpirun (Open MPI).
#include "exec/launch.hpp"

#include "exec/run/live_run.hpp"

#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "plan/util/child_process.hpp"

namespace paratwin::exec {

namespace {

// mpirun -np ranks [--hostfile F --mca rmaps seq | --oversubscribe] [--allow-run-as-root] [-x NAME]...
// paratwin-rank args...
std::vector<std::string> mpirun_argv(int ranks, const std::vector<std::string>& args,
                                     const std::vector<std::string>& exported,
                                     const std::string& rank_hostfile) {
  std::vector<std::string> argv = {"mpirun", "-np", std::to_string(ranks)};
  if (!rank_hostfile.empty()) argv.insert(argv.end(), {"--hostfile", rank_hostfile, "--mca", "rmaps", "seq"});
  // More ranks than cores is fine for a functional run; Open MPI refuses it without this flag.
  else if (ranks > int(std::thread::hardware_concurrency()))
    argv.push_back("--oversubscribe");
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

}  // namespace

pid_t start_ranks(int ranks, const std::vector<std::string>& args,
                  const std::vector<std::pair<std::string, std::string>>& environment, bool output_to_stderr,
                  const std::string& rank_hostfile) {
  std::vector<std::string> names;
  for (const auto& [name, value] : environment) {
    ::setenv(name.c_str(), value.c_str(), 1);
    names.push_back(name);
  }
  try {
    return spawn_process(mpirun_argv(ranks, args, names, rank_hostfile),
                         {.search_path = true,
                          .own_process_group = true,
                          .input = ChildStream::Null,
                          .output = output_to_stderr ? ChildStream::ToStandardError : ChildStream::Inherit})
        .pid;
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string(e.what()) + " (install Open MPI: openmpi-bin)");
  }
}

int replace_with_rank(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {rank_executable()};
  argv.insert(argv.end(), args.begin(), args.end());
  replace_process(std::move(argv));
}

}  // namespace paratwin::exec
