// Sizes of a layer's TP, CP and EP collectives.
#include "plan/cost/layer_collectives.hpp"

#include "plan/cost/memory.hpp"

namespace paratwin::cost {

namespace {
constexpr double kFloat8Bytes = 1;
}  // namespace

bool tp_gathers_float8(const LayerWork& w) {
  if (w.precision != Precision::Fp8 || !w.sequence_parallel || w.tp <= 1) return false;
  const bool torchao = w.fp8_recipe == Fp8Recipe::TorchaoTensorwise;
  return torchao == (w.tensor_parallel == TensorParallelImpl::DTensor);
}

bool tp_reduces_amax(const LayerWork& w) {
  return tp_gathers_float8(w) && w.fp8_recipe == Fp8Recipe::TeCurrent;
}

LayerCollectiveBytes layer_collective_bytes(const ModelSpec& model, const LayerWork& work) {
  const double elem = element_bytes(work.precision);
  const double tokens = double(work.micro_batch) * work.seq_len / work.cp;  // this CP rank's
  LayerCollectiveBytes out;
  out.tp = Bytes(tokens * model.hidden * elem);
  out.tp_gather = tp_gathers_float8(work) ? Bytes(tokens * model.hidden * kFloat8Bytes) : out.tp;
  out.tp_amax = Bytes(tp_reduces_amax(work) ? 4.0 : 0.0);  // one fp32
  const double kv_dim = double(work.repeat_kv ? model.heads : model.kv_heads) * model.head_dim / work.tp;
  out.cp = Bytes(double(work.micro_batch) * work.seq_len * 2 * kv_dim * elem);
  // Folded experts (folds_experts) dispatch the rank's sequence-parallel share of the tokens.
  const double dispatched = folds_experts(work) ? tokens / work.tp : tokens;
  if (model.moe) out.ep = Bytes(dispatched * model.moe->top_k * model.hidden * elem * work.expert_load);
  return out;
}

}  // namespace paratwin::cost
