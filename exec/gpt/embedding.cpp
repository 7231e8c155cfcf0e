// Token and learned position embeddings: a gather forward, a scatter-add backward.
#include "exec/gpt/kernels.hpp"

namespace paratwin::exec::kernels {

template <class T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tn, int C) {
  // tokens is (B,T), wte is (V,C), wpe is (maxT,C), out is (B,T,C)
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < Tn; ++t) {
      T* y = out + (static_cast<long>(b) * Tn + t) * C;
      const T* e = wte + static_cast<long>(tokens[b * Tn + t]) * C;
      for (int c = 0; c < C; ++c) y[c] = e[c] + (wpe ? wpe[static_cast<long>(t) * C + c] : T(0));
    }
}

template <class T>
void embedding_backward(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, int B, int Tn, int C) {
  // dout is (B,T,C); dwte is (V,C); dwpe is (maxT,C)
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < Tn; ++t) {
      const T* dy = dout + (static_cast<long>(b) * Tn + t) * C;
      T* de = dwte + static_cast<long>(tokens[b * Tn + t]) * C;
      for (int c = 0; c < C; ++c) de[c] += dy[c];
      if (dwpe)
        for (int c = 0; c < C; ++c) dwpe[static_cast<long>(t) * C + c] += dy[c];
    }
}

template void embedding_forward<float>(float*, const int32_t*, const float*, const float*, int, int, int);
template void embedding_forward<double>(double*, const int32_t*, const double*, const double*, int, int, int);
template void embedding_backward<float>(float*, float*, const float*, const int32_t*, int, int, int);
template void embedding_backward<double>(double*, double*, const double*, const int32_t*, int, int, int);

}  // namespace paratwin::exec::kernels
