// A mixture-of-experts layer's MLP as one rank runs it (moe_layer.cpp), for the whole model
// (model.cpp) and for a tensor/pipeline/context-parallel rank's shard (tensor_parallel.cpp) alike: the
// router picks each token's top-k experts, the tokens travel to the ranks of the expert group that own
// those experts (all-to-all under expert parallelism), each local expert runs its MLP on the rows it
// got, the outputs travel back, and each token sums its experts' outputs weighted by its gates.
//
// Under tensor parallelism every TP rank routes the same (whole) tokens with the whole router and runs
// its columns of each expert's FFN, as the dense MLP splits (the cost model's and lowering's MoE under
// TP: expert FFNs divided by tp, the all-to-all carrying whole hidden states between the EP ranks of
// the same TP rank). The layer's output and its input gradient are then partial sums over the TP
// group, reduced by the caller exactly where the dense MLP's are.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "exec/comm/communicator.hpp"
#include "exec/tensor.hpp"

namespace paratwin::exec {

// What the forward of one mixture-of-experts layer keeps for its backward. N tokens each choose K
// experts: N x K assignments, dispatched as rows grouped by expert (so by the EP rank that owns it).
// R: the rows this rank's experts ran (its own tokens' and, under expert parallelism, its EP peers').
template <class T>
struct MoeActivations {
  Buffer<T> probs;                           // (N,E) the router's softmax
  std::vector<int32_t> chosen;               // (N,K) each token's experts
  Buffer<T> gates;                           // (N,K) their renormalized weights
  std::vector<int32_t> dispatch_row;         // (N,K) where assignment (t,j) is in the dispatch order
  std::vector<size_t> send_rows, recv_rows;  // per EP rank: rows sent to it, rows received from it
  std::vector<size_t> expert_rows;           // per local expert: the rows it ran
  std::vector<int32_t> received_row;         // (R) the received row behind each of x's rows
  Buffer<T> x, fc, fc_act;                   // (R,C), (R,fc_width), (R,F) the local experts' MLPs
  Buffer<T> y;                               // (N*K,C) the experts' outputs back, in dispatch order
};

// The ranks that share each MoE layer's experts (expert parallelism; none: this rank alone), rank r
// running experts [r E/P, (r+1) E/P), and the time this rank has spent in their all-to-alls.
struct ExpertGroup {
  Communicator* comm = nullptr;
  double wall_s = 0, cpu_s = 0;  // wall, and this thread's CPU (MPI spins while it waits)
  int size() const { return comm ? comm->size() : 1; }
  int rank() const { return comm ? comm->rank() : 0; }
  std::pair<int, int> local_experts(int experts) const {  // [first, first + count)
    return {rank() * (experts / size()), experts / size()};
  }
};
// `group` for a model of `experts` experts in T. Throws std::invalid_argument when its size does not
// divide the experts, or for fp64 exchanges.
template <class T>
Communicator* checked_expert_group(Communicator* group, int experts);

// Adds one micro-batch's routing (m.chosen: each token's experts) to routed[layer x experts], which it
// sizes for `layers` layers first: the tokens per expert per layer that a live profile records.
template <class T>
void count_routed(const MoeActivations<T>& m, int layer, int layers, int experts,
                  std::vector<double>& routed) {
  routed.resize(size_t(layers) * size_t(experts), 0.0);
  for (int32_t e : m.chosen) routed[size_t(layer) * size_t(experts) + size_t(e)] += 1;
}

// One expert's MLP as this rank holds it (its FFN columns under TP), and its gradients.
template <class T>
struct ExpertMlp {
  const T *fc_w, *fc_b, *fc_proj_w, *fc_proj_b;
  T *dfc_w, *dfc_b, *dfc_proj_w, *dfc_proj_b;
};
template <class T>
struct MoeWeights {
  const T* router_w;  // (C,E), whole on every TP rank
  T* drouter_w;
  std::vector<ExpertMlp<T>> experts;  // the group's local ones, in order
};

// N tokens of width C routed to the top K of E experts; F and FW: the FFN and first projection
// widths this rank holds of each expert.
struct MoeShape {
  int N = 0, C = 0, E = 0, K = 0, F = 0, FW = 0;
  bool swiglu = false;
};

// What differs between the TP ranks of a layer. Terms that must count once over the group (the
// experts' output biases, the router's input gradient) are added by the rank with `adds_shared`;
// `sum_over_tp` sums a buffer over the group (the gates' gradients from partial expert outputs), null
// without TP.
template <class T>
struct MoeTensorSplit {
  bool adds_shared = true;
  std::function<void(T*, size_t)> sum_over_tp;
};

// out (N,C) = the gated sum of each token's experts on ln2 (N,C) (partial over TP).
template <class T>
void moe_mlp_forward(MoeActivations<T>& m, const MoeShape& s, const MoeWeights<T>& w, ExpertGroup& group,
                     const MoeTensorSplit<T>& tp, const T* ln2, T* out);
// The local experts' activation again, from their kept first projection (Megatron-Core's selective
// recomputation of moe_act): m.fc_act (R,F) from m.fc (R,FW), the forward's elementwise kernel.
template <class T>
void moe_activation_forward(MoeActivations<T>& m, const MoeShape& s);
// Adds d ln2 into dln2 (N,C) (partial over TP) from dout (N,C); weight gradients add up.
template <class T>
void moe_mlp_backward(MoeActivations<T>& m, const MoeShape& s, const MoeWeights<T>& w, ExpertGroup& group,
                      const MoeTensorSplit<T>& tp, const T* dout, const T* ln2, T* dln2);

}  // namespace paratwin::exec
