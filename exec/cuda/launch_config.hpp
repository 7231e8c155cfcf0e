// Launch configurations of the CUDA kernels, computed in plain C++ (no CUDA) so that they are unit
// tested on any machine: grid sizes that cover every element, block shapes the kernels assume, and
// the radix-select step of top-k.
#pragma once

#include <array>
#include <cstdint>

namespace paratwin::exec::cuda {

struct LaunchShape {
  unsigned grid_x = 1, grid_y = 1;
  unsigned block_x = 1, block_y = 1;
  bool empty() const { return grid_x == 0 || grid_y == 0; }
};

constexpr int kWarp = 32;
constexpr int kElementwiseThreads = 256;
constexpr int kWarpsPerRowBlock = 8;         // row-per-warp kernels: 8 rows (256 threads) per block
constexpr int kColumnBlockRows = 8;          // column reductions: a (32, 8) block ...
constexpr int kColumnChunkRows = 256;        // ... sums 256 rows of 32 columns, then one atomicAdd each
constexpr int kRowBlockThreads = 512;        // one block per row (cross-entropy over the vocabulary)
constexpr unsigned kMaxGridX = 2147483647u;  // 2^31 - 1
constexpr unsigned kMaxGridY = 65535u;

// One thread per element, n elements. Throws std::invalid_argument when n needs more than 2^31 - 1
// blocks (n is then beyond any tensor of the live backend).
LaunchShape elementwise_launch(int64_t n);
// One warp per row, kWarpsPerRowBlock rows per block.
LaunchShape row_warp_launch(int64_t rows);
// One block of kRowBlockThreads per row.
LaunchShape row_block_launch(int64_t rows);
// Column sums over `rows` rows of `cols` columns: blocks of (32, kColumnBlockRows) threads, grid
// (ceil(cols/32), ceil(rows/kColumnChunkRows)). Throws when the row chunks exceed the grid's y limit.
LaunchShape column_reduce_launch(int64_t rows, int64_t cols);

// Top-k by radix select over the 32-bit keys of |value| (non-negative floats order as their bits):
// four passes of 8 bits, from the high byte. Given a pass's 256-bin histogram of the candidates and
// how many elements are still to be selected, the bin that holds the k-th largest key.
struct RadixPick {
  int bin = 0;                // the byte of the k-th largest key in this pass
  uint64_t above = 0;         // candidates in higher bins: all selected
  uint64_t still_needed = 0;  // k - above: to be chosen within `bin`
};
// Throws std::invalid_argument when `needed` is 0 or exceeds the candidates counted.
RadixPick pick_radix_bin(const std::array<uint64_t, 256>& histogram, uint64_t needed);

// The float-as-key ordering used by the radix select: non-negative floats compare as their bits.
uint32_t magnitude_key(float value);

}  // namespace paratwin::exec::cuda
