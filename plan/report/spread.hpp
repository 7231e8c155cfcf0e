// The spread of simulated iteration times: percentiles and how often a step is much slower than the
// noise-free one. Shared by `simulate` (which measures it), `sweep` (which ranks by its P95) and the
// GUI (which plots it).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace paratwin {

struct IterationSpread {
  std::vector<double> times_s;  // every simulated iteration, in order
  double noise_free_s = 0;      // the same plan and seed without variability
  double mean_s = 0, p5_s = 0, p50_s = 0, p95_s = 0, p99_s = 0, max_s = 0;
  double slower_than_pct = 0;  // x of the next figure
  double p_slower = 0;         // fraction of iterations more than x% slower than noise_free_s
};

// The q-quantile (0 <= q <= 1) of `values`, interpolated linearly between the two nearest order
// statistics (numpy's default); 0 for no values.
double quantile(std::vector<double> values, double q);

// Summarizes `times_s` against `noise_free_s`; `slower_than_pct` is the x in "more than x% slower".
IterationSpread summarize_spread(std::vector<double> times_s, double noise_free_s, double slower_than_pct);

// The empirical distribution function of `times_s` as a staircase of (time, fraction of iterations at
// most that time) points, from (first, 0) to (last, 1); empty for no times.
std::vector<std::pair<double, double>> empirical_cdf(std::vector<double> times_s);

struct HistogramBin {
  double from_s = 0, to_s = 0;
  int count = 0;
};
// `bins` equal bins from the least to the largest time (one bin when they are all equal).
std::vector<HistogramBin> histogram(const std::vector<double>& times_s, int bins);

nlohmann::json to_json(const IterationSpread& spread);
// Throws nlohmann::json's exceptions when a key is missing or mistyped.
IterationSpread spread_from_json(const nlohmann::json& json);
// Lines for the report's table.
std::string to_text(const IterationSpread& spread);

}  // namespace paratwin
