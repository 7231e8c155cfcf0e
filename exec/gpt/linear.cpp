// Linear layers: the GEMMs that hold nearly all of a transformer's FLOPs, handed to Eigen.
#include "exec/gpt/gemm_clock.hpp"
#include "exec/gpt/kernels.hpp"
#include "exec/tensor.hpp"

namespace paratwin::exec::kernels {

template <class T>
void linear_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC) {
  // inp is (N,C), weight is (C,OC), out is (N,OC)
  MatrixMap<T> y(out, N, OC);
  {
    GemmTimer timer(gemm_seconds.dense_s);
    y.noalias() = ConstMatrixMap<T>(inp, N, C) * ConstMatrixMap<T>(weight, C, OC);
  }
  if (bias) y.rowwise() += ConstRowVectorMap<T>(bias, OC);
}

template <class T>
void linear_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, int N,
                     int C, int OC) {
  // dout is (N,OC); dinp is (N,C); dweight is (C,OC); dbias is (OC)
  ConstMatrixMap<T> dy(dout, N, OC);
  {
    GemmTimer timer(gemm_seconds.dense_s);
    if (dinp) MatrixMap<T>(dinp, N, C).noalias() += dy * ConstMatrixMap<T>(weight, C, OC).transpose();
    MatrixMap<T>(dweight, C, OC).noalias() += ConstMatrixMap<T>(inp, N, C).transpose() * dy;
  }
  if (dbias) RowVectorMap<T>(dbias, OC) += dy.colwise().sum();
}

template void linear_forward<float>(float*, const float*, const float*, const float*, int, int, int);
template void linear_forward<double>(double*, const double*, const double*, const double*, int, int, int);
template void linear_backward<float>(float*, float*, float*, const float*, const float*, const float*, int,
                                     int, int);
template void linear_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                      int, int, int);

}  // namespace paratwin::exec::kernels
