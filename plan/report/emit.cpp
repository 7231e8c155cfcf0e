// Megatron-LM and DeepSpeed renderings of a plan.
#include "plan/report/emit.hpp"

#include <nlohmann/json.hpp>

namespace paratwin {

std::string megatron_arguments(const Plan& p, const ScenarioSpec& s) {
  std::string a;
  auto arg = [&a](const std::string& name, const std::string& value = "") {
    a += "--" + name + (value.empty() ? "" : " " + value) + " \\\n";
  };
  const auto n = [](long long v) { return std::to_string(v); };
  arg("tensor-model-parallel-size", n(p.tp));
  arg("pipeline-model-parallel-size", n(p.pp));
  if (p.cp > 1) arg("context-parallel-size", n(p.cp));
  if (p.ep > 1) arg("expert-model-parallel-size", n(p.ep));
  if (p.virtual_stages > 1) arg("num-layers-per-virtual-pipeline-stage", n(s.model.layers / p.chunks()));
  arg("num-layers", n(s.model.layers));
  arg("micro-batch-size", n(p.micro_batch));
  arg("global-batch-size", n(s.training.global_batch));
  arg("seq-length", n(s.training.seq_len));
  const Recompute r = p.stages.empty() ? Recompute::None : p.stages.front().recompute;
  if (r == Recompute::Selective) arg("recompute-granularity", "selective");
  if (r == Recompute::Full) {
    arg("recompute-granularity", "full");
    arg("recompute-method", "uniform");
    arg("recompute-num-layers", "1");
  }
  if (p.sequence_parallel) arg("sequence-parallel");
  if (p.zero >= 1) arg("use-distributed-optimizer");
  if (p.overlap_dp) arg("overlap-grad-reduce");
  if (p.overlap_tp) arg("tp-comm-overlap");
  if (s.training.precision == Precision::Bf16) arg("bf16");
  if (s.training.precision == Precision::Fp16) arg("fp16");
  a.resize(a.size() - 3);  // the last " \\\n"
  a += "\n";
  std::vector<std::string> missing;
  if (p.zero >= 2) missing.push_back("ZeRO-" + std::to_string(p.zero) + " (Megatron shards only the optimizer)");
  if (p.compression.kind == CompressionKind::TopK) missing.push_back("top-k gradient compression");
  if (p.offload_optimizer) missing.push_back("optimizer offload");
  bool uneven = false;
  for (const auto& st : p.stages) uneven |= st.layer_end - st.layer_begin != p.stages.front().layer_end;
  if (uneven) missing.push_back("uneven stages (use --decoder-first/last-pipeline-num-layers where supported)");
  if (!missing.empty()) a += "# not expressible as Megatron-LM arguments: " + join(missing, "; ") + "\n";
  return a;
}

std::string deepspeed_config(const Plan& p, const ScenarioSpec& s) {
  nlohmann::json zero = {{"stage", p.zero}, {"overlap_comm", p.overlap_dp},
                         {"reduce_bucket_size", static_cast<long long>(p.bucket_size.value())}};
  if (p.offload_optimizer) zero["offload_optimizer"] = {{"device", "cpu"}, {"pin_memory", true}};
  const Recompute r = p.stages.empty() ? Recompute::None : p.stages.front().recompute;
  nlohmann::json config = {
      {"train_batch_size", s.training.global_batch},
      {"train_micro_batch_size_per_gpu", p.micro_batch},
      {"gradient_accumulation_steps", p.num_microbatches},
      {"zero_optimization", zero},
      {"bf16", {{"enabled", s.training.precision == Precision::Bf16}}},
      {"fp16", {{"enabled", s.training.precision == Precision::Fp16}}},
      {"activation_checkpointing",
       {{"partition_activations", p.sequence_parallel}, {"contiguous_memory_optimization", r != Recompute::None}}},
      {"pipeline", {{"stages", p.pp}, {"partition_method", "parameters"}}},
      {"tensor_parallel", {{"autotp_size", p.tp}}}};
  return config.dump(2) + "\n";
}

}  // namespace paratwin
