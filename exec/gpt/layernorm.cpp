// LayerNorm (GPT) and RMSNorm (Llama), forward and backward, one row (token) at a time.
#include <cmath>

#include "exec/gpt/kernels.hpp"

namespace paratwin::exec::kernels {

namespace {
constexpr double kEpsilon = 1e-5;
}

template <class T>
void norm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias, int N, int C) {
  // inp is (N,C), out is (N,C), mean and rstd are (N), weight and bias are (C)
  for (int i = 0; i < N; ++i) {
    const T* x = inp + static_cast<long>(i) * C;
    T* y = out + static_cast<long>(i) * C;
    T m = 0;
    if (mean) {
      for (int c = 0; c < C; ++c) m += x[c];
      m /= C;
    }
    T v = 0;  // variance (LayerNorm) or mean square (RMSNorm)
    for (int c = 0; c < C; ++c) v += (x[c] - m) * (x[c] - m);
    v /= C;
    const T s = T(1) / std::sqrt(v + T(kEpsilon));
    for (int c = 0; c < C; ++c) y[c] = (x[c] - m) * s * weight[c] + (bias ? bias[c] : T(0));
    if (mean) mean[i] = m;
    rstd[i] = s;
  }
}

template <class T>
void norm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, const T* mean,
                   const T* rstd, int N, int C) {
  // dout, inp, dinp are (N,C); mean, rstd are (N); weight, dweight, dbias are (C)
  for (int i = 0; i < N; ++i) {
    const T* dy = dout + static_cast<long>(i) * C;
    const T* x = inp + static_cast<long>(i) * C;
    T* dx = dinp + static_cast<long>(i) * C;
    const T m = mean ? mean[i] : T(0), s = rstd[i];
    // Two reductions: mean(dnorm) (LayerNorm only: the mean was subtracted) and mean(dnorm * norm).
    T dnorm_mean = 0, dnorm_norm_mean = 0;
    for (int c = 0; c < C; ++c) {
      const T norm = (x[c] - m) * s, dnorm = weight[c] * dy[c];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean = mean ? dnorm_mean / C : T(0);
    dnorm_norm_mean /= C;
    for (int c = 0; c < C; ++c) {
      const T norm = (x[c] - m) * s, dnorm = weight[c] * dy[c];
      if (dbias) dbias[c] += dy[c];
      dweight[c] += norm * dy[c];
      dx[c] += s * (dnorm - dnorm_mean - norm * dnorm_norm_mean);
    }
  }
}

template void norm_forward<float>(float*, float*, float*, const float*, const float*, const float*, int, int);
template void norm_forward<double>(double*, double*, double*, const double*, const double*, const double*,
                                   int, int);
template void norm_backward<float>(float*, float*, float*, const float*, const float*, const float*,
                                   const float*, const float*, int, int);
template void norm_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                    const double*, const double*, int, int);

}  // namespace paratwin::exec::kernels
