// Worker processes over pipes, multiplexed with poll(2).
#include "cli/sweep/worker_pool.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "plan/util/child_process.hpp"

namespace paratwin::cli {
namespace {

std::string system_error(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    const char* name = strsignal(WTERMSIG(status));
    return "the worker process was killed by signal " + std::to_string(WTERMSIG(status)) +
           (name ? " (" + std::string(name) + ")" : "");
  }
  if (WIFEXITED(status))
    return "the worker process exited with status " + std::to_string(WEXITSTATUS(status));
  return "the worker process ended";
}

bool stopped_by_user(int status) {
  return WIFSIGNALED(status) &&
         (WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGTERM || WTERMSIG(status) == SIGHUP);
}

}  // namespace

WorkerPool::WorkerPool(std::vector<std::string> command, int workers) : command_(std::move(command)) {
  workers_.resize(static_cast<size_t>(std::max(workers, 1)));
  for (auto& w : workers_) start(w);
}

WorkerPool::~WorkerPool() {
  for (auto& w : workers_) stop(w);
}

void WorkerPool::start(Worker& w) {
  const ChildProcess child =
      spawn_process(command_, {.input = ChildStream::Pipe, .output = ChildStream::Pipe});
  w = Worker{child.pid, child.to, child.from, "", -1};
}

void WorkerPool::stop(Worker& w) {
  if (w.pid < 0) return;
  if (w.to >= 0) ::close(w.to);              // end of input: an idle worker exits
  if (w.index >= 0) ::kill(w.pid, SIGTERM);  // a busy one is told to
  wait_for_process(w.pid);
  if (w.from >= 0) ::close(w.from);
  w = Worker{};
}

void WorkerPool::assign(int slot, int index) {
  Worker& w = workers_.at(static_cast<size_t>(slot));
  w.index = index;
  const std::string line = std::to_string(index) + "\n";
  // A failed write means the worker is gone; poll() then finds its output closed and reports it.
  [[maybe_unused]] const ssize_t n = ::write(w.to, line.data(), line.size());
}

Finished WorkerPool::ended(int slot) {
  Worker& w = workers_[static_cast<size_t>(slot)];
  Finished f{slot, w.index, "", "", false};
  ::close(w.to);
  ::close(w.from);
  w.to = w.from = -1;
  const int status = wait_for_process(w.pid);
  w.pid = -1;
  f.failure = describe_status(status) + " while evaluating this point";
  f.interrupted = stopped_by_user(status);
  // Replace it, unless workers die before doing anything, which more workers would not change.
  if (++deaths_without_result_ > 3 * slots())
    throw std::runtime_error("sweep workers keep dying (" + describe_status(status) +
                             "); see their messages above");
  if (!f.interrupted) start(w);
  return f;
}

std::vector<Finished> WorkerPool::poll(int timeout_ms) {
  std::vector<pollfd> fds;
  std::vector<int> slot_of;
  for (int s = 0; s < slots(); ++s)
    if (workers_[s].from >= 0) {
      fds.push_back({workers_[s].from, POLLIN, 0});
      slot_of.push_back(s);
    }
  std::vector<Finished> out;
  if (fds.empty()) return out;
  const int ready = ::poll(fds.data(), fds.size(), timeout_ms);
  if (ready < 0 && errno != EINTR) throw std::runtime_error(system_error("waiting for sweep workers"));
  for (size_t k = 0; ready > 0 && k < fds.size(); ++k) {
    if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    const int s = slot_of[k];
    Worker& w = workers_[s];
    char buf[1 << 16];
    const ssize_t n = ::read(w.from, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Finished f = ended(s);
      if (f.index >= 0 || f.interrupted) out.push_back(std::move(f));
      continue;
    }
    w.pending.append(buf, static_cast<size_t>(n));
    for (size_t eol; (eol = w.pending.find('\n')) != std::string::npos;) {
      out.push_back({s, w.index, w.pending.substr(0, eol), "", false});
      w.pending.erase(0, eol + 1);
      w.index = -1;
      deaths_without_result_ = 0;
    }
  }
  return out;
}

void WorkerPool::finish() {
  for (auto& w : workers_) stop(w);
}

}  // namespace paratwin::cli
