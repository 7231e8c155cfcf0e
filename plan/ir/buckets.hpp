// The data-parallel gradient buckets of one pipeline rank: which layers each bucket holds. The one
// bucket planner: lowering makes each bucket a task with its layer span (plan/ir/program.hpp), and
// every live runner reduces what the Program's tasks name, so the twin and the runs cut alike.
// Buckets follow the order in which the backward finishes gradients: per chunk, from its last layer
// down to its first; a bucket closes once it holds bucket_size bytes, and at the chunk's first layer.
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
};

// `plan` must be verified (verify() in plan/ir/plan.hpp); bucket sizes count elements of `precision`.
RankParameters plan_rank_parameters(const Plan& plan, const ModelSpec& model, Precision precision, int rank);

}  // namespace paratwin
