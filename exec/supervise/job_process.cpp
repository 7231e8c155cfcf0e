// Watching and stopping mpirun and its ranks through waitpid, kill and /proc.
#include "exec/supervise/job_process.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "plan/util/child_process.hpp"

namespace paratwin::exec {

namespace {

struct ProcStat {
  std::string command;
  char state = 0;
  pid_t parent = 0;
};

// /proc/PID/stat: "pid (command) state ppid ..."
std::optional<ProcStat> stat_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(in, text)) return std::nullopt;
  const size_t open = text.find('('), close = text.rfind(')');  // the name may hold spaces, parentheses
  if (open == std::string::npos || close == std::string::npos || close + 4 > text.size()) return std::nullopt;
  return ProcStat{text.substr(open + 1, close - open - 1), text[close + 2],
                  pid_t(std::stol(text.substr(close + 4)))};
}

std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto st = stat_of(pid_t(std::stol(name)));
    if (st && st->parent == parent) out.push_back(pid_t(std::stol(name)));
  }
  return out;
}

}  // namespace

bool process_alive(pid_t pid) {
  const auto st = stat_of(pid);
  return st && st->state != 'Z' && st->state != 'X';
}

bool kill_rank(pid_t pid) {
  const auto st = pid > 0 ? stat_of(pid) : std::nullopt;
  return st && st->command == "paratwin-rank" && st->state != 'Z' && ::kill(pid, SIGKILL) == 0;
}

std::optional<int> exit_status_if_ended(pid_t mpirun) {
  int status = 0;
  pid_t r;
  while ((r = ::waitpid(mpirun, &status, WNOHANG)) < 0 && errno == EINTR) {
  }
  if (r == mpirun) return exit_code_of(status);
  return std::nullopt;
}

int stop_job(pid_t mpirun, const std::vector<int>& ranks, double grace_s) {
  // mpirun's ranks on this host; not its other children, such as the ssh (rsh agent) of another host,
  // through which mpirun stops that host's ranks.
  std::vector<pid_t> processes;
  for (pid_t child : children_of(mpirun))
    if (const auto st = stat_of(child); st && st->command == "paratwin-rank") processes.push_back(child);
  // A rank that already died may have left its pid to another process: only live paratwin-ranks.
  for (int pid : ranks)
    if (const auto st = pid > 0 ? stat_of(pid) : std::nullopt; st && st->command == "paratwin-rank")
      processes.push_back(pid);
  std::optional<int> status;
  // Until mpirun has ended and every rank with it, or the grace period is over.
  const auto wait = [&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
    for (;;) {
      if (!status) status = exit_status_if_ended(mpirun);
      bool any = false;
      for (pid_t p : processes) any = any || process_alive(p);
      if ((status && !any) || std::chrono::steady_clock::now() > deadline) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  };
  // The ranks first: mpirun then ends by itself (a second signal while it aborts a job makes it crash).
  for (pid_t p : processes) ::kill(p, SIGTERM);
  wait();
  if (!status) {
    ::kill(-mpirun, SIGTERM);
    wait();
  }
  for (pid_t p : processes)
    if (process_alive(p)) ::kill(p, SIGKILL);
  if (status) return *status;  // reaped: its pid and group may belong to another process by now
  ::kill(-mpirun, SIGKILL);
  return exit_code_of(wait_for_process(mpirun));
}

}  // namespace paratwin::exec
