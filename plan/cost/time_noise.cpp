// Variability draws: lognormal or uniform factors of mean 1, keyed by what they are for.
#include "plan/cost/time_noise.hpp"

#include <cmath>

namespace paratwin {
namespace {

std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  return SeededRandom(a ^ (b * 0x9e3779b97f4a7c15ULL)).next();
}

// A draw of mean 0 and variance 1 of the kind the distribution is built from: normal for lognormal
// factors, uniform on [-sqrt(3), sqrt(3)] for uniform ones.
double unit_draw(NoiseDistribution distribution, SeededRandom& random) {
  return distribution == NoiseDistribution::Lognormal ? random.normal()
                                                      : std::sqrt(3.0) * (2.0 * random.uniform() - 1.0);
}

// The factor of mean 1 and coefficient of variation `cv` that the unit draw `z` gives.
double factor_of(NoiseDistribution distribution, double cv, double z) {
  switch (distribution) {
    case NoiseDistribution::Lognormal: {
      // ln X ~ N(mu, sigma^2) with E[X] = 1 and Var[X] = cv^2: sigma^2 = ln(1 + cv^2), mu = -sigma^2 / 2.
      const double sigma2 = std::log1p(cv * cv);
      return std::exp(-0.5 * sigma2 + std::sqrt(sigma2) * z);
    }
    case NoiseDistribution::Uniform:  // 1 +- cv * sqrt(3): mean 1, standard deviation cv
      return 1.0 + cv * z;
  }
  return 1.0;
}

}  // namespace

double draw_factor(NoiseDistribution distribution, double cv, SeededRandom& random) {
  return cv > 0 ? factor_of(distribution, cv, unit_draw(distribution, random)) : 1.0;
}

double draw_factor(NoiseDistribution distribution, double cv, double correlation, SeededRandom& shared,
                   SeededRandom& own) {
  if (cv <= 0) return 1.0;
  const double z = std::sqrt(correlation) * unit_draw(distribution, shared) +
                   std::sqrt(1 - correlation) * unit_draw(distribution, own);
  return factor_of(distribution, cv, z);
}

std::vector<double> draw_gpu_slowness(const NoiseSpec& ranks, int gpus, std::uint64_t seed) {
  if (ranks.cv <= 0) return {};
  SeededRandom random(mix(seed, 0x51047e55ULL));
  std::vector<double> out(static_cast<size_t>(gpus));
  for (double& f : out) f = draw_factor(ranks.distribution, ranks.cv, random);
  return out;
}

KernelNoise::KernelNoise(const VariabilitySpec& variability, std::uint64_t seed)
    : active_(variability.kernels_vary() || variability.steps_vary()),
      distribution_(variability.kernel_distribution),
      cv_(static_cast<size_t>(TaskKind::Copy) + 1, 0.0),
      seed_(mix(seed, 0x6e015eULL)) {
  cv_[static_cast<int>(TaskKind::Forward)] = variability.kernel_cv[static_cast<int>(KernelKind::Forward)];
  cv_[static_cast<int>(TaskKind::Backward)] = variability.kernel_cv[static_cast<int>(KernelKind::Backward)];
  cv_[static_cast<int>(TaskKind::Recompute)] = variability.kernel_cv[static_cast<int>(KernelKind::Recompute)];
  cv_[static_cast<int>(TaskKind::Optimizer)] = variability.kernel_cv[static_cast<int>(KernelKind::Optimizer)];
  cv_[static_cast<int>(TaskKind::Copy)] = variability.kernel_cv[static_cast<int>(KernelKind::Copy)];
  steps_ = variability.steps;
}

double KernelNoise::factor(TaskKind kind, int gpu, int task, int iteration) const {
  if (!active_) return 1.0;
  double f = 1.0;
  if (const double cv = cv_[static_cast<size_t>(kind)]; cv > 0) {
    SeededRandom random(
        mix(mix(mix(seed_, std::uint64_t(gpu)), std::uint64_t(task)), std::uint64_t(iteration)));
    f = draw_factor(distribution_, cv, random);
  }
  const bool compute = kind == TaskKind::Forward || kind == TaskKind::Backward ||
                       kind == TaskKind::Recompute || kind == TaskKind::Optimizer;
  if (compute && steps_.cv > 0) {  // keyed without the task: every kernel of the iteration shares it
    const std::uint64_t step = mix(mix(seed_, 0x57e9ULL), std::uint64_t(iteration));
    SeededRandom shared(step), own(mix(step, std::uint64_t(gpu) + 1));
    f *= draw_factor(steps_.distribution, steps_.cv, steps_.correlation, shared, own);
  }
  return f;
}

}  // namespace paratwin
