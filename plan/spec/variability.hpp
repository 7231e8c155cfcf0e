// The scenario's `variability:` section: how much each kernel's time varies from one execution to the
// next (per kind of compute task), how much a GPU's whole step varies together (what slows every
// kernel of a step alike: the host, clocks, a neighbour's load) and how much each GPU is persistently
// slower or faster than its device's nominal speed (the straggler model generalised to a distribution
// over every GPU).
#pragma once

#include <array>

#include "plan/spec/reader.hpp"

namespace paratwin {

// The shape of a multiplicative time factor of mean 1 and a given coefficient of variation.
enum class NoiseDistribution { Lognormal, Uniform };
extern const EnumNames<NoiseDistribution> kNoiseDistributionNames;  // lognormal, uniform

struct NoiseSpec {
  NoiseDistribution distribution = NoiseDistribution::Lognormal;
  double cv = 0;  // standard deviation / mean of the factor; 0: no variation
};

// A step's factor: each GPU's, of which a share is common to every GPU of the job in that iteration.
struct StepNoiseSpec : NoiseSpec {
  // The correlation of two GPUs' factors in one iteration (what slows the whole machine or job at
  // once); 0: each GPU's own.
  double correlation = 0;
};

// The kinds of task whose kernels vary (communication varies through contention, simulated apart).
enum class KernelKind { Forward, Backward, Recompute, Optimizer, Copy };
inline constexpr int kKernelKinds = 5;
extern const EnumNames<KernelKind> kKernelKindNames;  // forward, backward, recompute, optimizer, copy

struct VariabilitySpec {
  // Per kind of kernel: each execution's time is the cost model's times an independent draw.
  NoiseDistribution kernel_distribution = NoiseDistribution::Lognormal;
  std::array<double, kKernelKinds> kernel_cv{};  // by KernelKind
  // Per GPU and iteration: every compute kernel of that GPU in that iteration shares this factor.
  StepNoiseSpec steps;
  // Per GPU, drawn once per seed: its compute takes this factor times the nominal time throughout.
  NoiseSpec ranks;

  bool kernels_vary() const {
    for (double cv : kernel_cv)
      if (cv > 0) return true;
    return false;
  }
  bool steps_vary() const { return steps.cv > 0; }
  bool ranks_vary() const { return ranks.cv > 0; }
  bool any() const { return kernels_vary() || steps_vary() || ranks_vary(); }
};

// Reads `variability:` ({kernels: {distribution, cv, by_kind: {forward: CV, ...}}, steps: {distribution,
// cv, correlation}, ranks: {distribution, cv}}); problems (a cv out of [0, 2], one a uniform factor cannot
// have, unknown keys) go to `diag`.
VariabilitySpec parse_variability(const DocNode& node, Diagnostics& diag, FieldLocations* locations);

}  // namespace paratwin
