// Reading the scenario's `variability:` section.
#include "plan/spec/variability.hpp"

#include <cstdio>

namespace paratwin {

const EnumNames<NoiseDistribution> kNoiseDistributionNames = {{"lognormal", NoiseDistribution::Lognormal},
                                                              {"uniform", NoiseDistribution::Uniform}};
const EnumNames<KernelKind> kKernelKindNames = {{"forward", KernelKind::Forward},
                                                {"backward", KernelKind::Backward},
                                                {"recompute", KernelKind::Recompute},
                                                {"optimizer", KernelKind::Optimizer},
                                                {"copy", KernelKind::Copy}};

namespace {

// A uniform factor of mean 1 spans 1 +- cv * sqrt(3): beyond cv = 1/sqrt(3) it would reach zero.
constexpr double kUniformMaxCv = 0.577;
constexpr double kMaxCv = 2.0;

std::string format_cv(double cv) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", cv);
  return buf;
}

void check_cv(NoiseDistribution distribution, double cv, const DocNode* at, const std::string& what,
              Diagnostics& diag) {
  if (at && distribution == NoiseDistribution::Uniform && cv > kUniformMaxCv)
    diag.error(at->location, what + " = " + format_cv(cv) +
                                 " is too wide for distribution: uniform (a factor of mean 1 would reach 0); "
                                 "expected at most 0.577, or distribution: lognormal");
}

}  // namespace

VariabilitySpec parse_variability(const DocNode& node, Diagnostics& diag, FieldLocations* locations) {
  VariabilitySpec v;
  MapReader r(node, "variability", diag, locations);
  if (const DocNode* k = r.get("kernels")) {
    MapReader kr(*k, r.field("kernels"), diag, locations);
    kr.read_enum("distribution", v.kernel_distribution, kNoiseDistributionNames);
    double cv = 0;
    if (kr.read("cv", cv, 0.0, kMaxCv)) v.kernel_cv.fill(cv);
    check_cv(v.kernel_distribution, cv, kr.node().find("cv"), kr.field("cv"), diag);
    if (const DocNode* by_kind = kr.get("by_kind")) {
      MapReader br(*by_kind, kr.field("by_kind"), diag, locations);
      for (const auto& [name, kind] : kKernelKindNames) {
        double& out = v.kernel_cv[static_cast<int>(kind)];
        if (br.read(name, out, 0.0, kMaxCv))
          check_cv(v.kernel_distribution, out, br.node().find(name), br.field(name), diag);
      }
      br.finish();
    }
    kr.finish();
  }
  // {distribution, cv} under `key`, and the steps' correlation where `correlation` is given.
  auto read_noise = [&](const char* key, NoiseSpec& spec, double* correlation) {
    const DocNode* n = r.get(key);
    if (!n) return;
    MapReader nr(*n, r.field(key), diag, locations);
    nr.read_enum("distribution", spec.distribution, kNoiseDistributionNames);
    nr.read("cv", spec.cv, 0.0, kMaxCv, true);
    check_cv(spec.distribution, spec.cv, nr.node().find("cv"), nr.field("cv"), diag);
    if (correlation) nr.read("correlation", *correlation, 0.0, 1.0);
    nr.finish();
  };
  read_noise("steps", v.steps, &v.steps.correlation);
  read_noise("ranks", v.ranks, nullptr);
  r.finish();
  return v;
}

}  // namespace paratwin
