// Token and learned position embeddings: a gather forward, a scatter-add backward. The backward's
// threads take columns apart (two tokens may share a row), each adding the tokens in their order.
#include "exec/gpt/kernels.hpp"
#include "exec/threads.hpp"

namespace paratwin::exec::kernels {

template <class T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tn, int C) {
  // tokens is (B,T), wte is (V,C), wpe is (maxT,C), out is (B,T,C)
  parallel_for(long(B) * Tn, 16, [&](long i0, long i1) {
    for (long i = i0; i < i1; ++i) {
      T* y = out + i * C;
      const T* e = wte + static_cast<long>(tokens[i]) * C;
      const long t = i % Tn;
      for (int c = 0; c < C; ++c) y[c] = e[c] + (wpe ? wpe[t * C + c] : T(0));
    }
  });
}

template <class T>
void embedding_backward(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, int B, int Tn, int C) {
  // dout is (B,T,C); dwte is (V,C); dwpe is (maxT,C)
  parallel_for(C, 64, [&](long c0, long c1) {
    for (long i = 0; i < long(B) * Tn; ++i) {
      const T* dy = dout + i * C;
      T* de = dwte + static_cast<long>(tokens[i]) * C;
      for (long c = c0; c < c1; ++c) de[c] += dy[c];
      if (dwpe)
        for (long c = c0; c < c1; ++c) dwpe[(i % Tn) * C + c] += dy[c];
    }
  });
}

template void embedding_forward<float>(float*, const int32_t*, const float*, const float*, int, int, int);
template void embedding_forward<double>(double*, const int32_t*, const double*, const double*, int, int, int);
template void embedding_backward<float>(float*, float*, const float*, const int32_t*, int, int, int);
template void embedding_backward<double>(double*, double*, const double*, const int32_t*, int, int, int);

}  // namespace paratwin::exec::kernels
