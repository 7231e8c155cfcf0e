// Tensors of the live CPU backend: row-major Eigen matrices and maps over flat buffers. Weights,
// gradients and activations live in flat std::vectors (as in llm.c) and kernels view them as matrices.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "exec/memory/block_cache.hpp"
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
// (bit-identical resume depends on it). Memory comes zeroed, so default-initializing elements
// (resize) writes nothing: buffers of 4 MiB and more are fresh pages from the kernel, zero until first
// touched, so weights, gradients and optimizer moments cost no pass at start-up (the first step, or the
// rank's threads, touch them); freed ones are kept for the next allocation of their size
// (exec/memory/block_cache.hpp), zeroed again when taken. Every allocation is metered
// (exec/memory/memory_meter.hpp): a header of one alignment unit after the data remembers what the bytes were
// charged to.
template <class T>
struct AlignedAllocator {
  using value_type = T;
  static constexpr size_t kAlignment = 64;
  static constexpr size_t kFreshPages = size_t(4) << 20;
  AlignedAllocator() = default;
  template <class U>
  AlignedAllocator(const AlignedAllocator<U>&) {}
  struct Header {
    size_t bytes;
    MemoryUse use;
  };
  static_assert(sizeof(Header) <= kAlignment);
  static size_t data_bytes(size_t n) { return (n * sizeof(T) + kAlignment - 1) / kAlignment * kAlignment; }
  T* allocate(size_t n) {
    const size_t bytes = data_bytes(n), block = bytes + kAlignment;
    void* p = nullptr;
    if (bytes >= kFreshPages) {
      p = block_cache::take(block);
      if (!p) p = ::mmap(nullptr, block, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
    } else {
      p = std::aligned_alloc(kAlignment, block);
      if (!p) throw std::bad_alloc();
      std::memset(p, 0, bytes);
    }
    const MemoryUse use = memory_meter::current_use();
    ::new (static_cast<char*>(p) + bytes) Header{n * sizeof(T), use};
    memory_meter::allocated(use, n * sizeof(T));
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    const size_t bytes = data_bytes(n);
    const Header h = *reinterpret_cast<Header*>(reinterpret_cast<char*>(p) + bytes);
    memory_meter::freed(h.use, h.bytes);
    if (bytes >= kFreshPages) {
      if (!block_cache::keep(p, bytes + kAlignment)) ::munmap(p, bytes + kAlignment);
    } else
      std::free(p);
  }
  // Default-initialization writes nothing: the memory is zero already.
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <class U>
  bool operator==(const AlignedAllocator<U>&) const {
    return true;
  }
};

// A flat buffer of weights, gradients or activations.
template <class T>
using Buffer = std::vector<T, AlignedAllocator<T>>;

// Makes `b` n zeros, writing them only where its storage is reused: new storage comes zeroed.
template <class T>
void assign_zeros(Buffer<T>& b, size_t n) {
  if (b.capacity() < n)
    Buffer<T>(n).swap(b);
  else
    b.assign(n, T(0));
}

}  // namespace paratwin::exec
