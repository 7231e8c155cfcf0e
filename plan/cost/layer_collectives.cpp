// Sizes of a layer's TP, CP and EP collectives.
#include "plan/cost/layer_collectives.hpp"

#include "plan/cost/memory.hpp"

namespace paratwin::cost {

LayerCollectiveBytes layer_collective_bytes(const ModelSpec& model, const LayerWork& work) {
  const double elem = element_bytes(work.precision);
  const double tokens = double(work.micro_batch) * work.seq_len / work.cp;  // this CP rank's
  LayerCollectiveBytes out;
  out.tp = Bytes(tokens * model.hidden * elem);
  const double kv_dim = double(work.repeat_kv ? model.heads : model.kv_heads) * model.head_dim / work.tp;
  out.cp = Bytes(double(work.micro_batch) * work.seq_len * 2 * kv_dim * elem);
  if (model.moe) out.ep = Bytes(tokens * model.moe->top_k * model.hidden * elem * work.expert_load);
  return out;
}

}  // namespace paratwin::cost
