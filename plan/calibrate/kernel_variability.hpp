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
  std::array<double, kKernelKinds> cv{};    // by KernelKind; 0 where nothing was measured
  std::array<int, kKernelKinds> tasks{};    // compute tasks of that kind measured with a spread
  std::array<int, kKernelKinds> samples{};  // their executions (steps x ranks)
  bool any() const;
};

// Pools each kind's tasks (their profile's cpu_cv: each rank's CPU time against its own mean over the
// measured steps), weighted by their executions less their ranks: the root of the mean squared
// relative deviation. Tasks whose profile recorded no cpu_cv, or measured fewer than 3 steps, are
// left out. A CV above the largest the scenario takes (2) is capped there.
KernelVariability measure_kernel_variability(const std::vector<ProfiledRun>& runs);

// "forward 3.6% (1 task, 58 executions), backward ..." (kinds measured only), or why nothing was.
std::string to_text(const KernelVariability& variability);

// The file `--set variability=FILE` reads: a header saying from which profiles and when, then
// `variability: {kernels: {distribution: lognormal, by_kind: {...}}}`.
std::string variability_yaml(const KernelVariability& variability, const std::vector<ProfiledRun>& runs,
                             const std::string& timestamp);

}  // namespace paratwin
