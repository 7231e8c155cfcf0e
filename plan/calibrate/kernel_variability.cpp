// Kernel-time coefficients of variation from profiles.
#include "plan/calibrate/kernel_variability.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

namespace paratwin {
namespace {

constexpr double kMaxCv = 2.0;  // the largest the scenario's variability takes

std::optional<KernelKind> kernel_kind(TaskKind kind) {
  switch (kind) {
    case TaskKind::Forward:
      return KernelKind::Forward;
    case TaskKind::Backward:
      return KernelKind::Backward;
    case TaskKind::Recompute:
      return KernelKind::Recompute;
    case TaskKind::Optimizer:
      return KernelKind::Optimizer;
    default:
      return std::nullopt;  // offload copies: their copy stream is measured in wall time, not spread
  }
}

}  // namespace

bool KernelVariability::any() const {
  return std::any_of(tasks.begin(), tasks.end(), [](int n) { return n > 0; });
}

KernelVariability measure_kernel_variability(const std::vector<ProfiledRun>& runs) {
  KernelVariability v;
  std::array<double, kKernelKinds> squares{}, weights{};
  double step_squares = 0, step_weight = 0, correlation_sum = 0, correlation_weight = 0;
  double rank_squares = 0, rank_weight = 0;
  for (const ProfiledRun& run : runs) {
    if (run.profile.measured_steps < 3) continue;
    const Role& role = run.program.roles.front();
    std::vector<size_t> measured;  // compute tasks with a recorded spread
    for (size_t i = 0; i < role.tasks.size(); ++i) {
      const ProfiledTask& m = run.profile.tasks[i];
      if (kernel_kind(role.tasks[i].kind) && role.tasks[i].stream == StreamKind::Compute && m.count >= 2 &&
          m.cpu_cv >= 0)
        measured.push_back(i);
    }
    if (measured.empty()) continue;
    // The step factor's square, from the step total's spread against its kernels' own.
    double step2 = 0;
    if (run.profile.step_cpu_cv >= 0) {
      double total = 0, sum_m2 = 0, sum_m2c2 = 0;
      for (size_t i : measured) {
        const ProfiledTask& m = run.profile.tasks[i];
        total += m.cpu_s;
        sum_m2 += m.cpu_s * m.cpu_s;
        sum_m2c2 += std::pow(m.cpu_s * m.cpu_cv, 2);
      }
      const double apart = total * total - sum_m2;  // 0 with one kernel: nothing to tell apart
      if (apart > 1e-12 * total * total)
        step2 = std::max(0.0, (std::pow(run.profile.step_cpu_cv * total, 2) - sum_m2c2) / apart);
      const ProfiledTask& first = run.profile.tasks[measured.front()];
      const double rank_steps = first.count, dof = rank_steps - rank_steps / run.profile.measured_steps;
      step_squares += step2 * dof;
      step_weight += dof;
      v.step_samples += first.count;
      const double ranks = rank_steps / run.profile.measured_steps;
      const double rho = std::max(0.0, run.profile.step_cpu_correlation);
      if (ranks >= 2 && run.profile.step_cpu_correlation > -1) {
        correlation_sum += rho * dof;
        correlation_weight += dof;
      }
      if (ranks >= 2 && run.profile.rank_cpu_cv >= 0) {
        const double noise = (1 - rho) * std::pow(run.profile.step_cpu_cv, 2) / run.profile.measured_steps;
        rank_squares += std::max(0.0, std::pow(run.profile.rank_cpu_cv, 2) - noise) * (ranks - 1);
        rank_weight += ranks - 1;
        v.ranks += int(std::lround(ranks));
      }
    }
    for (size_t i : measured) {
      const ProfiledTask& m = run.profile.tasks[i];
      const auto k = size_t(*kernel_kind(role.tasks[i].kind));
      // cpu_cv's degrees of freedom: each rank's steps less one.
      const double dof = m.count - double(m.count) / run.profile.measured_steps;
      squares[k] += std::max(0.0, m.cpu_cv * m.cpu_cv - step2) * dof;
      weights[k] += dof;
      ++v.tasks[k];
      v.samples[k] += m.count;
    }
  }
  for (size_t k = 0; k < v.cv.size(); ++k)
    if (weights[k] > 0) v.cv[k] = std::min(kMaxCv, std::sqrt(squares[k] / weights[k]));
  if (step_weight > 0) v.step_cv = std::min(kMaxCv, std::sqrt(step_squares / step_weight));
  if (correlation_weight > 0) v.step_correlation = correlation_sum / correlation_weight;
  if (rank_weight > 0) v.rank_cv = std::min(kMaxCv, std::sqrt(rank_squares / rank_weight));
  return v;
}

std::string to_text(const KernelVariability& v) {
  if (!v.any()) return "not measured: profile 3 steps or more after the first";
  std::string text;
  for (const auto& [name, kind] : kKernelKindNames) {
    const auto k = size_t(kind);
    if (v.tasks[k] == 0) continue;
    char item[120];
    std::snprintf(item, sizeof item, "%s%s %.1f%% (%d task%s, %d executions)", text.empty() ? "" : ", ",
                  name.c_str(), 100 * v.cv[k], v.tasks[k], v.tasks[k] == 1 ? "" : "s", v.samples[k]);
    text += item;
  }
  if (v.step_samples > 0) {
    char item[120];
    std::snprintf(item, sizeof item, "; whole steps %.1f%%, correlated %.2f between ranks (%d rank-steps)",
                  100 * v.step_cv, v.step_correlation, v.step_samples);
    text += item;
  }
  if (v.ranks >= 2) {
    char item[120];
    std::snprintf(item, sizeof item, "; ranks apart throughout %.1f%% (%d ranks)", 100 * v.rank_cv, v.ranks);
    text += item;
  }
  return text;
}

std::string variability_yaml(const KernelVariability& v, const std::vector<ProfiledRun>& runs,
                             const std::string& timestamp) {
  std::string y = "# Kernel-time variability measured by `paratwin calibrate` on " + timestamp + " from";
  for (const ProfiledRun& run : runs) y += " " + run.profile.path;
  y += ":\n#   " + to_text(v) +
       "\n# Each compute task's CPU time against its rank's mean over the measured steps (so time other\n"
       "# processes took stays out), less what a rank's kernels shared in a step (steps), pooled per kind.\n"
       "# Use with --set variability=FILE.\n"
       "variability:\n  kernels:\n    distribution: lognormal\n    by_kind:\n";
  char line[120];
  for (const auto& [name, kind] : kKernelKindNames) {
    const auto k = size_t(kind);
    if (v.tasks[k] == 0) continue;
    std::snprintf(line, sizeof line, "      %s: %.6g\n", name.c_str(), v.cv[k]);
    y += line;
  }
  if (v.step_samples > 0) {
    std::snprintf(line, sizeof line,
                  "  steps:\n    distribution: lognormal\n    cv: %.6g\n    correlation: %.6g\n", v.step_cv,
                  v.step_correlation);
    y += line;
  }
  return y;
}

}  // namespace paratwin
