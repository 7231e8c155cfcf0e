// A plan in the forms other training systems take: Megatron-LM command-line arguments and a
// DeepSpeed configuration.
#pragma once

#include <string>

#include "plan/ir/plan.hpp"

namespace paratwin {

// Megatron-LM (core) arguments: parallel sizes, virtual pipeline layers, micro and global batch,
// recompute granularity, sequence parallelism, distributed optimizer (ZeRO-1). Features Megatron
// lacks (ZeRO-2/3, top-k compression, uneven stages) are named in a trailing comment.
std::string megatron_arguments(const Plan& plan, const ScenarioSpec& scenario);

// A DeepSpeed config JSON: batch sizes, ZeRO stage and offload, bf16/fp16, activation checkpointing.
std::string deepspeed_config(const Plan& plan, const ScenarioSpec& scenario);

}  // namespace paratwin
