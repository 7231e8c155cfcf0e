// Runs one iteration of a Program role: the same task list the analytic evaluator and the simulator
// cost. The compute stream runs its tasks in order on this thread; a communication task starts (non
// blocking) as soon as its dependencies have ended, is polled between compute tasks, and is waited
// for only when a task that depends on it is next. What each task does is the TaskRunner's business.
#pragma once

#include <vector>

#include "plan/ir/program.hpp"

namespace paratwin::exec {

class TaskRunner {
 public:
  virtual ~TaskRunner() = default;
  // Runs a compute task (forward, backward, recompute, optimizer) to its end.
  virtual void compute(int index, const Task& task) = 0;
  // Starts a communication or copy task and returns a handle for poll()/finish().
  virtual int start(int index, const Task& task) = 0;
  virtual bool poll(int handle) = 0;    // true once it has ended
  virtual void finish(int handle) = 0;  // blocks until it has ended
};

// When a task ran, in seconds since the iteration started.
struct TaskSpan {
  double start_s = 0;
  double end_s = 0;
  double wait_s = 0;  // compute-stream time spent blocked on this (communication) task
  // Compute tasks: the thread's CPU time (what the task took less any time the scheduler gave the core
  // to another process), and the wall time inside dense and attention GEMMs and the scores' softmax.
  double cpu_s = 0;
  double gemm_s = 0;
  double attention_s = 0;
  double scores_s = 0;
};

// CPU time of the calling thread, in seconds (a system call: ~1-2 us).
double thread_cpu_seconds();

// Throws std::logic_error when the dependencies cannot be met (a task waits for one that never
// starts).
std::vector<TaskSpan> run_iteration(const Role& role, TaskRunner& runner);

}  // namespace paratwin::exec
