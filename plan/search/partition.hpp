// Layer-to-stage partition by dynamic programming over the model's chain of layer groups (embedding,
// the transformer layers, head and loss): minimizes the slowest chunk, then the sum of chunks, subject
// to each pipeline rank's memory.
//
// Bottleneck partition: best[c][l] = the smallest achievable max chunk time for chunks 0..c covering
// layers [0, l), with ties broken by the total. Memory is checked per chunk against its rank's share:
// a rank with v chunks gets the capacity left after its other chunks, which is approximated by
// requiring each chunk to fit in capacity / v (exact when v = 1).
//
// A template on the cost functions: the search runs it for every base it refines, some hundred
// million cost look-ups in all, and an indirect call per look-up was a tenth of the search's time.
//
// The DP only visits chunks no slower than a limit found first: the slowest chunk of a partition
// that fits, from greedy partitions (each chunk as long as a bound on chunk time and memory allow,
// which fits whenever any partition does, as time and memory only grow with a chunk's layers) under a
// bisected bound. Every cell on the optimum's path is at most the optimum's slowest chunk, so the
// limit leaves the DP's result as it is.
#pragma once

#include <limits>
#include <optional>
#include <vector>

namespace paratwin {

struct ChunkLayout {
  int layers = 0;
  int chunks = 0;  // pp x virtual_stages, in model order; chunk c runs on pipeline rank c % pp
  int pp = 1;
  std::vector<double> capacity;  // per pipeline rank
};

namespace partition_detail {
// A cell of the DP (outside the template: GCC 12 fails on a local class whose member initializers
// name a local constant).
struct Cell {
  double worst = std::numeric_limits<double>::infinity(), total = std::numeric_limits<double>::infinity();
  int from = -1;
};
}  // namespace partition_detail

// Contiguous layer ranges [begin, end) per chunk, every chunk at least one layer; nullopt when no
// partition fits in memory.
// - time(c, begin, end): one micro-batch's forward + backward through layers [begin, end) of chunk c
//   (the embedding belongs to chunk 0 and the head to the last chunk; the cost includes them);
// - bytes(c, begin, end): bytes pipeline rank c % pp needs for those layers of chunk c: states plus
//   the activations it holds at its peak. Memory of a rank is the sum over its chunks.
// Both must grow (weakly) as a chunk takes more layers.
template <class Time, class Bytes>
std::optional<std::vector<std::pair<int, int>>> partition_layers(const ChunkLayout& m, const Time& time,
                                                                 const Bytes& bytes) {
  const int L = m.layers, C = m.chunks;
  if (C < 1 || L < C) return std::nullopt;
  const int v = C / m.pp;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // The slowest chunk of the greedy partition under `bound` (infinity when it does not fit).
  auto greedy = [&](double bound) {
    double slowest = 0;
    for (int c = 0, begin = 0; c < C; ++c) {
      const double budget = m.capacity[c % m.pp] / v;
      const int last = L - (C - 1 - c);  // leaves a layer for each later chunk; the last chunk takes the rest
      int end = c == C - 1 ? L : begin + 1;
      if (time(c, begin, end) > bound || bytes(c, begin, end) > budget) return kInf;
      while (end < last && time(c, begin, end + 1) <= bound && bytes(c, begin, end + 1) <= budget) ++end;
      slowest = std::max(slowest, time(c, begin, end));
      begin = end;
    }
    return slowest;
  };
  double limit = greedy(kInf);
  if (limit == kInf) return std::nullopt;
  for (double low = 0; limit - low > 1e-3 * limit;) {
    const double mid = (low + limit) / 2, slowest = greedy(mid);
    if (slowest == kInf)
      low = mid;
    else
      limit = slowest;
  }
  using Cell = partition_detail::Cell;
  std::vector<Cell> best(static_cast<size_t>(C) * (L + 1));
  auto cell_at = [&](int c, int l) -> Cell& { return best[static_cast<size_t>(c) * (L + 1) + l]; };
  auto better = [](double w, double t, const Cell& c) {
    return w < c.worst || (w == c.worst && t < c.total);
  };
  for (int c = 0; c < C; ++c) {
    const int rank = c % m.pp;
    const double budget = m.capacity[rank] / v;
    // Chunk c ends at layer l; it needs at least one layer and leaves one for each later chunk.
    for (int l = c + 1; l <= L - (C - 1 - c); ++l) {
      Cell& cell = cell_at(c, l);
      // Longer chunks (smaller b) only take more time and memory: stop once either is past the best
      // (time first, the cheaper test; either one ends the scan at the same b).
      for (int b = c == 0 ? 0 : l - 1; b >= c; --b) {  // the first chunk starts at layer 0
        const double t = time(c, b, l);
        if (t > cell.worst || t > limit) break;
        if (bytes(c, b, l) > budget) break;
        const double w0 = c == 0 ? 0 : cell_at(c - 1, b).worst, t0 = c == 0 ? 0 : cell_at(c - 1, b).total;
        if (w0 > limit) continue;
        const double worst = std::max(w0, t), total = t0 + t;
        // Equal cells go to the smaller b (found later), as an ascending scan keeping the first would.
        if (better(worst, total, cell) || (worst == cell.worst && total == cell.total))
          cell = {worst, total, b};
      }
    }
  }
  if (cell_at(C - 1, L).worst == kInf) return std::nullopt;
  std::vector<std::pair<int, int>> ranges(C);
  for (int c = C - 1, l = L; c >= 0; --c) {
    const int b = cell_at(c, l).from;
    ranges[c] = {b, l};
    l = b;
  }
  return ranges;
}

}  // namespace paratwin
