// A mixture-of-experts layer's MLP (Mixtral's sparse MoE block, see moe.hpp), and the whole model's
// MoE layers on it. Dropless: every assignment runs (no capacity).
#include <time.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "exec/gpt/kernels.hpp"
#include "exec/gpt/model.hpp"

namespace paratwin::exec {

namespace k = kernels;

namespace {

double thread_cpu_now() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// Adds the wall and thread CPU time from construction to destruction to two totals.
class ExchangeTimer {
 public:
  ExchangeTimer(double& wall_s, double& cpu_s)
      : wall_s_(wall_s), cpu_s_(cpu_s), wall0_(std::chrono::steady_clock::now()), cpu0_(thread_cpu_now()) {}
  ~ExchangeTimer() {
    wall_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0_).count();
    cpu_s_ += thread_cpu_now() - cpu0_;
  }

 private:
  double &wall_s_, &cpu_s_;
  std::chrono::steady_clock::time_point wall0_;
  double cpu0_;
};

}  // namespace

template <class T>
Communicator* checked_expert_group(Communicator* group, int experts) {
  const int P = group ? group->size() : 1;
  if (experts > 0 && experts % P != 0)
    throw std::invalid_argument("expert parallelism of " + std::to_string(P) + " ranks does not divide the " +
                                std::to_string(experts) + " experts");
  if (P > 1 && !std::is_same_v<T, float>)
    throw std::invalid_argument("expert parallelism exchanges fp32 rows only");
  return P > 1 ? group : nullptr;
}

namespace {

// Rows of `width` values, send_counts[r] of them to each EP rank r, recv_counts[r] from each.
template <class T>
void exchange(ExpertGroup& group, const T* send, const std::vector<size_t>& send_counts, T* recv,
              const std::vector<size_t>& recv_counts, size_t width) {
  if (!group.comm) {
    std::copy(send, send + send_counts.at(0) * width, recv);
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    ExchangeTimer timer(group.wall_s, group.cpu_s);
    std::vector<size_t> sc(send_counts), rc(recv_counts);
    for (auto& n : sc) n *= width;
    for (auto& n : rc) n *= width;
    group.comm->alltoallv(send, sc, recv, rc);
  }
}

}  // namespace

template <class T>
void moe_mlp_forward(MoeActivations<T>& m, const MoeShape& s, const MoeWeights<T>& w, ExpertGroup& group,
                     const MoeTensorSplit<T>& tp, const T* ln2, T* out) {
  const int N = s.N, C = s.C, E = s.E, K = s.K, F = s.F, FW = s.FW;
  const int P = group.size();
  const int El = group.local_experts(E).second;
  MemoryUseScope use(MemoryUse::Activations);
  // Router: logits (N,E) = ln2 (N,C) . router_w (C,E), then softmax, top k and gates in place.
  m.probs.assign(size_t(N) * E, T(0));
  m.chosen.assign(size_t(N) * K, 0);
  m.gates.assign(size_t(N) * K, T(0));
  k::linear_forward(m.probs.data(), ln2, w.router_w, static_cast<const T*>(nullptr), N, C, E);
  k::router_forward(m.probs.data(), m.chosen.data(), m.gates.data(), m.probs.data(), N, E, K);

  // Dispatch order: the N x K assignments grouped by expert, in token order within an expert; the
  // experts of EP rank q are [q El, (q+1) El), so the rows for each rank are one block.
  std::vector<size_t> per_expert(size_t(E), 0), next(size_t(E), 0);
  for (int32_t e : m.chosen) ++per_expert[size_t(e)];
  std::exclusive_scan(per_expert.begin(), per_expert.end(), next.begin(), size_t(0));
  m.dispatch_row.assign(size_t(N) * K, 0);
  for (size_t i = 0; i < m.chosen.size(); ++i) m.dispatch_row[i] = int32_t(next[size_t(m.chosen[i])]++);
  Buffer<T> sent(size_t(N) * K * C);  // (N*K,C) each assignment's token
  for (size_t i = 0; i < m.chosen.size(); ++i)
    std::copy_n(ln2 + (i / K) * C, C, sent.data() + size_t(m.dispatch_row[i]) * C);
  m.send_rows.assign(size_t(P), 0);
  for (int e = 0; e < E; ++e) m.send_rows[size_t(e / El)] += per_expert[size_t(e)];

  // How many rows each peer sends to each of this rank's experts: (P,El), exchanged as fp32 counts.
  std::vector<float> counts_out(per_expert.begin(), per_expert.end()), counts_in(size_t(P) * El);
  if (group.comm) {
    ExchangeTimer timer(group.wall_s, group.cpu_s);
    group.comm->alltoallv(counts_out.data(), std::vector<size_t>(size_t(P), size_t(El)), counts_in.data(),
                          std::vector<size_t>(size_t(P), size_t(El)));
  } else {
    counts_in = counts_out;
  }
  m.recv_rows.assign(size_t(P), 0);
  m.expert_rows.assign(size_t(El), 0);
  for (int s = 0; s < P; ++s)
    for (int e = 0; e < El; ++e) {
      m.recv_rows[size_t(s)] += size_t(counts_in[size_t(s) * El + e]);
      m.expert_rows[size_t(e)] += size_t(counts_in[size_t(s) * El + e]);
    }
  const size_t R = std::accumulate(m.recv_rows.begin(), m.recv_rows.end(), size_t(0));
  Buffer<T> received(R * C);  // (R,C) peer by peer, each peer's rows expert by expert
  exchange(group, sent.data(), m.send_rows, received.data(), m.recv_rows, size_t(C));

  // Regroup expert by expert: x's rows are expert 0's from every peer, then expert 1's, ...
  m.received_row.assign(R, 0);
  {
    std::vector<size_t> expert_next(size_t(El), 0);
    std::exclusive_scan(m.expert_rows.begin(), m.expert_rows.end(), expert_next.begin(), size_t(0));
    size_t row = 0;
    for (int s = 0; s < P; ++s)
      for (int e = 0; e < El; ++e)
        for (size_t n = 0; n < size_t(counts_in[size_t(s) * El + e]); ++n)
          m.received_row[expert_next[size_t(e)]++] = int32_t(row++);
  }
  m.x.assign(R * C, T(0));
  for (size_t i = 0; i < R; ++i)
    std::copy_n(received.data() + size_t(m.received_row[i]) * C, C, m.x.data() + i * C);

  // Each local expert's MLP on its rows: fc (n,FW) = x (n,C) . fc_w + fc_b; act (n,F); y (n,C).
  m.fc.assign(R * FW, T(0));
  m.fc_act.assign(R * F, T(0));
  Buffer<T> y_local(R * C, T(0));
  size_t row = 0;
  for (int e = 0; e < El; ++e) {
    const int n = int(m.expert_rows[size_t(e)]);
    const ExpertMlp<T>& x = w.experts[size_t(e)];
    if (n > 0) {
      T* fc = m.fc.data() + row * FW;
      T* act = m.fc_act.data() + row * F;
      k::linear_forward(fc, m.x.data() + row * C, x.fc_w, x.fc_b, n, C, FW);
      k::mlp_activation_forward(act, fc, n, F, s.swiglu);
      // under TP a partial sum: the bias once over the group
      k::linear_forward(y_local.data() + row * C, act, x.fc_proj_w, tp.adds_shared ? x.fc_proj_b : nullptr, n,
                        F, C);
    }
    row += size_t(n);
  }
  // Back to the received order, and to the ranks the tokens came from.
  for (size_t i = 0; i < R; ++i)
    std::copy_n(y_local.data() + i * C, C, received.data() + size_t(m.received_row[i]) * C);
  m.y.assign(size_t(N) * K * C, T(0));
  exchange(group, received.data(), m.recv_rows, m.y.data(), m.send_rows, size_t(C));

  // Combine: out[t] (C) = sum over j of gates[t,j] * y[dispatch_row[t,j]].
  std::fill(out, out + size_t(N) * C, T(0));
  for (size_t i = 0; i < m.chosen.size(); ++i) {
    const T gate = m.gates[i];
    const T* y = m.y.data() + size_t(m.dispatch_row[i]) * C;
    T* o = out + (i / K) * C;
    for (int ch = 0; ch < C; ++ch) o[ch] += gate * y[ch];
  }
}

template <class T>
void moe_mlp_backward(MoeActivations<T>& m, const MoeShape& s, const MoeWeights<T>& w, ExpertGroup& group,
                      const MoeTensorSplit<T>& tp, const T* dout, const T* ln2, T* dln2) {
  const int N = s.N, C = s.C, E = s.E, K = s.K, F = s.F, FW = s.FW;
  const int El = group.local_experts(E).second;
  const size_t R = m.x.size() / size_t(C);
  // Combine: dy (N*K,C) in dispatch order = gate * dout[t]; dgates (N,K) = dout[t] . y.
  Buffer<T> dy(size_t(N) * K * C), dgates(size_t(N) * K);
  for (size_t i = 0; i < m.chosen.size(); ++i) {
    const T* d = dout + (i / K) * C;
    const T* y = m.y.data() + size_t(m.dispatch_row[i]) * C;
    T* dyi = dy.data() + size_t(m.dispatch_row[i]) * C;
    T dot = 0;
    for (int ch = 0; ch < C; ++ch) {
      dyi[ch] = m.gates[i] * d[ch];
      dot += d[ch] * y[ch];
    }
    dgates[i] = dot;
  }
  if (tp.sum_over_tp) tp.sum_over_tp(dgates.data(), dgates.size());  // the experts' whole outputs' share
  // The output gradients to the experts' ranks (the forward's dispatch again), expert by expert.
  Buffer<T> received(R * C), dy_local(R * C);
  exchange(group, dy.data(), m.send_rows, received.data(), m.recv_rows, size_t(C));
  for (size_t i = 0; i < R; ++i)
    std::copy_n(received.data() + size_t(m.received_row[i]) * C, C, dy_local.data() + i * C);

  // Each local expert's MLP backward: weight gradients add up; dx (n,C) is written.
  Buffer<T> dact(R * F), dfc(R * FW), dx_local(R * C, T(0));
  std::fill(dact.begin(), dact.end(), T(0));
  size_t row = 0;
  for (int e = 0; e < El; ++e) {
    const int n = int(m.expert_rows[size_t(e)]);
    const ExpertMlp<T>& x = w.experts[size_t(e)];
    if (n > 0) {
      T* da = dact.data() + row * F;
      T* dfc_e = dfc.data() + row * FW;
      k::linear_backward(da, x.dfc_proj_w, x.dfc_proj_b, dy_local.data() + row * C, m.fc_act.data() + row * F,
                         x.fc_proj_w, n, F, C);
      k::mlp_activation_backward(dfc_e, m.fc.data() + row * FW, da, n, F, s.swiglu);
      k::linear_backward(dx_local.data() + row * C, x.dfc_w, x.dfc_b, dfc_e, m.x.data() + row * C, x.fc_w, n,
                         C, FW);
    }
    row += size_t(n);
  }
  // The input gradients back to the tokens' ranks (the forward's return again).
  for (size_t i = 0; i < R; ++i)
    std::copy_n(dx_local.data() + i * C, C, received.data() + size_t(m.received_row[i]) * C);
  exchange(group, received.data(), m.recv_rows, dy.data(), m.send_rows, size_t(C));  // dy now holds dx
  for (size_t i = 0; i < m.chosen.size(); ++i) {
    const T* dx = dy.data() + size_t(m.dispatch_row[i]) * C;
    T* d = dln2 + (i / K) * C;
    for (int ch = 0; ch < C; ++ch) d[ch] += dx[ch];
  }

  // Router: dlogits (N,E) through the gates; dln2 += dlogits . router_w^T; drouter_w += ln2^T . dlogits
  // (the same on every TP rank: the router is whole on each).
  Buffer<T> dlogits(size_t(N) * E);
  k::router_backward(dlogits.data(), dgates.data(), m.probs.data(), m.chosen.data(), m.gates.data(), N, E, K);
  k::linear_backward(tp.adds_shared ? dln2 : nullptr, w.drouter_w, static_cast<T*>(nullptr), dlogits.data(),
                     ln2, w.router_w, N, C, E);
}

template <class T>
MoeWeights<T> Gpt<T>::moe_weights(int l) {
  const LayerOffsets& w = layers_[l];
  MoeWeights<T> out{p(w.router_w), g(w.router_w), {}};
  for (int e = 0; e < config_.experts; ++e) {
    const MlpOffsets& x = w.experts[size_t(e)];
    out.experts.push_back({p(x.fc_w), p(x.fc_b), p(x.fc_proj_w), p(x.fc_proj_b), g(x.fc_w), g(x.fc_b),
                           g(x.fc_proj_w), g(x.fc_proj_b)});
  }
  return out;
}

template <class T>
MoeShape Gpt<T>::moe_shape(const Activations<T>& a) const {
  const GptConfig& c = config_;
  return {a.B * a.Tn, c.hidden, c.experts, c.top_k, c.ffn, c.fc_width(), c.swiglu};
}

template <class T>
void Gpt<T>::moe_forward(Activations<T>& a, int l, const T* ln2, T* out) {
  moe_mlp_forward(a.moe[size_t(l)], moe_shape(a), moe_weights(l), experts_, {}, ln2, out);
}

template <class T>
void Gpt<T>::moe_backward(Activations<T>& a, int l, const T* dout, const T* ln2, T* dln2) {
  moe_mlp_backward(a.moe[size_t(l)], moe_shape(a), moe_weights(l), experts_, {}, dout, ln2, dln2);
}

template <class T>
void moe_activation_forward(MoeActivations<T>& m, const MoeShape& s) {
  const size_t R = m.fc.size() / size_t(s.FW);
  m.fc_act.assign(R * s.F, T(0));
  k::mlp_activation_forward(m.fc_act.data(), m.fc.data(), int(R), s.F, s.swiglu);
}

template void moe_activation_forward(MoeActivations<float>&, const MoeShape&);
template Communicator* checked_expert_group<float>(Communicator*, int);
template Communicator* checked_expert_group<double>(Communicator*, int);
template void moe_mlp_forward(MoeActivations<float>&, const MoeShape&, const MoeWeights<float>&, ExpertGroup&,
                              const MoeTensorSplit<float>&, const float*, float*);
template void moe_mlp_backward(MoeActivations<float>&, const MoeShape&, const MoeWeights<float>&,
                               ExpertGroup&, const MoeTensorSplit<float>&, const float*, const float*,
                               float*);
template MoeWeights<float> Gpt<float>::moe_weights(int);
template MoeWeights<double> Gpt<double>::moe_weights(int);
template MoeShape Gpt<float>::moe_shape(const Activations<float>&) const;
template MoeShape Gpt<double>::moe_shape(const Activations<double>&) const;
template void Gpt<float>::moe_forward(Activations<float>&, int, const float*, float*);
template void Gpt<double>::moe_forward(Activations<double>&, int, const double*, double*);
template void Gpt<float>::moe_backward(Activations<float>&, int, const float*, const float*, float*);
template void Gpt<double>::moe_backward(Activations<double>&, int, const double*, const double*, double*);

}  // namespace paratwin::exec
