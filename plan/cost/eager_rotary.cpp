// The rotary embedding in eager PyTorch (see eager_rotary.hpp).
#include "plan/cost/eager_rotary.hpp"

namespace paratwin::cost {

namespace {

constexpr int kTensors = 2;  // the queries and the keys, each rotated on its own

}  // namespace

KernelCost eager_rotary(Rotary rotary, double elements, double tokens, int head_dim, double e,
                        bool backward) {
  const double casts = upcast_round_trip_bytes(e);
  const int cast_launches = casts > 0 ? 2 : 0;
  if (rotary == Rotary::Complex) {
    const KernelCost forward = memory_bound_kernels((casts + 8) * elements, kTensors * (1 + cast_launches));
    return backward ? forward * 2 : forward;
  }
  const double per_tensor = (casts + 24) * elements;
  const int launches = kTensors * (2 + cast_launches);
  if (backward) return memory_bound_kernels(per_tensor, launches);
  // The rotation matrices gathered for the layer's tokens: head_dim / 2 pairs x 4 fp32 entries, read
  // and written; the positions' four small kernels besides the gather.
  const double matrices = 2 * tokens * (head_dim / 2.0) * 4 * 4;
  return memory_bound_kernels(per_tensor + matrices, launches + 5);
}

bool runs_eager_rotary(const LayerWork& w) {
  return w.kernels == LayerKernels::Eager ||
         (w.kernels == LayerKernels::Compiled && w.rotary == Rotary::Complex);
}

bool eager_rotary_has_own_backward(const ModelSpec& m, const LayerWork& w) {
  return m.position == PositionKind::Rope && w.kernels == LayerKernels::Eager &&
         w.rotary == Rotary::RotationMatrix;
}

}  // namespace paratwin::cost
