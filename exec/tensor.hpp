// Tensors of the live CPU backend: row-major Eigen matrices and maps over flat buffers. Weights,
// gradients and activations live in flat std::vectors (as in llm.c) and kernels view them as matrices.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>
#include <vector>

#include <Eigen/Core>

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
// (bit-identical resume depends on it).
template <class T>
struct AlignedAllocator {
  using value_type = T;
  static constexpr size_t kAlignment = 64;
  AlignedAllocator() = default;
  template <class U>
  AlignedAllocator(const AlignedAllocator<U>&) {}
  T* allocate(size_t n) {
    const size_t bytes = (n * sizeof(T) + kAlignment - 1) / kAlignment * kAlignment;
    if (void* p = std::aligned_alloc(kAlignment, bytes ? bytes : kAlignment)) return static_cast<T*>(p);
    throw std::bad_alloc();
  }
  void deallocate(T* p, size_t) { std::free(p); }
  template <class U>
  bool operator==(const AlignedAllocator<U>&) const {
    return true;
  }
};

// A flat buffer of weights, gradients or activations.
template <class T>
using Buffer = std::vector<T, AlignedAllocator<T>>;

}  // namespace paratwin::exec
