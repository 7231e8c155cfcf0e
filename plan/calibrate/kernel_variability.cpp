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
  for (const ProfiledRun& run : runs) {
    if (run.profile.measured_steps < 3) continue;
    const Role& role = run.program.roles.front();
    for (size_t i = 0; i < role.tasks.size(); ++i) {
      const auto kind = kernel_kind(role.tasks[i].kind);
      const ProfiledTask& m = run.profile.tasks[i];
      if (!kind || role.tasks[i].stream != StreamKind::Compute || m.count < 2 || m.cpu_cv < 0) continue;
      const auto k = size_t(*kind);
      // cpu_cv's degrees of freedom: each rank's steps less one.
      const double dof = m.count - double(m.count) / run.profile.measured_steps;
      squares[k] += m.cpu_cv * m.cpu_cv * dof;
      weights[k] += dof;
      ++v.tasks[k];
      v.samples[k] += m.count;
    }
  }
  for (size_t k = 0; k < v.cv.size(); ++k)
    if (weights[k] > 0) v.cv[k] = std::min(kMaxCv, std::sqrt(squares[k] / weights[k]));
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
  return text;
}

std::string variability_yaml(const KernelVariability& v, const std::vector<ProfiledRun>& runs,
                             const std::string& timestamp) {
  std::string y = "# Kernel-time variability measured by `paratwin calibrate` on " + timestamp + " from";
  for (const ProfiledRun& run : runs) y += " " + run.profile.path;
  y += ":\n#   " + to_text(v) +
       "\n# Each compute task's CPU time against its rank's mean over the measured steps (so time other\n"
       "# processes took stays out), pooled per kind. Use with --set variability=FILE.\n"
       "variability:\n  kernels:\n    distribution: lognormal\n    by_kind:\n";
  for (const auto& [name, kind] : kKernelKindNames) {
    const auto k = size_t(kind);
    if (v.tasks[k] == 0) continue;
    char line[80];
    std::snprintf(line, sizeof line, "      %s: %.6g\n", name.c_str(), v.cv[k]);
    y += line;
  }
  return y;
}

}  // namespace paratwin
