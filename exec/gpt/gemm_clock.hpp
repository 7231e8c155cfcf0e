// Wall time this thread spends inside GEMMs, by the cost model's two GEMM classes (dense layers and
// attention's per-head products), so that a profile can split a task's time into what the cost model
// charges to GEMM FLOPs and what it charges to memory traffic. A steady-clock read costs ~50 ns, so
// even attention's small per-head products can be timed one by one.
#pragma once

#include <chrono>

namespace paratwin::exec {

struct GemmSeconds {
  double dense_s = 0;      // linear layers and the logits
  double attention_s = 0;  // Q K^T, P V and their gradients
};

// This thread's running totals since it started.
inline thread_local GemmSeconds gemm_seconds;

// Adds the time from construction to destruction to `total` (a field of gemm_seconds).
class GemmTimer {
 public:
  explicit GemmTimer(double& total) : total_(total), start_(std::chrono::steady_clock::now()) {}
  ~GemmTimer() { total_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }
  GemmTimer(const GemmTimer&) = delete;
  GemmTimer& operator=(const GemmTimer&) = delete;

 private:
  double& total_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace paratwin::exec
