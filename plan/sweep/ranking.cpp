// Ranking a sweep's points by one figure.
#include "plan/sweep/ranking.hpp"

#include <algorithm>
#include <stdexcept>

namespace paratwin {

const std::vector<std::string>& rank_keys() {
  static const std::vector<std::string> keys = {"p95", "iteration_time", "time_to_train", "cost"};
  return keys;
}

std::optional<double> rank_value(const std::string& key, const PointResult& p) {
  if (!p.ok()) return std::nullopt;
  if (key == "p95") return p.p95_iteration_time_s;
  if (key == "iteration_time") return p.metrics.iteration_time_s;
  if (key == "time_to_train") return p.time_to_train_s;
  if (key == "cost") return p.cost_usd;
  throw std::invalid_argument("no ranking by " + key);
}

std::vector<std::pair<int, double>> rank_points(const std::string& key, const PointSource& points) {
  std::vector<std::pair<int, double>> out;
  points([&](const PointResult& p) {
    if (const auto v = rank_value(key, p)) out.push_back({p.index, *v});
  });
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  return out;
}

void write_ranking(std::ostream& out, const std::string& key, const PointSource& points, int top) {
  const std::vector<std::pair<int, double>> ranked = rank_points(key, points);
  if (ranked.empty()) {
    out << "  no point to rank by " << key
        << (key == "p95" ? " (simulate several iterations: --iterations N, or give the scenario variability)"
                         : "")
        << "\n";
    return;
  }
  const bool seconds = key != "cost";
  out << "  ranked by " << key << " (best first):";
  for (size_t i = 0; i < ranked.size() && int(i) < top; ++i)
    out << " #" << ranked[i].first << " "
        << (seconds ? to_string(Seconds(ranked[i].second)) : to_string(Dollars(ranked[i].second)))
        << (i + 1 < ranked.size() && int(i) + 1 < top ? "," : "");
  if (int(ranked.size()) > top) out << " ... (" << ranked.size() << " ranked)";
  out << "\n";
}

}  // namespace paratwin
