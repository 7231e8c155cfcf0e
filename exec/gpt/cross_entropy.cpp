// Softmax cross-entropy over the vocabulary, the loss the model is trained on.
#include <cmath>

#include "exec/gpt/kernels.hpp"

namespace paratwin::exec::kernels {

template <class T>
double cross_entropy_forward(T* probs, T* losses, const T* logits, const int32_t* targets, int N, int V) {
  // logits and probs are (N,V), targets and losses are (N)
  double total = 0;
  for (long i = 0; i < N; ++i) {
    const T* z = logits + i * V;
    T* p = probs + i * V;
    T max = z[0];
    for (int v = 1; v < V; ++v) max = std::max(max, z[v]);
    T sum = 0;
    for (int v = 0; v < V; ++v) sum += (p[v] = std::exp(z[v] - max));
    for (int v = 0; v < V; ++v) p[v] /= sum;
    losses[i] = -std::log(p[targets[i]]);
    total += losses[i];
  }
  return total / N;
}

template <class T>
void cross_entropy_backward(T* dlogits, const T* probs, const int32_t* targets, int N, int V, T scale) {
  // probs and dlogits are (N,V), targets is (N)
  for (long i = 0; i < N; ++i) {
    for (int v = 0; v < V; ++v) dlogits[i * V + v] = probs[i * V + v] * scale;
    dlogits[i * V + targets[i]] -= scale;
  }
}

template double cross_entropy_forward<float>(float*, float*, const float*, const int32_t*, int, int);
template double cross_entropy_forward<double>(double*, double*, const double*, const int32_t*, int, int);
template void cross_entropy_backward<float>(float*, const float*, const int32_t*, int, int, float);
template void cross_entropy_backward<double>(double*, const double*, const int32_t*, int, int, double);

}  // namespace paratwin::exec::kernels
