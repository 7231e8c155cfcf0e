// Which GEMMs of a layer the TP overlap decomposes, and its pieces.
#include "plan/cost/tp_overlap.hpp"

#include <algorithm>
#include <vector>

#include "plan/cost/layer_collectives.hpp"
#include "plan/cost/memory.hpp"

namespace paratwin::cost {

const EnumNames<TpLinear> kTpLinearNames = {
    {"qkv", TpLinear::Qkv}, {"out", TpLinear::Output}, {"up", TpLinear::Up}, {"down", TpLinear::Down}};

TpPieces& TpPieces::operator+=(const TpPieces& o) {
  whole += o.whole;
  lead += o.lead;
  rest += o.rest;
  staging += o.staging;
  return *this;
}

namespace {

// `count` launches of g's shape, with its FLOPs and operand traffic at `element` bytes.
KernelCost launches_of(Gemm g, double count, double element) {
  g.count = count;
  KernelCost c;
  c.gemm_flops = Flops(g.flops());
  c.gemm_bytes = Bytes(g.bytes(element) * count);
  c.gemms.add(g);
  c.launches = static_cast<int>(count);
  return c;
}

// Transformer Engine's userbuffers (transformer_engine/pytorch/module/base.py initialize_ub's defaults):
// the pipelined reduce-scatters (proj_fprop, fc2_fprop) in 4 splits, the ring-exchange all-gathers in tp.
constexpr int kUserbuffersPipelineSplits = 4;

// `pieces` GEMMs on 1/pieces of g's rows each, whose tiles fill the device's waves together: Transformer
// Engine issues them round-robin on _NUM_MAX_UB_STREAMS = 3 compute streams, so a piece's last wave
// shares the SMs with the next piece's first (the m rows split among groups, as a grouped GEMM's).
KernelCost concurrent_pieces(Gemm g, double pieces, double element) {
  g.weight_copies = pieces;  // each piece reads the whole weight
  KernelCost c = launches_of(g, 1, element);
  c.launches = static_cast<int>(pieces);
  return c;
}

}  // namespace

std::vector<TpPair> tp_overlap_pairs(const ModelSpec& m, const LayerWork& w, bool forward, bool moe_layer) {
  std::vector<TpPair> pairs;
  if (!tp_overlap_decomposes(w.tp, w.sequence_parallel)) return pairs;
  const bool userbuffers = w.tp_overlap == TpOverlap::Userbuffers;
  const double e = element_bytes(w.precision), t = w.tp;
  const double tokens = double(w.micro_batch) * w.seq_len / w.cp;  // every GEMM's rows (layer_forward's)
  const double h = m.hidden, f = m.ffn_hidden, gates = m.mlp == MlpKind::SwiGlu ? 2 : 1;
  const double A = double(m.heads) * m.head_dim, Kv = double(m.kv_heads) * m.head_dim;
  // Forward (m x k by k x n) as layer_forward lists them: {m, n, k}; the input gradient of a forward
  // GEMM is {m, k, n} (backward_of's).
  struct Linear {
    TpLinear linear;
    double n, k;
    bool gathers_forward;  // column-parallel: its input all-gathered forward (its input gradient
                           // reduce-scattered backward); row-parallel: the other way round
  };
  std::vector<Linear> linears{{TpLinear::Qkv, (A + 2 * Kv) / t, h, true},
                              {TpLinear::Output, h, A / t, false}};
  if (!moe_layer) {
    linears.push_back({TpLinear::Up, gates * f / t, h, true});
    linears.push_back({TpLinear::Down, h, f / t, false});
  }
  if (!forward) std::reverse(linears.begin(), linears.end());
  const LayerCollectiveBytes sizes = layer_collective_bytes(m, w);  // one collective's whole activation
  const double scattered = sizes.tp.value(), gathered = sizes.tp_gather.value();
  for (const Linear& l : linears) {
    const bool gathers = l.gathers_forward == forward;
    // The column-parallel input gradients (the q, k, v or gate and up GEMMs' summed before the
    // reduce-scatter) are not decomposed (tp_overlap.hpp).
    if (!forward && !gathers) continue;
    TpPair pair;
    pair.linear = l.linear;
    pair.collective = gathers ? CollectiveKind::AllGather : CollectiveKind::ReduceScatter;
    TpPieces& p = pair.pieces;
    Gemm g;
    g.m = tokens;
    g.n = forward ? l.n : l.k;
    g.k = forward ? l.k : l.n;
    p.whole = launches_of(g, 1, e);
    const double pieces = userbuffers && !gathers ? kUserbuffersPipelineSplits : t;
    Gemm piece = g;
    piece.m = tokens / pieces;
    p.lead = launches_of(piece, 1, e);
    if (userbuffers) {
      Gemm rest = g;
      rest.m = tokens * (pieces - 1) / pieces;
      p.rest = concurrent_pieces(rest, pieces - 1, e);
      // The all-gather's own shard copied into the userbuffer; the reduce-scatter kernel sums the
      // partial results as it moves them (reducescatter2_userbuff_stridedoutput): no kernel after it.
      if (gathers) p.staging.elementwise_bytes = Bytes(2 * gathered / t);
    } else {
      p.rest = launches_of(piece, pieces - 1, e);
      p.staging.elementwise_bytes = Bytes(gathers ? 2 * gathered / t : scattered * (1 + 1 / t));
    }
    p.staging.launches = p.staging.elementwise_bytes.value() > 0 ? 1 : 0;
    pairs.push_back(std::move(pair));
  }
  return pairs;
}

TpPieces tp_overlap_pieces(const ModelSpec& m, const LayerWork& w, bool forward, bool moe_layer) {
  TpPieces p;
  for (const TpPair& pair : tp_overlap_pairs(m, w, forward, moe_layer)) p += pair.pieces;
  return p;
}

KernelCost decomposed(const KernelCost& pass, const TpPieces& pieces) {
  KernelCost c = without(pass, pieces.whole);
  c += pieces.staging;
  c += pieces.lead;
  c += pieces.rest;
  return c;
}

}  // namespace paratwin::cost
