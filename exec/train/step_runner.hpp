// What the training loop asks of whatever runs one rank's tasks step after step: the CPU's
// ParallelRunner (parallel_runner.cpp) and the CUDA trainer's runner (exec/cuda/cuda_trainer.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "exec/train/interpreter.hpp"

namespace paratwin::exec {

class StepRunner : public TaskRunner {
 public:
  virtual void begin_step(int64_t step) = 0;
  // Losses of the micro-batches this rank counts in the step's mean (each once over the job).
  virtual const std::vector<double>& losses() const = 0;
  // Bytes of this step's DP collectives as the Program counts them (each message once).
  virtual double dp_bytes() const = 0;
  // Tokens this rank routed to each expert so far, [layer x experts]; empty for dense models and
  // engines without experts.
  virtual std::vector<double> routed_tokens() const { return {}; }
};

}  // namespace paratwin::exec
