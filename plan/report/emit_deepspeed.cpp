// A plan as a DeepSpeed configuration, checked against DeepSpeed's config classes, checkpointing set-up
// and engine checks by bench/emit_check.sh; the plans DeepSpeed cannot run are refused with the reason.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "plan/cost/memory.hpp"
#include "plan/report/emit.hpp"
#include "plan/spec/suggest.hpp"

namespace paratwin {
namespace {

std::string n(long long v) {
  return std::to_string(v);
}

// Layers per pipeline rank: DeepSpeed's pipeline engine runs one chunk per stage, so a rank's chunks merge.
std::vector<int> rank_layers(const Plan& p) {
  std::vector<int> out(std::max(1, p.pp), 0);
  const std::vector<int> chunks = emit_detail::chunk_layers(p);
  for (size_t c = 0; c < chunks.size(); ++c) out[c % out.size()] += chunks[c];
  return out;
}

// Activation checkpointing as deepspeed.checkpointing.configure accepts it: contiguous buffers only with
// partitioned activations and a checkpoint count, CPU checkpoints only with partitioned activations.
nlohmann::json activation_checkpointing(const Plan& p, Recompute r, std::vector<std::string>& notes) {
  // Megatron-style sequence parallelism leaves each TP rank a share of the activations; DeepSpeed's
  // counterpart partitions the checkpoints over the model-parallel group.
  const bool partition = p.tp > 1 && p.sequence_parallel;
  nlohmann::json c = {{"partition_activations", partition}};
  if (r == Recompute::None) {
    c["contiguous_memory_optimization"] = false;
  } else {
    int most = 0;
    for (int k : rank_layers(p)) most = std::max(most, k);
    c["contiguous_memory_optimization"] = partition;
    c["number_checkpoints"] = most;  // one checkpoint per layer of the largest stage
    if (r == Recompute::Selective)
      notes.push_back(
          "recompute selective: DeepSpeed's configuration has no switch for it; the model "
          "checkpoints its " +
          (p.stages.front().recompute_modules == RecomputeModules{}
               ? std::string("attention core")
               : "modules (" + p.stages.front().recompute_modules.names() + ")") +
          " with deepspeed.checkpointing.checkpoint");
  }
  if (p.offload_activations) {
    if (partition && r != Recompute::None)
      c["cpu_checkpointing"] = true;
    else
      notes.push_back(
          "offload_activations: DeepSpeed moves only partitioned activation checkpoints to the "
          "CPU (recompute and tp > 1 with sequence parallelism)");
  }
  return c;
}

nlohmann::json zero_optimization(const Plan& p, const ScenarioSpec& s, std::vector<std::string>& notes) {
  const long long bucket = emit_detail::bucket_elements(p, s);
  nlohmann::json z = {{"stage", p.zero},
                      {"overlap_comm", p.overlap_dp},
                      {"reduce_bucket_size", bucket},
                      {"allgather_bucket_size", bucket}};
  // HSDP is DeepSpeed's MiCS: ZeRO 3 within shard groups of this many ranks, replicated across them.
  if (p.dp_replicate > 1) z["mics_shard_size"] = p.zero_group();
  if (p.offload_optimizer) {
    if (p.zero >= 1)
      z["offload_optimizer"] = {{"device", "cpu"}, {"pin_memory", true}};
    else
      notes.push_back(
          "offload_optimizer with zero 0: DeepSpeed offloads the optimizer only under ZeRO (stage >= 1)");
  }
  return z;
}

// The plan features DeepSpeed's configuration does not carry, each named.
void dropped(const Plan& p, const ScenarioSpec& s, std::vector<std::string>& notes) {
  if (p.cp > 1)
    notes.push_back("cp=" + n(p.cp) +
                    ": DeepSpeed's sequence parallelism (Ulysses, all-to-all) is not the "
                    "plan's context parallelism; not emitted");
  if (p.ep > 1)
    notes.push_back("ep=" + n(p.ep) + ": give deepspeed.moe.layer.MoE(ep_size=" + n(p.ep) + ") in the model");
  if (folds_experts(p))
    notes.push_back("expert_tp=" + n(p.expert_tp) +
                    ": DeepSpeed-MoE shards no expert over a width of its own (Megatron-Core's MoE parallel "
                    "folding); not emitted");
  if (p.tp > 1 && p.sequence_parallel)
    notes.push_back(
        "sequence_parallel: AutoTP has no Megatron-style sequence parallelism; activations are "
        "partitioned at checkpoints instead");
  if (p.pp > 1) {
    if (p.schedule != Schedule::OneFOneB)
      notes.push_back("schedule " + enum_name(p.schedule, kScheduleNames) +
                      ": DeepSpeed's pipeline engine runs 1F1B, one chunk per stage");
    std::vector<std::string> sizes;
    bool even = true;
    const std::vector<int> layers = rank_layers(p);
    for (int k : layers) {
      sizes.push_back(n(k));
      even &= k == layers.front();
    }
    notes.push_back(std::string("pipeline stages of ") + join(sizes, ", ") +
                    " layers: give PipelineModule(num_stages=" + n(p.pp) +
                    (even ? ", partition_method=\"uniform\")"
                          : ") a partition; DeepSpeed's methods (uniform, "
                            "parameters, type:) split by their own rule"));
  }
  if (p.order != "tp-cp-dp-pp" && !(p.cp == 1 && p.order == "tp-dp-cp-pp"))
    notes.push_back("rank order " + p.order + ": DeepSpeed's pipeline topology is tp-dp-pp");
  if (p.compression.kind == CompressionKind::TopK)
    notes.push_back(
        "top-k gradient compression: DeepSpeed's compressed optimizers (1-bit Adam) are another method");
  if (p.overlap_tp && p.tp > 1)
    notes.push_back("overlap_tp: AutoTP does not overlap its collectives with GEMMs");
  if (p.overlap_ep)
    notes.push_back("overlap.ep: DeepSpeed-MoE has no combined 1F1B; its all-to-alls run between the layers");
  if (p.overlap_param_gather)
    notes.push_back(
        "overlap.param_gather: DeepSpeed's ZeRO 1 gathers the parameters inside the optimizer "
        "step, not during the next forward");
  if (s.training.precision == Precision::Fp8)
    notes.push_back(
        "fp8: DeepSpeed's config has no FP8 training switch (Transformer Engine in the model); bf16 emitted");
}

}  // namespace

std::vector<std::string> deepspeed_refusals(const Plan& p, const ScenarioSpec& s) {
  std::vector<std::string> why;
  if (p.pp > 1 && p.zero >= 2)
    why.push_back("ZeRO " + n(p.zero) + " with pipeline parallelism (pp=" + n(p.pp) +
                  "): DeepSpeed's pipeline engine asserts ZeRO-2 and ZeRO-3 are incompatible with it; use "
                  "zero 1, or pp 1");
  if (s.model.moe && p.zero == 3)
    why.push_back(
        "a mixture-of-experts model with ZeRO 3: DeepSpeed's native MoE is not supported with "
        "ZeRO stage 3; use zero 1 or 2");
  return why;
}

EmittedConfig deepspeed_config(const Plan& p, const ScenarioSpec& s) {
  if (const auto why = deepspeed_refusals(p, s); !why.empty()) {
    const auto it = s.locations.find("plan");
    throw InputError(it != s.locations.end() ? it->second : s.document.location,
                     "DeepSpeed cannot run this plan: " + join(why, "; ") +
                         " (paratwin plan --emit megatron expresses it)");
  }
  EmittedConfig out;
  const Recompute r = emit_detail::uniform_recompute(p, out.notes);
  if (const int first = emit_detail::block_recompute_layers(p, out.notes); first > 0)
    out.notes.push_back("recompute_layers " + std::to_string(first) +
                        ": DeepSpeed's configuration checkpoints every layer the model wraps; wrap each "
                        "stage's first layers only to keep the others' activations");
  const Precision precision = s.training.precision;
  nlohmann::json config = {
      {"train_batch_size", s.training.global_batch},
      {"train_micro_batch_size_per_gpu", p.micro_batch},
      {"gradient_accumulation_steps", p.num_microbatches},
      {"zero_optimization", zero_optimization(p, s, out.notes)},
      {"bf16", {{"enabled", precision == Precision::Bf16 || precision == Precision::Fp8}}},
      {"fp16", {{"enabled", precision == Precision::Fp16}}},
      {"activation_checkpointing", activation_checkpointing(p, r, out.notes)}};
  if (precision != Precision::Fp32 && cost::gradient_bytes(s.training) == 4)
    config["communication_data_type"] = "fp32";
  // Under ZeRO 1 DeepSpeed runs the BF16_Optimizer, which copies each micro-batch's gradients into an
  // fp32 buffer (training.grad_accumulation copy), only when the accumulation is declared fp32.
  if (p.zero == 1 && cost::gradient_copy_bytes(s.training, p.zero) > 0)
    config["data_types"] = {{"grad_accum_dtype", "fp32"}};
  if (p.tp > 1) config["tensor_parallel"] = {{"autotp_size", p.tp}};
  if (p.pp > 1)
    config["pipeline"] = {{"stages", p.pp},
                          {"partition", "uniform"},
                          {"activation_checkpoint_interval", r == Recompute::Full ? 1 : 0}};
  dropped(p, s, out.notes);
  out.text = config.dump(2) + "\n";
  return out;
}

}  // namespace paratwin
