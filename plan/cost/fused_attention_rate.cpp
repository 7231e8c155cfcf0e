#include "plan/cost/fused_attention_rate.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <iterator>
#include <map>
#include <span>

namespace paratwin::cost {

namespace {

// One rate (chosen by `rate`) at `length` from the points that give it.
template <class Rate>
std::optional<double> interpolate(const EfficiencySpec::FusedAttention& kernel, double length, Rate rate) {
  const std::optional<double> at_measured = rate(kernel);
  if (!at_measured) return std::nullopt;
  std::map<double, double> points{{double(kernel.seq_len), *at_measured}};
  for (const auto& [l, rates] : kernel.by_seq_len)
    if (const std::optional<double> v = rate(rates)) points[l] = *v;
  const auto above = points.lower_bound(length);
  if (above == points.begin()) return above->second;
  if (above == points.end()) return std::prev(above)->second;
  const auto below = std::prev(above);
  const double t = std::log(length / below->first) / std::log(above->first / below->first);
  return below->second + t * (above->second - below->second);
}

}  // namespace

EfficiencySpec::FusedRates fused_rates_at(const EfficiencySpec::FusedAttention& kernel, double key_length) {
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
