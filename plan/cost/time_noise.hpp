// Draws of the scenario's variability (plan/spec/variability.hpp): factors of mean 1 that multiply a
// kernel's time at one execution, or a GPU's compute throughout. Every draw is a function of the seed
// and what it is for (GPU, task, iteration), not of the order of asking, so a simulation whose actors
// run in any order draws the same numbers.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/ir/program.hpp"
#include "plan/spec/variability.hpp"
#include "plan/util/seeded_random.hpp"

namespace paratwin {

// One factor of mean 1 and coefficient of variation `cv` (0 gives exactly 1).
double draw_factor(NoiseDistribution distribution, double cv, SeededRandom& random);
// The same from a draw `shared` with other factors and one of its own, so that two such factors
// correlate by `correlation` (lognormal: in their logarithms; uniform: the weighted sum of two
// uniform draws, which keeps the mean and cv but is uniform only at correlation 0 or 1).
double draw_factor(NoiseDistribution distribution, double cv, double correlation, SeededRandom& shared,
                   SeededRandom& own);

// Each GPU's persistent slowness factor, drawn in GPU order from `seed`; empty when cv is 0.
std::vector<double> draw_gpu_slowness(const NoiseSpec& ranks, int gpus, std::uint64_t seed);

// The factor each kernel execution's time is multiplied by. Default-constructed: none (always 1).
class KernelNoise {
 public:
  KernelNoise() = default;
  KernelNoise(const VariabilitySpec& variability, std::uint64_t seed);

  bool active() const { return active_; }
  // The factor of task `task` (its index in its role) on `gpu` in iteration `iteration`: its own draw
  // times its GPU's step draw for that iteration (compute kernels only); 1 for kinds that are not
  // kernels (communication) and when nothing varies.
  double factor(TaskKind kind, int gpu, int task, int iteration) const;

 private:
  bool active_ = false;
  NoiseDistribution distribution_ = NoiseDistribution::Lognormal;
  std::vector<double> cv_;  // by TaskKind
  StepNoiseSpec steps_;
  std::uint64_t seed_ = 0;
};

}  // namespace paratwin
