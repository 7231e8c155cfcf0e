// Wall time this thread spends inside the kernels the cost model charges at rates of their own: the
// two GEMM classes (dense layers and attention's per-head products) and the attention core's kernels
// over the scores (softmax and its gradient), so that a profile can split a task's time into GEMM
// FLOPs, the scores' traffic and the rest of the memory traffic. A steady-clock read costs ~50 ns, so
// even a head's small products and softmax can be timed one by one.
#pragma once

#include <chrono>

namespace paratwin::exec {

struct KernelSeconds {
  double dense_s = 0;      // linear layers and the logits
  double attention_s = 0;  // Q K^T, P V and their gradients
  double scores_s = 0;     // the causal softmax over Q K^T and its gradient
};

// This thread's running totals since it started.
inline thread_local KernelSeconds kernel_seconds;

// Adds the time from construction to destruction to `total` (a field of kernel_seconds).
class KernelTimer {
 public:
  explicit KernelTimer(double& total) : total_(total), start_(std::chrono::steady_clock::now()) {}
  ~KernelTimer() {
    total_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

 private:
  double& total_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace paratwin::exec
