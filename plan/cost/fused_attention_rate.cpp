#include "plan/cost/fused_attention_rate.hpp"

#include <cmath>
#include <iterator>
#include <map>

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

}  // namespace paratwin::cost
