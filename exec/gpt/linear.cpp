// Linear layers: the GEMMs that hold nearly all of a transformer's FLOPs (exec/gpt/gemm.hpp, on the
// rank's threads); the bias terms run on the same threads.
#include "exec/gpt/gemm.hpp"
#include "exec/gpt/kernel_clock.hpp"
#include "exec/gpt/kernels.hpp"
#include "exec/threads.hpp"

namespace paratwin::exec::kernels {

namespace {
constexpr long kRows = 16;     // rows of a piece of an (N,OC) output
constexpr long kColumns = 64;  // columns of a piece of a bias gradient
}  // namespace

template <class T>
void linear_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC) {
  // inp is (N,C), weight is (C,OC), out is (N,OC): out starts as the bias rows (or zeros), and the GEMM
  // adds into it, so the bias costs no pass of its own.
  if (bias)
    parallel_for(N, kRows, [&](long r0, long r1) {
      for (long r = r0; r < r1; ++r) std::copy(bias, bias + OC, out + r * OC);
    });
  KernelTimer timer(kernel_seconds.dense_s);
  gemm(false, false, N, OC, C, T(1), inp, C, weight, OC, bias ? T(1) : T(0), out, OC);
}

template <class T>
void linear_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, int N,
                     int C, int OC) {
  // dout is (N,OC); dinp is (N,C); dweight is (C,OC); dbias is (OC)
  {
    KernelTimer timer(kernel_seconds.dense_s);
    if (dinp) gemm(false, true, N, C, OC, T(1), dout, OC, weight, OC, T(1), dinp, C);  // dy . W^T
    gemm(true, false, C, OC, N, T(1), inp, C, dout, OC, T(1), dweight, OC);            // inp^T . dy
  }
  if (!dbias) return;
  // Each column's sum over the rows in row order, columns apart on the threads.
  parallel_for(OC, kColumns, [&](long c0, long c1) {
    for (long i = 0; i < N; ++i)
      for (long c = c0; c < c1; ++c) dbias[c] += dout[i * OC + c];
  });
}

template void linear_forward<float>(float*, const float*, const float*, const float*, int, int, int);
template void linear_forward<double>(double*, const double*, const double*, const double*, int, int, int);
template void linear_backward<float>(float*, float*, float*, const float*, const float*, const float*, int,
                                     int, int);
template void linear_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                      int, int, int);

}  // namespace paratwin::exec::kernels
