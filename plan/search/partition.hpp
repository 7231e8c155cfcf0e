// Layer-to-stage partition by dynamic programming over the model's chain of layer groups (embedding,
// the transformer layers, head and loss): minimizes the slowest chunk, then the sum of chunks, subject
// to each pipeline rank's memory.
#pragma once

#include <functional>
#include <optional>
#include <vector>

namespace paratwin {

struct ChunkCostModel {
  int layers = 0;
  int chunks = 0;  // pp x virtual_stages, in model order; chunk c runs on pipeline rank c % pp
  int pp = 1;
  // Time of one micro-batch's forward + backward through layers [begin, end) of chunk c (the
  // embedding belongs to chunk 0 and the head to the last chunk; the cost includes them).
  std::function<double(int chunk, int begin, int end)> time;
  // Bytes pipeline rank r needs for layers [begin, end) of chunk c: states plus the activations it
  // holds at its peak. Memory of a rank is the sum over its chunks.
  std::function<double(int chunk, int begin, int end)> bytes;
  std::vector<double> capacity;  // per pipeline rank
};

// Contiguous layer ranges [begin, end) per chunk, every chunk at least one layer; nullopt when no
// partition fits in memory.
std::optional<std::vector<std::pair<int, int>>> partition_layers(const ChunkCostModel& model);

}  // namespace paratwin
