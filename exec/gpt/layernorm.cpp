// LayerNorm (GPT) and RMSNorm (Llama), forward and backward: rows (tokens) apart on the rank's threads,
// each row's sums vectorized by Eigen.
#include <cmath>
#include <vector>

#include <Eigen/Core>

#include "exec/gpt/kernels.hpp"
#include "exec/threads.hpp"

namespace paratwin::exec::kernels {

namespace {
constexpr double kEpsilon = 1e-5;
constexpr long kRows = 16;  // rows of a piece

template <class T>
using Row = Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>>;
template <class T>
using ConstRow = Eigen::Map<const Eigen::Array<T, 1, Eigen::Dynamic>>;
}  // namespace

template <class T>
void norm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias, int N, int C) {
  // inp is (N,C), out is (N,C), mean and rstd are (N), weight and bias are (C)
  ConstRow<T> w(weight, C);
  parallel_for(N, kRows, [&](long r0, long r1) {
    for (long i = r0; i < r1; ++i) {
      ConstRow<T> x(inp + i * C, C);
      Row<T> y(out + i * C, C);
      const T m = mean ? x.sum() / T(C) : T(0);
      // variance (LayerNorm) or mean square (RMSNorm)
      const T s = T(1) / std::sqrt((x - m).square().sum() / T(C) + T(kEpsilon));
      if (bias)
        y = (x - m) * s * w + ConstRow<T>(bias, C);
      else
        y = (x - m) * s * w;
      if (mean) mean[i] = m;
      rstd[i] = s;
    }
  });
}

template <class T>
void norm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, const T* mean,
                   const T* rstd, int N, int C) {
  // dout, inp, dinp are (N,C); mean, rstd are (N); weight, dweight, dbias are (C). Each piece of rows
  // sums its weight and bias gradients apart; the pieces' sums are added in their order.
  const long pieces = (N + kRows - 1) / kRows;
  std::vector<T> partial(size_t(pieces) * 2 * C, T(0));
  ConstRow<T> w(weight, C);
  parallel_for(N, kRows, [&](long r0, long r1) {
    Row<T> pw(partial.data() + (r0 / kRows) * 2 * C, C), pb(partial.data() + (r0 / kRows) * 2 * C + C, C);
    Eigen::Array<T, 1, Eigen::Dynamic> norm(C), dnorm(C);
    for (long i = r0; i < r1; ++i) {
      ConstRow<T> dy(dout + i * C, C), x(inp + i * C, C);
      Row<T> dx(dinp + i * C, C);
      const T m = mean ? mean[i] : T(0), s = rstd[i];
      norm = (x - m) * s;
      dnorm = w * dy;
      // Two reductions: mean(dnorm) (LayerNorm only: the mean was subtracted) and mean(dnorm * norm).
      const T dnorm_mean = mean ? dnorm.sum() / T(C) : T(0);
      const T dnorm_norm_mean = (dnorm * norm).sum() / T(C);
      pw += norm * dy;
      if (dbias) pb += dy;
      dx += s * (dnorm - dnorm_mean - norm * dnorm_norm_mean);
    }
  });
  parallel_for(C, 256, [&](long c0, long c1) {
    for (long p = 0; p < pieces; ++p)
      for (long c = c0; c < c1; ++c) {
        dweight[c] += partial[size_t(p * 2 * C + c)];
        if (dbias) dbias[c] += partial[size_t(p * 2 * C + C + c)];
      }
  });
}

template void norm_forward<float>(float*, float*, float*, const float*, const float*, const float*, int, int);
template void norm_forward<double>(double*, double*, double*, const double*, const double*, const double*,
                                   int, int);
template void norm_backward<float>(float*, float*, float*, const float*, const float*, const float*,
                                   const float*, const float*, int, int);
template void norm_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                    const double*, const double*, int, int);

}  // namespace paratwin::exec::kernels
