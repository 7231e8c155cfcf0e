// Gradient buckets of a pipeline rank (see buckets.hpp).
#include "plan/ir/buckets.hpp"

#include <algorithm>
#include <limits>

#include "plan/cost/memory.hpp"

namespace paratwin {

bool reduces_every_microbatch(const Plan& p) {
  return reduces_every_microbatch(p.zero, p.dp * p.cp, p.compression.kind != CompressionKind::None);
}

bool tied_head_reduced_early(const Plan& p, const ModelSpec& m) {
  return m.tied_embeddings && p.pp == 1 && p.dp * p.cp > 1 && p.compression.kind == CompressionKind::None &&
         !reduces_every_microbatch(p);
}

double tied_lookup_rows(const Plan& p, const ModelSpec& m, const TrainingSpec& training) {
  const double tokens = double(p.micro_batch) * p.num_microbatches * training.seq_len / p.cp;
  return std::min(double(m.vocab) / p.tp, tokens);
}

double dp_bucket_elements(int rank, DpBuckets dp_buckets, Bytes bucket_size, double gradient_bytes) {
  // Megatron-Core's DDP sets no bucket size on pipeline ranks after the first: a chunk is one bucket.
  return rank > 0 && dp_buckets == DpBuckets::FirstStage ? std::numeric_limits<double>::infinity()
                                                         : bucket_size.value() / gradient_bytes;
}

RankParameters plan_rank_parameters(const Plan& p, const ModelSpec& m, const TrainingSpec& training,
                                    int rank) {
  RankParameters out;
  const ParameterCount pc = count_parameters(m);
  const double embedding = double(m.vocab) * m.hidden / p.tp;
  const double positions = m.position == PositionKind::Learned ? double(m.seq_len) * m.hidden : 0;
  const double bucket_elements =
      dp_bucket_elements(rank, training.dp_buckets, p.bucket_size, cost::gradient_bytes(training));
  for (const int chunk : p.chunks_of(rank)) {
    const StagePlan& st = p.stages[size_t(chunk)];
    std::vector<double> layer_params, layer_experts;  // under EP the experts are apart
    for (int l = st.layer_begin; l < st.layer_end; ++l) {
      const bool moe = m.is_moe_layer(l);
      const MoeLayerShare share = moe ? moe_layer_share(pc, p.tp, p.ep, experts_tp(p)) : MoeLayerShare{};
      layer_params.push_back(moe ? share.dense + share.experts : pc.per_dense_layer / p.tp);
      layer_experts.push_back(moe && experts_apart(p) ? share.experts : 0);
    }
    // The embedding (and learned positions) on the first chunk; an untied head, or under pp the last
    // stage's copy of a tied one, on the last.
    const double first = chunk == 0 ? embedding + positions : 0;
    const double head = chunk == p.chunks() - 1 && (!m.tied_embeddings || p.pp > 1) ? embedding : 0;
    // The final norm on the last chunk, its gradient final with the head's (split over TP as the
    // layers' norms are counted).
    const double final_norm = chunk == p.chunks() - 1 ? pc.final_norm / p.tp : 0;
    const double last = head + final_norm;
    // What the end buckets reduce of them: a tied embedding reduced early has its head's part in the
    // first bucket, with the last layers, and its lookup's rows, gathered from every replica, in the last
    // (see the header).
    const bool early = tied_head_reduced_early(p, m) && chunk == 0;
    const double lookup = double(p.dp) * p.cp * tied_lookup_rows(p, m, training) * m.hidden;
    const double first_bucket = early ? lookup + positions : first;
    const double last_bucket = (early ? embedding : head) + final_norm;
    double total = first + last;
    for (double lp : layer_params) total += lp;
    for (int l = st.layer_begin; l < st.layer_end; ++l) {
      const size_t i = size_t(l - st.layer_begin);
      out.per_layer[l] =
          layer_params[i] + (l == st.layer_begin ? first : 0) + (l == st.layer_end - 1 ? last : 0);
      out.per_layer_experts[l] = layer_experts[i];
    }
    out.per_chunk[chunk] = total;
    out.total += total;
    for (double e : layer_experts) out.experts += e;

    // In gradient order: the head, then the layers from the last, then the embedding.
    double filled = last_bucket, filled_experts = 0;
    int hi = st.layer_end;
    for (int l = st.layer_end - 1; l >= st.layer_begin; --l) {
      filled += layer_params[size_t(l - st.layer_begin)];
      filled_experts += layer_experts[size_t(l - st.layer_begin)];
      if (filled >= bucket_elements || l == st.layer_begin) {
        out.buckets.push_back(
            {chunk, l, hi, filled + (l == st.layer_begin ? first_bucket : 0), filled_experts});
        hi = l;
        filled = filled_experts = 0;
      }
    }
  }
  return out;
}

}  // namespace paratwin
