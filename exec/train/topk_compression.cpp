// Top-k selection, packing and the summing of gathered pairs (see topk_compression.hpp).
#include "exec/train/topk_compression.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace paratwin::exec {

TopKCompressor::TopKCompressor(const CompressionSpec& spec) : spec_(spec) {
  if (!(spec.ratio > 0 && spec.ratio <= 1))
    throw std::invalid_argument("top-k compression ratio " + std::to_string(spec.ratio) +
                                ": expected a share of the gradient in (0, 1]");
}

size_t TopKCompressor::pairs(size_t n) const {
  return std::clamp<size_t>(size_t(std::llround(spec_.ratio * double(n))), 1, std::max<size_t>(n, 1));
}

Buffer<float> TopKCompressor::compress(int bucket, const float* grads, size_t n, int rank, int ranks) {
  const size_t k = pairs(n);
  // acc = gradient + residual: what this rank owes the sum so far.
  Buffer<float>* residual = nullptr;
  if (spec_.error_feedback) {
    MemoryUseScope use(MemoryUse::Communication);
    residual = &residual_[bucket];
    if (residual->size() != n) residual->assign(n, 0.0f);
    for (size_t i = 0; i < n; ++i) (*residual)[i] += grads[i];
  }
  const float* acc = residual ? residual->data() : grads;
  // The k largest magnitudes; ties go to the lower index, so every run picks the same entries.
  order_.resize(n);
  for (size_t i = 0; i < n; ++i) order_[i] = uint32_t(i);
  const auto larger = [acc](uint32_t a, uint32_t b) {
    const float x = std::fabs(acc[a]), y = std::fabs(acc[b]);
    return x > y || (x == y && a < b);
  };
  std::nth_element(order_.begin(), order_.begin() + long(k - 1), order_.end(), larger);
  std::sort(order_.begin(), order_.begin() + long(k));
  MemoryUseScope use(MemoryUse::Communication);
  Buffer<float> out(size_t(ranks) * 2 * k, 0.0f);
  float* values = out.data() + size_t(rank) * 2 * k;
  float* indices = values + k;
  for (size_t j = 0; j < k; ++j) {
    const uint32_t i = order_[j];
    values[j] = acc[i];
    const int32_t index = int32_t(i);
    std::memcpy(indices + j, &index, sizeof index);  // the bits travel unchanged in a float slot
    if (residual) (*residual)[i] = 0.0f;             // sent: no longer owed
  }
  return out;
}

void TopKCompressor::decompress(const Buffer<float>& gathered, float* grads, size_t n, int ranks) const {
  const size_t k = pairs(n);
  if (gathered.size() != size_t(ranks) * 2 * k)
    throw std::logic_error("top-k: gathered " + std::to_string(gathered.size()) + " floats, expected " +
                           std::to_string(size_t(ranks) * 2 * k));
  std::fill(grads, grads + n, 0.0f);
  for (int r = 0; r < ranks; ++r) {
    const float* values = gathered.data() + size_t(r) * 2 * k;
    const float* indices = values + k;
    for (size_t j = 0; j < k; ++j) {
      int32_t index;
      std::memcpy(&index, indices + j, sizeof index);
      if (index < 0 || size_t(index) >= n)
        throw std::runtime_error("top-k: a received index is out of range");
      grads[index] += values[j];
    }
  }
}

}  // namespace paratwin::exec
