#include "plan/cost/fused_attention_rate.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <iterator>
#include <span>
#include <utility>

namespace paratwin::cost {

namespace {

// One rate (chosen by `rate`) at `length` from the points that give it: the figures at seq_len and
// the listed lengths' (which replace them at seq_len), in order of length. Walked in place: the
// evaluator asks this of every attention task.
template <class Rate>
std::optional<double> interpolate(const EfficiencySpec::FusedCurve& kernel, double length, Rate rate) {
  const std::optional<double> at_measured = rate(kernel);
  if (!at_measured) return std::nullopt;
  std::optional<std::pair<double, double>> below;
  auto visit = [&](double l, double v) -> std::optional<double> {
    if (l < length) {
      below = {l, v};
      return std::nullopt;
    }
    if (!below) return v;  // at or before the shortest
    const double t = std::log(length / below->first) / std::log(l / below->first);
    return below->second + t * (v - below->second);
  };
  bool measured_placed = false;
  const double measured = kernel.seq_len;
  for (const auto& [l, rates] : kernel.by_seq_len) {
    const std::optional<double> v = rate(rates);
    if (!v) continue;
    if (!measured_placed && measured <= l) {
      measured_placed = true;
      if (measured < l)
        if (auto r = visit(measured, *at_measured)) return r;
    }
    if (auto r = visit(l, *v)) return r;
  }
  if (!measured_placed)
    if (auto r = visit(measured, *at_measured)) return r;
  return below->second;  // past the longest
}

}  // namespace

const EfficiencySpec::FusedCurve& fused_curve_for(const EfficiencySpec::FusedAttention& kernel,
                                                  int kernel_head_dim) {
  const auto it = kernel.by_head_dim.find(kernel_head_dim);
  return it != kernel.by_head_dim.end() ? it->second : kernel;
}

EfficiencySpec::FusedRates fused_rates_at(const EfficiencySpec::FusedCurve& kernel, double key_length) {
  EfficiencySpec::FusedRates r = kernel;
  if (kernel.by_seq_len.empty() || kernel.seq_len <= 0 || key_length <= 0) return r;
  using Rates = EfficiencySpec::FusedRates;
  r.forward = *interpolate(kernel, key_length, [](const Rates& x) { return std::optional(x.forward); });
  r.backward = *interpolate(kernel, key_length, [](const Rates& x) { return std::optional(x.backward); });
  r.forward_full = interpolate(kernel, key_length, [](const Rates& x) { return x.forward_full; });
  r.backward_full = interpolate(kernel, key_length, [](const Rates& x) { return x.backward_full; });
  return r;
}

FusedKernel fused_kernel_of(AttentionKind kind, const EfficiencySpec& efficiency) {
  switch (kind) {
    case AttentionKind::Flash3:
      return FusedKernel::Flash3;
    case AttentionKind::Triton:
      return FusedKernel::Triton;
    case AttentionKind::Flash:
      return efficiency.flash3 ? FusedKernel::Flash3 : FusedKernel::Flash2;
    case AttentionKind::Flash2:
    case AttentionKind::Unfused:
      break;
  }
  return FusedKernel::Flash2;
}

const std::optional<EfficiencySpec::FusedAttention>& fused_figures(const EfficiencySpec& efficiency,
                                                                   FusedKernel kernel) {
  switch (kernel) {
    case FusedKernel::Flash3:
      return efficiency.flash3;
    case FusedKernel::Triton:
      return efficiency.triton;
    case FusedKernel::Flash2:
      break;
  }
  return efficiency.flash2;
}

std::optional<EfficiencySpec::FusedAttention>& fused_figures(EfficiencySpec& efficiency, FusedKernel kernel) {
  return const_cast<std::optional<EfficiencySpec::FusedAttention>&>(
      fused_figures(std::as_const(efficiency), kernel));
}

int flash_kernel_head_dim(bool flash3, int head_dim) {
  static constexpr int kFa2[] = {32, 64, 96, 128, 160, 192, 256}, kFa3[] = {64, 96, 128, 192, 256};
  for (int size : flash3 ? std::span<const int>(kFa3) : std::span<const int>(kFa2))
    if (head_dim <= size) return size;
  return head_dim;
}

int fused_kernel_head_dim(FusedKernel kernel, int head_dim) {
  if (kernel == FusedKernel::Triton)
    return head_dim <= 0 ? head_dim : std::max(16, int(std::bit_ceil(unsigned(head_dim))));
  return flash_kernel_head_dim(kernel == FusedKernel::Flash3, head_dim);
}

}  // namespace paratwin::cost
