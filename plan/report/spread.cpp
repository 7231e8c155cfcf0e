// Percentiles of the simulated iteration times and the chance of a slow step.
#include "plan/report/spread.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "plan/spec/units.hpp"

namespace paratwin {
namespace {

std::string slower_label(double pct) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "steps > %g%% slower", pct);
  return buf;
}

}  // namespace

double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double at = std::clamp(q, 0.0, 1.0) * double(values.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(at));
  const size_t above = std::min(below + 1, values.size() - 1);
  return values[below] + (at - double(below)) * (values[above] - values[below]);
}

IterationSpread summarize_spread(std::vector<double> times_s, double noise_free_s, double slower_than_pct) {
  IterationSpread s;
  s.noise_free_s = noise_free_s;
  s.slower_than_pct = slower_than_pct;
  if (!times_s.empty()) {
    s.mean_s = std::accumulate(times_s.begin(), times_s.end(), 0.0) / double(times_s.size());
    s.p5_s = quantile(times_s, 0.05);
    s.p50_s = quantile(times_s, 0.50);
    s.p95_s = quantile(times_s, 0.95);
    s.p99_s = quantile(times_s, 0.99);
    s.max_s = *std::max_element(times_s.begin(), times_s.end());
    const double limit = noise_free_s * (1 + slower_than_pct / 100);
    s.p_slower = double(std::count_if(times_s.begin(), times_s.end(), [&](double t) { return t > limit; })) /
                 double(times_s.size());
  }
  s.times_s = std::move(times_s);
  return s;
}

std::vector<std::pair<double, double>> empirical_cdf(std::vector<double> times_s) {
  std::sort(times_s.begin(), times_s.end());
  std::vector<std::pair<double, double>> out;
  const double n = double(times_s.size());
  for (size_t i = 0; i < times_s.size(); ++i) {
    out.push_back({times_s[i], double(i) / n});
    out.push_back({times_s[i], double(i + 1) / n});
  }
  return out;
}

std::vector<HistogramBin> histogram(const std::vector<double>& times_s, int bins) {
  if (times_s.empty() || bins < 1) return {};
  const auto [lo, hi] = std::minmax_element(times_s.begin(), times_s.end());
  if (*hi <= *lo) return {{*lo, *hi, int(times_s.size())}};
  std::vector<HistogramBin> out(static_cast<size_t>(bins));
  const double width = (*hi - *lo) / bins;
  for (int b = 0; b < bins; ++b) out[b] = {*lo + b * width, *lo + (b + 1) * width, 0};
  for (double t : times_s) ++out[std::min(bins - 1, static_cast<int>((t - *lo) / width))].count;
  return out;
}

nlohmann::json to_json(const IterationSpread& s) {
  return {{"iterations", s.times_s.size()},
          {"noise_free_s", s.noise_free_s},
          {"mean_s", s.mean_s},
          {"p5_s", s.p5_s},
          {"p50_s", s.p50_s},
          {"p95_s", s.p95_s},
          {"p99_s", s.p99_s},
          {"max_s", s.max_s},
          {"slower_than_pct", s.slower_than_pct},
          {"p_slower", s.p_slower}};
}

IterationSpread spread_from_json(const nlohmann::json& j) {
  IterationSpread s;
  s.noise_free_s = j.at("noise_free_s").get<double>();
  s.mean_s = j.at("mean_s").get<double>();
  s.p5_s = j.at("p5_s").get<double>();
  s.p50_s = j.at("p50_s").get<double>();
  s.p95_s = j.at("p95_s").get<double>();
  s.p99_s = j.at("p99_s").get<double>();
  s.max_s = j.at("max_s").get<double>();
  s.slower_than_pct = j.at("slower_than_pct").get<double>();
  s.p_slower = j.at("p_slower").get<double>();
  return s;
}

std::string to_text(const IterationSpread& s) {
  auto t = [](double v) { return to_string(Seconds(v)); };
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "  iteration spread over %zu iterations:\n"
                "    %-26s %s\n    %-26s %s / %s / %s (mean %s, max %s)\n    %-26s %.1f%%\n",
                s.times_s.size(), "noise-free", t(s.noise_free_s).c_str(), "P50 / P95 / P99",
                t(s.p50_s).c_str(), t(s.p95_s).c_str(), t(s.p99_s).c_str(), t(s.mean_s).c_str(),
                t(s.max_s).c_str(), slower_label(s.slower_than_pct).c_str(), 100 * s.p_slower);
  return buf;
}

}  // namespace paratwin
