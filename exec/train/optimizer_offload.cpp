// Copies of the optimizer state between host and optimizer buffers (see optimizer_offload.hpp).
#include "exec/train/optimizer_offload.hpp"

namespace paratwin::exec {

OptimizerOffload::OptimizerOffload(AdamW& adamw) : adamw_(adamw) {
  to_host();
}

void OptimizerOffload::to_device() {
  if (on_device_) return;
  {
    MemoryUseScope use(MemoryUse::Optimizer);
    adamw_.m().assign(host_m_.begin(), host_m_.end());
    adamw_.v().assign(host_v_.begin(), host_v_.end());
  }
  on_device_ = true;
}

void OptimizerOffload::to_host() {
  if (!on_device_) return;
  {
    MemoryUseScope use(MemoryUse::Host);
    host_m_.assign(adamw_.m().begin(), adamw_.m().end());
    host_v_.assign(adamw_.v().begin(), adamw_.v().end());
  }
  Buffer<float>().swap(adamw_.m());
  Buffer<float>().swap(adamw_.v());
  on_device_ = false;
}

}  // namespace paratwin::exec
