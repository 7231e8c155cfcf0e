// Layer-to-stage partition by dynamic programming over the model's chain of layer groups (embedding,
// the transformer layers, head and loss): minimizes the slowest chunk, then the sum of chunks, subject
// to each pipeline rank's memory.
//
// Bottleneck partition: the smallest achievable slowest chunk, then among the partitions with no chunk
// slower, the smallest total. Memory is checked per chunk against its rank's share:
// a rank with v chunks gets the capacity left after its other chunks, which is approximated by
// requiring each chunk to fit in capacity / v (exact when v = 1).
//
// A template on the cost functions: the search runs it for every base it refines, some hundred
// million cost look-ups in all, and an indirect call per look-up was a tenth of the search's time.
//
// The DP only visits chunks no slower than a limit found first, the slowest chunk of a partition that
// fits (greedy partitions under a bisected bound), and only the chunk ends that some partition under
// the limit can have. Every cell on the optimum's path is at most the optimum's slowest chunk, so
// this leaves the DP's result as it is (tests/test_partition.cpp checks it against brute force).
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

// partition_layers' working arrays, kept by a caller that partitions many times: fresh ones each call
// were most of the search's page faults.
struct PartitionScratch {
  std::vector<double> worst, total;
  std::vector<int> from, ends, highest, lowest, from_back;
};

// Contiguous layer ranges [begin, end) per chunk, every chunk at least one layer; nullopt when no
// partition fits in memory.
// - time(c, begin, end): one micro-batch's forward + backward through layers [begin, end) of chunk c
//   (the embedding belongs to chunk 0 and the head to the last chunk; the cost includes them);
// - bytes(c, begin, end): bytes pipeline rank c % pp needs for those layers of chunk c: states plus
//   the activations it holds at its peak. Memory of a rank is the sum over its chunks.
// Both must grow (weakly) as a chunk takes more layers.
template <class Time, class Bytes>
std::optional<std::vector<std::pair<int, int>>> partition_layers(const ChunkLayout& m, const Time& time,
                                                                 const Bytes& bytes,
                                                                 PartitionScratch& scratch) {
  const int L = m.layers, C = m.chunks;
  if (C < 1 || L < C) return std::nullopt;
  const int v = C / m.pp;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  auto fits = [&](int c, int begin, int end, double bound) {
    return time(c, begin, end) <= bound && bytes(c, begin, end) <= m.capacity[c % m.pp] / v;
  };
  // A greedy partition under `bound`: each chunk as long as it fits, leaving a layer for each later
  // chunk (the last one takes the rest). When it fits, its ends are at least those of any partition
  // that fits under the bound (by induction over the chunks: time and memory only grow with a
  // chunk's layers); it can fail where another partition fits (running ahead can leave a later,
  // smaller rank a layer too many). Returns its slowest chunk, infinity when it fails.
  std::vector<int>& ends = scratch.ends;
  ends.assign(C, 0);
  auto greedy = [&](double bound) {
    double slowest = 0;
    for (int c = 0, begin = 0; c < C; ++c) {
      const int last = L - (C - 1 - c);
      int end = c == C - 1 ? L : begin + 1;
      if (!fits(c, begin, end, bound)) return kInf;
      while (end < last && fits(c, begin, end + 1, bound)) ++end;
      slowest = std::max(slowest, time(c, begin, end));
      ends[c] = begin = end;
    }
    return slowest;
  };
  // The limit: the slowest chunk of the best greedy partition found by bisection (infinity, and no
  // band, if none fits). The DP's band: chunk c ends in [lowest[c], highest[c]] in every partition
  // that fits under the limit, the highest from that greedy partition, the lowest from the same
  // greedy run from the last layer back.
  double limit = kInf;
  std::vector<int>&highest = scratch.highest, &lowest = scratch.lowest;
  highest.resize(C), lowest.resize(C);
  for (int c = 0; c < C; ++c) highest[c] = L - (C - 1 - c), lowest[c] = c + 1;
  for (double low = 0, bound = kInf; limit == kInf || limit - low > 1e-2 * limit; bound = (low + limit) / 2) {
    const double slowest = greedy(bound);
    if (slowest == kInf && limit == kInf) break;
    if (slowest == kInf) {
      low = bound;
    } else {
      limit = slowest;
      highest = ends;
    }
  }
  if (limit < kInf) {
    std::vector<int>& from_back = scratch.from_back;
    from_back.assign(C, L);
    bool failed = false;
    for (int c = C - 1, end = L; c > 0 && !failed; --c) {
      int begin = end - 1;
      failed = !fits(c, begin, end, limit);
      while (begin > c && fits(c, begin - 1, end, limit)) --begin;
      from_back[c - 1] = end = begin;
    }
    if (!failed) lowest = from_back;
  }
  // Two passes over the band: the smallest slowest chunk, then the smallest sum of chunks with none
  // slower than that. Cells: [c][l] for chunks 0..c covering layers [0, l).
  std::vector<double>&worst = scratch.worst, &total = scratch.total;
  std::vector<int>& from = scratch.from;
  worst.assign(static_cast<size_t>(C) * (L + 1), kInf);
  total.assign(worst.size(), kInf);
  from.assign(worst.size(), -1);
  auto at = [&](int c, int l) { return static_cast<size_t>(c) * (L + 1) + l; };
  auto band = [&](int c, auto&& visit) {
    const double budget = m.capacity[c % m.pp] / v;
    // Chunk c ends at layer l; it needs at least one layer and leaves one for each later chunk.
    for (int l = std::max(c + 1, lowest[c]); l <= std::min(L - (C - 1 - c), highest[c]); ++l) {
      const int first_b = c == 0 ? 0 : std::min(l - 1, highest[c - 1]);  // the first chunk starts at 0
      const int last_b = c == 0 ? 0 : std::max(c, lowest[c - 1]);
      // Longer chunks (smaller b) only take more time and memory: stop once either is too much.
      for (int b = first_b; b >= last_b; --b) {
        if (bytes(c, b, l) > budget || !visit(l, b, time(c, b, l))) break;
      }
    }
  };
  for (int c = 0; c < C; ++c)
    band(c, [&](int l, int b, double t) {
      double& cell = worst[at(c, l)];
      if (t > cell || t > limit) return false;
      cell = std::min(cell, std::max(c == 0 ? 0 : worst[at(c - 1, b)], t));
      return true;
    });
  const double slowest = worst[at(C - 1, L)];
  if (slowest == kInf) return std::nullopt;
  for (int c = 0; c < C; ++c)
    band(c, [&](int l, int b, double t) {
      if (t > slowest) return false;
      const double sum = (c == 0 ? 0 : total[at(c - 1, b)]) + t;
      // Equal sums go to the smaller b (found later).
      if (sum <= total[at(c, l)]) total[at(c, l)] = sum, from[at(c, l)] = b;
      return true;
    });
  std::vector<std::pair<int, int>> ranges(C);
  for (int c = C - 1, l = L; c >= 0; --c) {
    const int b = from[at(c, l)];
    ranges[c] = {b, l};
    l = b;
  }
  return ranges;
}

template <class Time, class Bytes>
std::optional<std::vector<std::pair<int, int>>> partition_layers(const ChunkLayout& m, const Time& time,
                                                                 const Bytes& bytes) {
  PartitionScratch scratch;
  return partition_layers(m, time, bytes, scratch);
}

}  // namespace paratwin
