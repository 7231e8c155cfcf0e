// The live backends' limits (see live_limits.hpp): one list, read before launch and by the trainers.
#include "exec/train/live_limits.hpp"

#include "plan/ir/buckets.hpp"

namespace paratwin::exec {

std::vector<std::string> live_cpu_limitations(const Plan& p, const ModelSpec& m) {
  // verify() says what no plan may do (tp dividing heads and FFN, CP's and SP's splits of a sequence);
  // beyond it, the live backend splits the vocabulary in whole rows (Megatron-LM pads it instead).
  std::vector<std::string> out;
  // Every recompute mode and module runs (gpt/tensor_parallel_recompute.cpp), and combined 1F1B in its
  // pass order (the all-to-alls inside each pass, not beside the other's compute), at any pp.
  if (p.tp > 1 && m.vocab % p.tp != 0)
    out.push_back("tp " + std::to_string(p.tp) + " does not divide the model's vocabulary (" +
                  std::to_string(m.vocab) + " tokens): the live backend splits it in whole rows");
  return out;
}

namespace {

// What the CPU backend runs and the CUDA one does not yet.
void add_cuda_limitations(const Plan& p, const ModelSpec& m, std::vector<std::string>& out) {
  if (p.tp * p.pp * p.cp > 1) out.push_back("the CUDA backend runs data parallelism only (tp = pp = cp = 1)");
  if (p.zero == 3) out.push_back("the CUDA backend runs ZeRO 0-2; use zero 0, 1 or 2");
  // Its runner reduces into one whole gradient buffer, which takes a reduction once a step only.
  if (p.zero == 2 && reduces_every_microbatch(p) && p.num_microbatches > 1)
    out.push_back(
        "the CUDA backend reduces the gradients once a step, and ZeRO 2 reduce-scatters each of the " +
        std::to_string(p.num_microbatches) +
        " micro-batches' into the ranks' partitions; use zero 1 (the same traffic once a step) "
        "or one micro-batch a step");
  if (m.moe)
    out.push_back("the CUDA backend trains dense models only; mixture-of-experts models run on the CPU");
  if (m.yarn_factor != 1)
    out.push_back("the CUDA backend's rotary embedding has no YaRN scaling; yarn_factor runs on the CPU");
  if (m.position == PositionKind::Alibi)
    out.push_back("the CUDA backend's attention adds no ALiBi bias; position alibi runs on the CPU");
  if (m.sliding_window > 0)
    out.push_back(
        "the CUDA backend's attention attends over the whole causal prefix; sliding_window runs on the CPU");
  // Its forward runs the model whole, so it cannot wait for each bucket's gather at the bucket.
  if (p.overlap_param_gather)
    out.push_back(
        "the CUDA backend gathers ZeRO 1's parameters after the step, not during the next forward; use "
        "overlap.param_gather false");
  if (p.offload_optimizer) out.push_back("the CUDA backend does not offload the optimizer yet");
  if (p.offload_activations) out.push_back("the CUDA backend does not offload activations yet");
  if (p.compression.kind != CompressionKind::None)
    out.push_back("the CUDA backend does not compress gradients yet");
  for (const StagePlan& st : p.stages)
    if (st.recompute != Recompute::None) {
      out.push_back("the CUDA backend does not recompute yet; use recompute none");
      break;
    }
}

}  // namespace

std::vector<std::string> live_limitations(const Plan& plan, const ModelSpec& model, LiveBackend backend) {
  std::vector<std::string> out = live_cpu_limitations(plan, model);
  if (backend == LiveBackend::Cuda) add_cuda_limitations(plan, model, out);
  return out;
}

}  // namespace paratwin::exec
