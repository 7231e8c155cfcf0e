// Optimizer-state offload: the AdamW moments live in host buffers between steps; the Program's
// "copy h2d optimizer" brings them into (device) optimizer buffers before the step and "copy d2h
// optimizer" writes them back and frees those. On the CPU backend both are host memory, but the
// copies and the buffers' lifetimes are the ones a GPU run has, and the meter charges the state to
// host memory outside the step.
#pragma once

#include "exec/optim/adamw.hpp"

namespace paratwin::exec {

class OptimizerOffload {
 public:
  // Moves the optimizer's moments to host buffers (the optimizer is left without them).
  explicit OptimizerOffload(AdamW& adamw);
  void to_device();  // host -> optimizer buffers (allocated)
  void to_host();    // optimizer buffers -> host (optimizer buffers freed)
  bool on_device() const { return on_device_; }

 private:
  AdamW& adamw_;
  Buffer<float> host_m_, host_v_;
  bool on_device_ = true;
};

}  // namespace paratwin::exec
