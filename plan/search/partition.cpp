// Bottleneck partition: best[c][l] = the smallest achievable max chunk time for chunks 0..c covering
// layers [0, l), with ties broken by the total. Memory is checked per chunk against its rank's share:
// a rank with v chunks gets the capacity left after its other chunks, which is approximated by
// requiring each chunk to fit in capacity / v (exact when v = 1).
#include "plan/search/partition.hpp"

#include <limits>

namespace paratwin {

std::optional<std::vector<std::pair<int, int>>> partition_layers(const ChunkCostModel& m) {
  const int L = m.layers, C = m.chunks;
  if (C < 1 || L < C) return std::nullopt;
  const int v = C / m.pp;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  struct Cell {
    double worst = kInf, total = kInf;
    int from = -1;
  };
  std::vector<std::vector<Cell>> best(C, std::vector<Cell>(L + 1));
  auto better = [](double w, double t, const Cell& c) {
    return w < c.worst || (w == c.worst && t < c.total);
  };
  for (int c = 0; c < C; ++c) {
    const int rank = c % m.pp;
    const double budget = m.capacity[rank] / v;
    // Chunk c ends at layer l; it needs at least one layer and leaves one for each later chunk.
    for (int l = c + 1; l <= L - (C - 1 - c); ++l) {
      // Longer chunks (smaller b) only take more time and memory: stop once either is past the best.
      for (int b = c == 0 ? 0 : l - 1; b >= c; --b) {  // the first chunk starts at layer 0
        if (m.bytes(c, b, l) > budget) break;
        const double t = m.time(c, b, l);
        Cell& cell = best[c][l];
        if (t > cell.worst) break;
        const double w0 = c == 0 ? 0 : best[c - 1][b].worst, t0 = c == 0 ? 0 : best[c - 1][b].total;
        if (w0 == kInf) continue;
        const double worst = std::max(w0, t), total = t0 + t;
        // Equal cells go to the smaller b (found later), as an ascending scan keeping the first would.
        if (better(worst, total, cell) || (worst == cell.worst && total == cell.total))
          cell = {worst, total, b};
      }
    }
  }
  if (best[C - 1][L].worst == kInf) return std::nullopt;
  std::vector<std::pair<int, int>> ranges(C);
  for (int c = C - 1, l = L; c >= 0; --c) {
    const int b = best[c][l].from;
    ranges[c] = {b, l};
    l = b;
  }
  return ranges;
}

}  // namespace paratwin
