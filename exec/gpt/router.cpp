// The router of a mixture-of-experts layer, as Mixtral routes: a softmax over the experts' logits, each
// token's top k experts, and their probabilities renormalized over the chosen ones as the gates.
#include <algorithm>
#include <cmath>

#include "exec/gpt/kernels.hpp"

namespace paratwin::exec::kernels {

template <class T>
void router_forward(T* probs, int32_t* chosen, T* gates, const T* logits, int N, int E, int K) {
  // logits and probs are (N,E); chosen and gates are (N,K)
  for (int t = 0; t < N; ++t) {
    const T* x = logits + size_t(t) * E;
    T* p = probs + size_t(t) * E;
    const T max = *std::max_element(x, x + E);
    T sum = 0;
    for (int e = 0; e < E; ++e) sum += p[e] = std::exp(x[e] - max);
    for (int e = 0; e < E; ++e) p[e] /= sum;
    int32_t* c = chosen + size_t(t) * K;
    T* g = gates + size_t(t) * K;
    T chosen_sum = 0;
    for (int j = 0; j < K; ++j) {  // the j-th largest; ties go to the lower index
      int best = -1;
      for (int e = 0; e < E; ++e) {
        if (std::find(c, c + j, e) != c + j) continue;
        if (best < 0 || p[e] > p[best]) best = e;
      }
      c[j] = best;
      chosen_sum += p[best];
    }
    for (int j = 0; j < K; ++j) g[j] = p[c[j]] / chosen_sum;
  }
}

template <class T>
void router_backward(T* dlogits, const T* dgates, const T* probs, const int32_t* chosen, const T* gates,
                     int N, int E, int K) {
  // dgates, chosen, gates are (N,K); probs and dlogits are (N,E)
  for (int t = 0; t < N; ++t) {
    const T* p = probs + size_t(t) * E;
    const T* dg = dgates + size_t(t) * K;
    const T* g = gates + size_t(t) * K;
    const int32_t* c = chosen + size_t(t) * K;
    T* dx = dlogits + size_t(t) * E;
    // g_j = p_cj / S with S the chosen probabilities' sum: dp_cj = (dg_j - sum_m dg_m g_m) / S, and the
    // probabilities of experts not chosen get no gradient.
    T chosen_sum = 0, dg_dot_g = 0;
    for (int j = 0; j < K; ++j) {
      chosen_sum += p[c[j]];
      dg_dot_g += dg[j] * g[j];
    }
    std::fill(dx, dx + E, T(0));  // dp, then the softmax's backward in place
    for (int j = 0; j < K; ++j) dx[c[j]] = (dg[j] - dg_dot_g) / chosen_sum;
    T p_dot_dp = 0;
    for (int e = 0; e < E; ++e) p_dot_dp += p[e] * dx[e];
    for (int e = 0; e < E; ++e) dx[e] = p[e] * (dx[e] - p_dot_dp);
  }
}

template void router_forward<float>(float*, int32_t*, float*, const float*, int, int, int);
template void router_forward<double>(double*, int32_t*, double*, const double*, int, int, int);
template void router_backward<float>(float*, const float*, const float*, const int32_t*, const float*, int,
                                     int, int);
template void router_backward<double>(double*, const double*, const double*, const int32_t*, const double*,
                                      int, int, int);

}  // namespace paratwin::exec::kernels
