// The Program interpreter: streams in order, communication overlapped with compute.
#include "exec/train/interpreter.hpp"

#include <time.h>

#include <chrono>
#include <deque>
#include <map>
#include <stdexcept>

#include "exec/gpt/kernel_clock.hpp"

namespace paratwin::exec {

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

std::vector<TaskSpan> run_iteration(const Role& role, TaskRunner& runner) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const auto now = [t0] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  const size_t n = role.tasks.size();
  std::vector<TaskSpan> spans(n);
  std::vector<bool> done(n, false);
  std::map<int, int> in_flight;  // task index -> runner handle
  std::map<StreamKind, std::deque<int>> queues;
  for (size_t i = 0; i < n; ++i) {
    const Task& t = role.tasks[i];
    // Collectives, copies, and sends and receives on their own stream run there, started by the
    // runner and polled; sends and receives on the compute stream (no PP overlap) are compute tasks.
    const bool communication = t.kind == TaskKind::Collective || t.kind == TaskKind::Copy ||
                               t.kind == TaskKind::Send || t.kind == TaskKind::Recv;
    queues[communication ? t.stream : StreamKind::Compute].push_back(int(i));
  }
  const auto ready = [&](int i) {
    for (int d : role.tasks[i].deps)
      if (!done[d]) return false;
    return true;
  };
  // The first task in flight that task i waits for: a dependency, or one of theirs where a dependency
  // has not started (depth first, in dependency order); -1 if none.
  const auto in_flight_ancestor = [&](int i) {
    std::vector<int> stack;
    const auto push = [&](const TaskDeps& deps) {
      for (size_t k = deps.size(); k-- > 0;) stack.push_back(deps[k]);
    };
    push(role.tasks[i].deps);
    std::vector<bool> seen(n, false);
    while (!stack.empty()) {
      const int d = stack.back();
      stack.pop_back();
      if (done[d] || seen[d]) continue;
      seen[d] = true;
      if (in_flight.count(d)) return d;
      push(role.tasks[d].deps);
    }
    return -1;
  };
  size_t finished = 0;
  while (finished < n) {
    // Start every communication task whose dependencies have ended, each stream in its order.
    for (auto& [stream, queue] : queues) {
      if (stream == StreamKind::Compute) continue;
      while (!queue.empty() && ready(queue.front())) {
        const int i = queue.front();
        queue.pop_front();
        spans[i].start_s = now();
        in_flight[i] = runner.start(i, role.tasks[i]);
      }
    }
    // Collect those that have ended.
    for (auto it = in_flight.begin(); it != in_flight.end();) {
      if (runner.poll(it->second)) {
        spans[it->first].end_s = now();
        done[it->first] = true;
        ++finished;
        it = in_flight.erase(it);
      } else {
        ++it;
      }
    }
    auto& compute = queues[StreamKind::Compute];
    if (compute.empty()) {
      // Only communication is left: wait for the oldest.
      if (in_flight.empty()) {
        if (finished < n)
          throw std::logic_error("role " + std::to_string(role.pipeline_rank) +
                                 ": tasks wait for each other");
        break;
      }
      auto it = in_flight.begin();
      const double blocked = now();
      runner.finish(it->second);
      spans[it->first].end_s = now();
      spans[it->first].wait_s = spans[it->first].end_s - blocked;
      done[it->first] = true;
      ++finished;
      in_flight.erase(it);
      continue;
    }
    const int next = compute.front();
    if (ready(next)) {
      compute.pop_front();
      TaskSpan& span = spans[next];
      const KernelSeconds kernels_before = kernel_seconds;
      const double cpu_before = thread_cpu_seconds();
      span.start_s = now();
      runner.compute(next, role.tasks[next]);
      span.end_s = now();
      span.cpu_s = thread_cpu_seconds() - cpu_before;
      span.gemm_s = kernel_seconds.dense_s - kernels_before.dense_s;
      span.attention_s = kernel_seconds.attention_s - kernels_before.attention_s;
      span.scores_s = kernel_seconds.scores_s - kernels_before.scores_s;
      done[next] = true;
      ++finished;
      continue;
    }
    // The next compute task needs a communication task: block on the first one in flight that it
    // waits for, directly or through tasks not started yet (the step's gradient norm after the buckets).
    const int d = in_flight_ancestor(next);
    const bool waited = d >= 0;
    if (waited) {
      auto it = in_flight.find(d);
      const double blocked = now();
      runner.finish(it->second);
      spans[d].end_s = now();
      spans[d].wait_s = spans[d].end_s - blocked;
      done[d] = true;
      ++finished;
      in_flight.erase(it);
    }
    if (!waited && in_flight.empty()) {
      bool pending_start = false;
      for (auto& [stream, queue] : queues) pending_start |= stream != StreamKind::Compute && !queue.empty();
      if (!pending_start)
        throw std::logic_error("task '" + role.tasks[next].name + "' waits for a task that never starts");
    }
  }
  return spans;
}

}  // namespace paratwin::exec
