// The data-parallel gradient buckets of one pipeline rank: which layers each bucket holds. The one
// bucket planner: lowering makes each bucket a task with its layer span (plan/ir/program.hpp), and
// every live runner reduces what the Program's tasks name, so the twin and the runs cut alike.
// Buckets follow the order in which the backward finishes gradients: per chunk, from its last layer
// down to its first; a bucket closes once it holds bucket_size bytes, and at the chunk's first layer
// (under training.dp_buckets first_stage, on pipeline ranks after the first, only there).
#pragma once

#include <map>
#include <vector>

#include "plan/ir/plan.hpp"
#include "plan/spec/model.hpp"

namespace paratwin {

struct GradientBucket {
  int chunk = 0;
  int layer_begin = 0, layer_end = 0;  // layers [begin, end) of the model, inside the chunk
  // Parameters whose gradients it reduces on one rank (over tp; under EP the rank's experts only), with
  // the embedding when it starts at layer 0 and the head when it ends at the model's last layer.
  double elements = 0;
  double expert_elements = 0;  // of elements, experts' under EP (reduced over their replicas only)
};

// What one rank of pipeline rank `rank` holds before ZeRO sharding, and its buckets in issue order.
struct RankParameters {
  std::map<int, double> per_chunk;  // chunk -> parameters
  double total = 0;
  double experts = 0;  // of total, experts' under EP
  std::vector<GradientBucket> buckets;
  // Per layer of the rank's chunks: its parameters, the model's first layer with the embedding (and
  // learned positions) and the last with the head; of them, experts' under EP. ZeRO 3's units.
  std::map<int, double> per_layer, per_layer_experts;
};

// One MoE layer's parameters on one rank: the experts' (1/ep of them, each split over expert_tp) and the
// rest (attention, norms, router: split over tp). Lowering (plan_rank_parameters) and the optimizer's
// tables count them so.
struct MoeLayerShare {
  double dense = 0, experts = 0;
};
inline MoeLayerShare moe_layer_share(const ParameterCount& count, int tp, int ep, int expert_tp) {
  return {(count.per_moe_layer - count.per_expert * count.experts) / tp,
          moe_layer_expert_parameters(count, ep) / expert_tp};
}

// Whether data parallelism moves the experts' gradients and ZeRO shards under EP: each expert has more
// than one holder (`expert_replicas`, plan.hpp's). Otherwise they stay where they are. Lowering's
// experts' parts (GroupKind::ExpertDp), the verifier and the optimizer's bounds ask.
inline bool experts_replicated(int expert_replicas) {
  return expert_replicas > 1;
}

// Whether the buckets are reduce-scattered every micro-batch into each rank's partition of the
// gradients, as DeepSpeed and FSDP run ZeRO 2 and 3 over several replicas (dp x cp), rather than
// reduced once a step: not under gradient compression, which keeps its once-a-step exchange.
bool reduces_every_microbatch(const Plan& plan);
// The same from the fields it reads (the optimizer's candidates before they are Plans): `compressed`
// under gradient compression.
inline bool reduces_every_microbatch(int zero, int replicas, bool compressed) {
  return (zero == 2 || zero == 3) && replicas > 1 && !compressed;
}

// Whether ZeRO 1 gathers its updated parameters during the next step's first forward, bucket by bucket
// (Megatron-LM's --overlap-param-gather, plan.overlap.param_gather; lower_param_gather.cpp) rather than
// after the optimizer step: over several replicas (dp x cp) only.
inline bool gathers_params_in_forward(bool overlap_param_gather, int zero, int replicas) {
  return overlap_param_gather && zero == 1 && replicas > 1;
}

// Gradient elements a DP bucket closes at on pipeline rank `rank` (walked from a chunk's last layer, a
// bucket closes once it holds this many, or at the chunk's first layer): plan.bucket_size's, but
// unbounded on the ranks after the first under training.dp_buckets first_stage.
double dp_bucket_elements(int rank, DpBuckets dp_buckets, Bytes bucket_size, double gradient_bytes);

// Tied embeddings on one pipeline stage under data parallelism (dense buckets): the head's part of the
// tied gradient is final once the head's backward has run, the lookup's only at the end, and it touches
// the batch's tokens' rows alone. So the head's part is reduced in the first bucket (with the last
// layers) and the lookup's rows, gathered from every replica, in the last one (with the positions): the
// embedding leaves the critical path's last bucket. The CPU runner and the twin follow this (the CUDA
// runner still reduces the whole embedding in its last bucket). Not where the buckets are reduced every
// micro-batch (reduces_every_microbatch), each right after the backward that made it.
bool tied_head_reduced_early(const Plan& plan, const ModelSpec& model);
// The rows the lookup's part can touch on one rank of the DP group in a step: its tokens, at most the
// rank's vocabulary rows; each replica's are gathered by all (the twin counts this bound).
double tied_lookup_rows(const Plan& plan, const ModelSpec& model, const TrainingSpec& training);

// `plan` must be verified (verify() in plan/ir/plan.hpp); bucket sizes count elements of the training
// precision.
RankParameters plan_rank_parameters(const Plan& plan, const ModelSpec& model, const TrainingSpec& training,
                                    int rank);

}  // namespace paratwin
