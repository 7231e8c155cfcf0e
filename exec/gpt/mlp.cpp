// The MLP's pointwise activations: GELU (GPT-2's tanh approximation) and SwiGLU (Llama).
#include <cmath>

#include <Eigen/Core>

#include "exec/gpt/kernels.hpp"
#include "exec/threads.hpp"

namespace paratwin::exec::kernels {

namespace {
constexpr double kGeluScale = 0.7978845608028654;  // sqrt(2 / pi)
constexpr long kElements = 16384;  // values of a piece (pointwise: any cut gives the same bits)
constexpr long kRows = 16;
}  // namespace

// GELU is pointwise but costs a tanh per element; Eigen's array tanh is vectorized (a rational
// approximation within a few ulp for fp32), which makes it about as cheap as the GEMMs around it.
template <class T>
void gelu_forward(T* out, const T* inp, long n) {
  // inp and out are (N,F), flattened to n
  using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
  parallel_for(n, kElements, [&](long b, long e) {
    Eigen::Map<const Array> x(inp + b, e - b);
    Eigen::Map<Array>(out + b, e - b) =
        T(0.5) * x * (T(1) + (T(kGeluScale) * (x + T(0.044715) * x.cube())).tanh());
  });
}

template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, long n) {
  // inp, dout and dinp are (N,F), flattened to n
  using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
  parallel_for(n, kElements, [&](long b, long e) {
    Eigen::Map<const Array> x(inp + b, e - b), dy(dout + b, e - b);
    const Array th = (T(kGeluScale) * (x + T(0.044715) * x.cube())).tanh();
    Eigen::Map<Array>(dinp + b, e - b) =
        dy * (T(0.5) * (T(1) + th) +
              x * T(0.5) * (T(1) - th * th) * T(kGeluScale) * (T(1) + T(3 * 0.044715) * x.square()));
  });
}

template <class T>
void swiglu_forward(T* out, const T* inp, int N, int F) {
  // inp is (N,2F) = [gate | up], out is (N,F)
  parallel_for(N, kRows, [&](long r0, long r1) {
    for (long i = r0; i < r1; ++i)
      for (int f = 0; f < F; ++f) {
        const T g = inp[i * 2 * F + f], u = inp[i * 2 * F + F + f];
        out[i * F + f] = g / (T(1) + std::exp(-g)) * u;
      }
  });
}

template <class T>
void swiglu_backward(T* dinp, const T* inp, const T* dout, int N, int F) {
  // inp and dinp are (N,2F) = [gate | up], dout is (N,F)
  parallel_for(N, kRows, [&](long r0, long r1) {
    for (long i = r0; i < r1; ++i)
      for (int f = 0; f < F; ++f) {
        const T g = inp[i * 2 * F + f], u = inp[i * 2 * F + F + f], dy = dout[i * F + f];
        const T sig = T(1) / (T(1) + std::exp(-g));
        dinp[i * 2 * F + f] = dy * u * sig * (T(1) + g * (T(1) - sig));
        dinp[i * 2 * F + F + f] = dy * g * sig;
      }
  });
}

template void gelu_forward<float>(float*, const float*, long);
template void gelu_forward<double>(double*, const double*, long);
template void gelu_backward<float>(float*, const float*, const float*, long);
template void gelu_backward<double>(double*, const double*, const double*, long);
template void swiglu_forward<float>(float*, const float*, int, int);
template void swiglu_forward<double>(double*, const double*, int, int);
template void swiglu_backward<float>(float*, const float*, const float*, int, int);
template void swiglu_backward<double>(double*, const double*, const double*, int, int);

}  // namespace paratwin::exec::kernels
