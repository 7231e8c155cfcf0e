// Tensors of the live CPU backend: row-major Eigen matrices and maps over flat buffers. Weights,
// gradients and activations live in flat std::vectors (as in llm.c) and kernels view them as matrices.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>
#include <vector>

#include <Eigen/Core>

#include "exec/memory/memory_meter.hpp"

namespace paratwin::exec {

template <class T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using MatrixMap = Eigen::Map<Matrix<T>>;
template <class T>
using ConstMatrixMap = Eigen::Map<const Matrix<T>>;
// A column block of a wider row-major matrix: `cols` columns starting at `data`, rows `stride` apart.
template <class T>
using StridedMap = Eigen::Map<Matrix<T>, 0, Eigen::OuterStride<>>;
template <class T>
using ConstStridedMap = Eigen::Map<const Matrix<T>, 0, Eigen::OuterStride<>>;
template <class T>
using RowVectorMap = Eigen::Map<Eigen::Matrix<T, 1, Eigen::Dynamic>>;
template <class T>
using ConstRowVectorMap = Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>;

// Allocates on 64-byte boundaries (a cache line, an AVX-512 register). Vectorized kernels take
// different code paths for differently aligned data, which changes the order of floating-point
// sums: with every buffer aligned the same way, the same run gives the same bits in any process
// (bit-identical resume depends on it). Every allocation is metered (exec/memory/memory_meter.hpp):
// a header of one alignment unit before the data remembers what the bytes were charged to.
template <class T>
struct AlignedAllocator {
  using value_type = T;
  static constexpr size_t kAlignment = 64;
  AlignedAllocator() = default;
  template <class U>
  AlignedAllocator(const AlignedAllocator<U>&) {}
  struct Header {
    size_t bytes;
    MemoryUse use;
  };
  static_assert(sizeof(Header) <= kAlignment);
  T* allocate(size_t n) {
    const size_t bytes = (n * sizeof(T) + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, kAlignment + bytes);
    if (!p) throw std::bad_alloc();
    const MemoryUse use = memory_meter::current_use();
    ::new (p) Header{n * sizeof(T), use};
    memory_meter::allocated(use, n * sizeof(T));
    return reinterpret_cast<T*>(static_cast<char*>(p) + kAlignment);
  }
  void deallocate(T* p, size_t) {
    char* block = reinterpret_cast<char*>(p) - kAlignment;
    const Header h = *reinterpret_cast<Header*>(block);
    memory_meter::freed(h.use, h.bytes);
    std::free(block);
  }
  template <class U>
  bool operator==(const AlignedAllocator<U>&) const {
    return true;
  }
};

// A flat buffer of weights, gradients or activations.
template <class T>
using Buffer = std::vector<T, AlignedAllocator<T>>;

}  // namespace paratwin::exec
