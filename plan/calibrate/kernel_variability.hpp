// The spread of kernel times that live runs measured, as the scenario's `variability:` section
// (plan/spec/variability.hpp) takes it: per kind of compute task, the coefficient of variation of one
// execution's time from one step to the next.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "plan/calibrate/profile.hpp"
#include "plan/spec/variability.hpp"

namespace paratwin {

struct KernelVariability {
  std::array<double, kKernelKinds> cv{};    // by KernelKind, each kernel's own; 0 where nothing was measured
  std::array<int, kKernelKinds> tasks{};    // compute tasks of that kind measured with a spread
  std::array<int, kKernelKinds> samples{};  // their executions (steps x ranks)
  double step_cv = 0;                       // what a rank's kernels share in one step
  int step_samples = 0;                     // the rank-steps it was measured over; 0: not measured
  double step_correlation = 0;              // how much of it the ranks share (0 with one rank)
  // How much the ranks differ throughout (a device's speed_cv): the spread of their mean step totals
  // less what step-to-step noise leaves in a mean of that many steps; over `ranks` ranks, 0: not measured.
  double rank_cv = 0;
  int ranks = 0;
  bool any() const;
};

// A profile's kernel k has CPU time m_k and step-to-step CV c_k, and its compute tasks' total varies
// by C (step_cpu_cv). Modelling each kernel's time as m_k x a step factor (CV s, shared by the rank's
// kernels in that step) x its own factor (CV e_k), c_k^2 = s^2 + e_k^2 and
// C^2 (sum m)^2 = s^2 ((sum m)^2 - sum m^2) + sum m^2 e_k^2, which gives s (0 where the kernels vary
// less together than independently, and where one kernel alone cannot tell them apart), and then e_k.
// The ranks' step totals correlate by step_cpu_correlation (runs of two ranks or more): that is the
// step factor's correlation between ranks (a negative one counts as 0).
// Each kind's e_k are pooled over its tasks, weighted by their executions less their ranks (the root
// of the mean square); s over the runs the same way. Tasks whose profile recorded no cpu_cv, or
// measured fewer than 3 steps, are left out. A CV above the largest the scenario takes (2) is capped.
// The ranks' persistent spread: their mean step totals over S steps differ by rank_cpu_cv R, of which
// step-to-step noise of CV C (step_cpu_cv) not shared between ranks (correlation rho) leaves
// (1 - rho) C^2 / S in the square: rank_cv^2 = R^2 - (1 - rho) C^2 / S (0 below), pooled over the runs
// of two ranks or more, weighted by their ranks less one.
KernelVariability measure_kernel_variability(const std::vector<ProfiledRun>& runs);

// "forward 3.6% (1 task, 58 executions), backward ...; whole steps 2.9% (58 rank-steps)" (what was
// measured only), or why nothing was.
std::string to_text(const KernelVariability& variability);

// The file `--set variability=FILE` reads: a header saying from which profiles and when, then
// `variability: {kernels: {distribution: lognormal, by_kind: {...}}, steps: {distribution, cv}}`.
std::string variability_yaml(const KernelVariability& variability, const std::vector<ProfiledRun>& runs,
                             const std::string& timestamp);

}  // namespace paratwin
