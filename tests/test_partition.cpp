// The layer partition DP against every partition of small random models: the slowest chunk, then the
// sum of chunks, subject to each rank's memory, whatever band and limit the DP narrows itself to.
#define BOOST_TEST_MODULE partition
#include <boost/test/unit_test.hpp>

#include <random>

#include "plan/search/partition.hpp"

using namespace paratwin;

namespace {

struct Instance {
  ChunkLayout layout;
  std::vector<double> layer_time, layer_bytes, rank_speed;
  double ends = 0;  // embedding on chunk 0, head on the last chunk
  double time(int c, int begin, int end) const {
    double t = 0;
    for (int l = begin; l < end; ++l) t += layer_time[l];
    if (c == 0 || c == layout.chunks - 1) t += ends;
    return t / rank_speed[c % layout.pp];
  }
  double bytes(int, int begin, int end) const {
    double b = 0;
    for (int l = begin; l < end; ++l) b += layer_bytes[l];
    return b;
  }
};

// Every partition into contiguous non-empty chunks, the best by (slowest, sum) that fits.
std::optional<std::pair<double, double>> brute_force(const Instance& x) {
  const int L = x.layout.layers, C = x.layout.chunks, v = C / x.layout.pp;
  std::optional<std::pair<double, double>> best;
  std::vector<int> cuts(C + 1, 0);
  cuts[C] = L;
  auto visit = [&](auto&& self, int c) -> void {
    if (c == C) {
      double worst = 0, total = 0;
      for (int k = 0; k < C; ++k) {
        if (x.bytes(k, cuts[k], cuts[k + 1]) > x.layout.capacity[k % x.layout.pp] / v) return;
        const double t = x.time(k, cuts[k], cuts[k + 1]);
        worst = std::max(worst, t), total += t;
      }
      if (!best || std::pair{worst, total} < *best) best = std::pair{worst, total};
      return;
    }
    const int last = L - (C - 1 - c);
    for (int end = cuts[c] + 1; end <= last; ++end) {
      if (c == C - 1 && end != L) continue;
      cuts[c + 1] = end;
      self(self, c + 1);
    }
  };
  visit(visit, 0);
  return best;
}

}  // namespace

BOOST_AUTO_TEST_CASE(partition_equals_brute_force_on_random_models) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> unit(0.2, 2.0);
  int feasible = 0, infeasible = 0;
  for (int trial = 0; trial < 400; ++trial) {
    Instance x;
    const int pp = 1 + trial % 3, v = 1 + (trial / 3) % 2;
    x.layout.chunks = pp * v;
    x.layout.pp = pp;
    x.layout.layers = x.layout.chunks + static_cast<int>(rng() % 9);
    for (int l = 0; l < x.layout.layers; ++l) {
      x.layer_time.push_back(unit(rng));
      x.layer_bytes.push_back(unit(rng));
    }
    for (int r = 0; r < pp; ++r) {
      x.rank_speed.push_back(unit(rng));
      // Some capacities too small for any partition, most enough for some.
      x.layout.capacity.push_back(v * unit(rng) * 2.5 * x.layout.layers / x.layout.chunks);
    }
    x.ends = unit(rng);
    const auto time = [&](int c, int b, int e) { return x.time(c, b, e); };
    const auto bytes = [&](int c, int b, int e) { return x.bytes(c, b, e); };
    const auto ranges = partition_layers(x.layout, time, bytes);
    const auto expected = brute_force(x);
    BOOST_TEST_CONTEXT("trial " << trial) {
      BOOST_REQUIRE(ranges.has_value() == expected.has_value());
      if (!ranges) {
        ++infeasible;
        continue;
      }
      ++feasible;
      double worst = 0, total = 0;
      for (int c = 0; c < x.layout.chunks; ++c) {
        const auto [b, e] = (*ranges)[c];
        BOOST_TEST(e > b);
        BOOST_TEST(x.bytes(c, b, e) <= x.layout.capacity[c % pp] / v);
        worst = std::max(worst, x.time(c, b, e)), total += x.time(c, b, e);
      }
      BOOST_TEST(worst == expected->first, boost::test_tools::tolerance(1e-12));
      BOOST_TEST(total == expected->second, boost::test_tools::tolerance(1e-12));
    }
  }
  BOOST_TEST(feasible > 100);
  BOOST_TEST(infeasible > 10);
}
