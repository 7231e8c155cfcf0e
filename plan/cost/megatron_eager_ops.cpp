// Megatron-Core's eager ops inside fused layers (see megatron_eager_ops.hpp).
#include "plan/cost/megatron_eager_ops.hpp"

#include <algorithm>

namespace paratwin::cost {

KernelCost moe_expert_bias(double rows, double hidden, int local_experts, double e, bool backward) {
  const int experts = std::max(1, local_experts);
  const double elements = rows * hidden;
  return backward ? memory_bound_kernels(8 * e * elements, 4 * experts + 2)
                  : memory_bound_kernels(6 * e * elements, 2 * experts + 1);
}

bool runs_unfused_megatron_rope(const ModelSpec& m, const LayerWork& w) {
  return m.position == PositionKind::Rope && m.yarn_factor > 1 && w.kernels == LayerKernels::Fused;
}

KernelCost unfused_megatron_rope(double elements, double e, bool backward) {
  constexpr int kTensors = 2;  // the queries and the keys, each rotated on its own
  return backward ? memory_bound_kernels(10 * e * elements, kTensors * 5)
                  : memory_bound_kernels(12 * e * elements, kTensors * 12);
}

}  // namespace paratwin::cost
