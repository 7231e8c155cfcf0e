// The inverse of deepspeed_config: a DeepSpeed configuration (JSON) and the model it trains read back into
// the plan it runs, for the same scenario writer as the Megatron-LM import.
#pragma once

#include <optional>
#include <string>

#include "plan/report/import_megatron.hpp"

namespace paratwin {

// Reads batch sizes (any two of train_batch_size, train_micro_batch_size_per_gpu,
// gradient_accumulation_steps, with `gpus` for the third), zero_optimization (stage, overlap_comm,
// reduce_bucket_size, offload_optimizer), bf16 / fp16, activation_checkpointing, tensor_parallel.autotp_size
// and pipeline.stages. `seq_len` defaults to the model's. Keys it does not read become warnings; a bad value
// throws InputError at `file` naming the key.
ImportedLaunch import_deepspeed(const std::string& json_text, const std::string& file, const ModelSpec& model,
                                std::optional<int> seq_len = std::nullopt,
                                std::optional<int> gpus = std::nullopt);

}  // namespace paratwin
