// A plan in the forms other training systems take: a Megatron-LM launch (environment, torchrun and
// pretrain_gpt.py's arguments) and a DeepSpeed configuration, each with a note naming every plan feature
// the framework cannot express. bench/emit_check.sh feeds both to the frameworks' own checks.
#pragma once

#include <string>
#include <vector>

#include "plan/ir/plan.hpp"

namespace paratwin {

// What a framework reads, and what of the plan it leaves out or runs otherwise, one feature a note.
struct EmittedConfig {
  std::string text;
  std::vector<std::string> notes;
};

// Megatron-LM (core): `export` lines for the environment Megatron asserts on (CUDA_DEVICE_MAX_CONNECTIONS=1
// for tp or cp > 1, unless Megatron-FSDP runs), a torchrun line whose world size is the plan's GPUs, and
// pretrain_gpt.py's arguments: model shape, parallel sizes and rank order, batch, schedule and stage layout,
// recompute, sequence parallelism, ZeRO (1: distributed optimizer; 2, 3: Megatron-FSDP), offload, MoE,
// precision. The text ends with the notes as `#` comments.
EmittedConfig megatron_launch(const Plan& plan, const ScenarioSpec& scenario);

// Megatron's --pipeline-model-parallel-layout for the plan's chunks ("E,t*11|t*11|t*29|t*29,L": the
// embedding, then each chunk's layers in model order, then the loss), or "" when Megatron's own even
// split builds the same chunks.
std::string megatron_layout(const Plan& plan, int layers);

// Why DeepSpeed cannot run the plan at all: ZeRO 2 or 3 with its pipeline engine (pp > 1), or its native
// MoE with ZeRO 3. Empty when it can.
std::vector<std::string> deepspeed_refusals(const Plan& plan, const ScenarioSpec& scenario);

// A DeepSpeed configuration (JSON) its runtime accepts: batch sizes, ZeRO stage, buckets and offload,
// precision, activation checkpointing, AutoTP size, pipeline stages. Throws InputError at the scenario's
// plan, with every reason of deepspeed_refusals, when DeepSpeed cannot run the plan.
EmittedConfig deepspeed_config(const Plan& plan, const ScenarioSpec& scenario);

// Shared by both renderings.
namespace emit_detail {
// The recompute mode of every chunk when they agree; otherwise the strongest (full > selective > none),
// with a note saying which chunks differ.
Recompute uniform_recompute(const Plan& plan, std::vector<std::string>& notes);
// Each chunk's recompute_layers (its first layers recomputed, Megatron-LM's block method) when every
// recomputing chunk has the same; otherwise 0 (every layer's), with a note when some chunk sets it.
int block_recompute_layers(const Plan& plan, std::vector<std::string>& notes);
// Layers per chunk, in model order.
std::vector<int> chunk_layers(const Plan& plan);
// The plan's data-parallel gradient bucket in gradient elements (what both frameworks count).
long long bucket_elements(const Plan& plan, const ScenarioSpec& scenario);
}  // namespace emit_detail

}  // namespace paratwin
