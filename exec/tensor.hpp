// Tensors of the live CPU backend: row-major Eigen matrices and maps over flat buffers. Weights,
// gradients and activations live in flat std::vectors (as in llm.c) and kernels view them as matrices.
#pragma once

#include <cstddef>

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

}  // namespace paratwin::exec
