// Grid and block sizes of the CUDA kernels; the radix-select step of top-k.
#include "exec/cuda/launch_config.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace paratwin::exec::cuda {

namespace {

unsigned blocks(int64_t n, int64_t per_block, unsigned limit, const char* what) {
  if (n < 0) throw std::invalid_argument(std::string(what) + ": negative size " + std::to_string(n));
  const int64_t b = (n + per_block - 1) / per_block;
  if (b > int64_t(limit))
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(n) + " elements need " +
                                std::to_string(b) + " blocks, more than the grid's " + std::to_string(limit));
  return unsigned(b);
}

}  // namespace

LaunchShape elementwise_launch(int64_t n) {
  LaunchShape s;
  s.grid_x = blocks(n, kElementwiseThreads, kMaxGridX, "elementwise launch");
  s.block_x = kElementwiseThreads;
  return s;
}

LaunchShape row_warp_launch(int64_t rows) {
  LaunchShape s;
  s.grid_x = blocks(rows, kWarpsPerRowBlock, kMaxGridX, "row launch");
  s.block_x = kWarpsPerRowBlock * kWarp;
  return s;
}

LaunchShape row_block_launch(int64_t rows) {
  LaunchShape s;
  s.grid_x = blocks(rows, 1, kMaxGridX, "row block launch");
  s.block_x = kRowBlockThreads;
  return s;
}

LaunchShape column_reduce_launch(int64_t rows, int64_t cols) {
  LaunchShape s;
  s.grid_x = blocks(cols, kWarp, kMaxGridX, "column reduction");
  s.grid_y = blocks(rows, kColumnChunkRows, kMaxGridY, "column reduction");
  s.block_x = kWarp;
  s.block_y = kColumnBlockRows;
  return s;
}

RadixPick pick_radix_bin(const std::array<uint64_t, 256>& histogram, uint64_t needed) {
  uint64_t total = 0;
  for (uint64_t c : histogram) total += c;
  if (needed == 0 || needed > total)
    throw std::invalid_argument("radix select: " + std::to_string(needed) + " to select among " +
                                std::to_string(total) + " candidates");
  RadixPick pick;
  for (int bin = 255; bin >= 0; --bin) {
    if (pick.above + histogram[bin] >= needed) {
      pick.bin = bin;
      pick.still_needed = needed - pick.above;
      return pick;
    }
    pick.above += histogram[bin];
  }
  throw std::logic_error("radix select: unreachable");  // needed <= total guarantees a bin
}

uint32_t magnitude_key(float value) {
  const float m = std::fabs(value);
  uint32_t bits;
  std::memcpy(&bits, &m, sizeof bits);
  return bits;
}

}  // namespace paratwin::exec::cuda
