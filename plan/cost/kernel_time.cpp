// A kernel group's time on a device: each GEMM by its shape (tile and wave quantization, the tiles'
// fixed cost over K, then a roofline), fused attention at its measured rate, memory-bound kernels at a
// share of the memory bandwidth, and the launches (compute.hpp declares them).
#include <algorithm>
#include <cassert>
#include <cmath>

#include "plan/cost/compute.hpp"
#include "plan/cost/fused_attention_rate.hpp"
#include "plan/cost/memory.hpp"

namespace paratwin::cost {

namespace {

double peak_of(const DeviceSpec& device, Precision precision) {
  const auto peak = device.peak.find(precision);
  assert(peak != device.peak.end() && peak->second.value() > 0 && "device has no peak at this precision");
  return peak->second.value();
}

// The peak of what stays in 16 bits under fp8 training (attention, the output layer, the router:
// Transformer Engine runs only the layers' linear GEMMs in fp8).
double sixteen_bit_peak(const DeviceSpec& device, Precision precision) {
  if (precision == Precision::Fp8)
    for (Precision p : {Precision::Bf16, Precision::Fp16})
      if (auto it = device.peak.find(p); it != device.peak.end()) return it->second.value();
  return peak_of(device, precision);
}

// GEMM math time at the given share of the peak, wave quantization and the tiles' fixed cost over K
// included (a measured rate of unfused attention's products has both in it already).
double gemm_math_s(const Gemm& g, const DeviceSpec& device, Precision precision, double peak,
                   double efficiency) {
  const bool measured_attention = g.attention && device.efficiency.attention;
  const double share = measured_attention ? *device.efficiency.attention : efficiency;
  const double shape =
      measured_attention ? 1 : wave_efficiency(g, device.sms) * gemm_k_share(g, device, precision);
  return 2 * g.m * g.n * g.k * g.batch / (peak * share * shape);
}

// The peak a GEMM runs at and the share of it its largest shape reaches: under fp8 training the
// GEMMs that stay in 16 bits (output layer, router) run at the 16-bit peak and efficiency.
std::pair<double, double> gemm_peak_and_share(const Gemm& g, const DeviceSpec& device, Precision precision) {
  if (precision != Precision::Fp8) return {peak_of(device, precision), device.efficiency.gemm};
  if (!g.fp8) return {sixteen_bit_peak(device, precision), device.efficiency.gemm};
  return {peak_of(device, precision), device.efficiency.gemm_fp8.value_or(device.efficiency.gemm)};
}

// compute_time's terms but the GEMMs': memory-bound kernels, launches, fused attention.
KernelTimes other_terms(const KernelCost& cost, const DeviceSpec& device, Precision precision) {
  const EfficiencySpec& e = device.efficiency;
  KernelTimes t;
  t.memory_bound_s =
      memory_equivalent_bytes(cost, e) / (device.memory_bandwidth.value() * e.memory) +
      cost.optimizer_bytes.value() / (device.memory_bandwidth.value() * e.optimizer_or_memory());
  t.launch_s =
      e.kernel_launch.value() * cost.launches + e.synchronous_launch.value() * cost.synchronous_launches;
  if (cost.fused_attention_flops().value() > 0) {
    const FusedKernel kernel = fused_kernel_of(cost.fused_kernel, e);
    const auto& figures = fused_figures(e, kernel);
    const int d = cost.fused_head_dim, kernel_d = d > 0 ? fused_kernel_head_dim(kernel, d) : 0;
    const EfficiencySpec::FusedRates rates =
        figures ? fused_rates_at(fused_curve_for(*figures, kernel_d), cost.fused_key_length)
                : EfficiencySpec::FusedRates{e.gemm, e.gemm, {}, {}};
    const double padded = d > 0 ? double(kernel_d) / d : 1;
    const double peak = sixteen_bit_peak(device, precision);
    t.attention_s =
        padded *
        (cost.flash_forward_flops.value() / (peak * rates.forward) +
         cost.flash_backward_flops.value() / (peak * rates.backward) +
         cost.flash_full_forward_flops.value() / (peak * rates.forward_full.value_or(rates.forward)) +
         cost.flash_full_backward_flops.value() / (peak * rates.backward_full.value_or(rates.backward)));
  }
  return t;
}

// compute_time's terms with each GEMM costed by `gemm_s` (its time, or for the bound its math alone),
// added to `t` (other_terms) in the list's order.
template <typename GemmSeconds>
KernelTimes add_gemms(KernelTimes t, const GemmList& gemms, GemmSeconds gemm_s) {
  for (const Gemm& g : gemms) (g.attention ? t.attention_s : t.gemm_s) += g.count * gemm_s(g);
  return t;
}

template <typename GemmSeconds>
KernelTimes terms(const KernelCost& cost, const DeviceSpec& device, Precision precision, GemmSeconds gemm_s) {
  return add_gemms(other_terms(cost, device, precision), cost.gemms, gemm_s);
}

}  // namespace

double wave_efficiency(const Gemm& g, int sms) {
  if (sms <= 0) return 1;
  static constexpr double kTiles[][2] = {{256, 128}, {128, 256}, {128, 128}, {128, 64}, {64, 128}};
  // A grouped GEMM's groups are tiled each on its own: a weight gradient's one m x n result per copy;
  // a forward or input-gradient GEMM's m rows split among its copies (the experts' rows, taken even),
  // so each group's last tile row may be partly idle. All groups' tiles fill the waves together.
  const double groups = g.weight_copies, group_rows = g.copies_are_results ? g.m : g.m / groups;
  double best = 0;
  for (const auto& [tm, tn] : kTiles) {
    const double tiles = std::ceil(group_rows / tm) * std::ceil(g.n / tn) * groups * g.batch;
    const double waves = std::ceil(tiles / sms);
    best = std::max(best, group_rows * g.n * groups * g.batch / (waves * sms * tm * tn));
  }
  return best;
}

double gemm_k_share(const Gemm& g, const DeviceSpec& device, Precision precision) {
  const double steps = device.efficiency.gemm_tile_k_steps;
  if (steps <= 0) return 1;
  // Operands of 1 byte where Transformer Engine runs the GEMM in fp8, else the training precision's
  // elements (16 bits under fp8 training).
  const double operand_bytes = precision == Precision::Fp8 && g.fp8 ? 1 : element_bytes(precision);
  const double k_step = 128 / operand_bytes;
  return g.k / (g.k + steps * k_step);
}

Seconds gemm_time(const Gemm& g, const DeviceSpec& device, Precision precision) {
  const auto [peak, share] = gemm_peak_and_share(g, device, precision);
  const double math = gemm_math_s(g, device, precision, peak, share);
  const double memory =
      g.bytes(element_bytes(precision)) / (device.memory_bandwidth.value() * device.efficiency.memory);
  return Seconds(std::max(math, memory));
}

KernelTimes kernel_times(const KernelCost& cost, const DeviceSpec& device, Precision precision) {
  return terms(cost, device, precision,
               [&](const Gemm& g) { return gemm_time(g, device, precision).value(); });
}

KernelTimes KernelTimer::operator()(const KernelCost& cost) {
  KernelTimes t = other_terms(cost, device_, precision_);
  if (cost.gemms.size() == 0) return t;
  auto gemm_s = [&](const Gemm& g) { return gemm_time(g, device_, precision_).value(); };
  auto [it, fresh] = gemms_.try_emplace(cost.gemms.begin());
  if (fresh) it->second = add_gemms({}, cost.gemms, gemm_s);
  // A list's GEMM terms added to zero are what adding them to `t` adds, but where unfused attention's
  // products would add to a fused kernel's time (a group with both: lowering builds none).
  if (it->second.attention_s != 0 && t.attention_s != 0) return add_gemms(t, cost.gemms, gemm_s);
  t.gemm_s = it->second.gemm_s;
  t.attention_s += it->second.attention_s;
  return t;
}

Seconds compute_time(const KernelCost& cost, const DeviceSpec& device, Precision precision) {
  return Seconds(kernel_times(cost, device, precision).total());
}

// The same terms with each GEMM at its math time: each term no larger than compute_time's, summed in
// the same order, so the bound holds exactly.
Seconds compute_time_bound(const KernelCost& cost, const DeviceSpec& device, Precision precision) {
  return Seconds(terms(cost, device, precision, [&](const Gemm& g) {
                   const auto [peak, share] = gemm_peak_and_share(g, device, precision);
                   return gemm_math_s(g, device, precision, peak, share);
                 }).total());
}

double dense_gemm_seconds_at_full_efficiency(const KernelCost& cost, const DeviceSpec& device,
                                             Precision precision) {
  double s = 0;
  for (const Gemm& g : cost.gemms)
    if (!g.attention)
      s += g.count * gemm_math_s(g, device, precision, gemm_peak_and_share(g, device, precision).first, 1.0);
  return s;
}

}  // namespace paratwin::cost
