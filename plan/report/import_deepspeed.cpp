// A DeepSpeed configuration read back into a plan: the inverse of emit_deepspeed.cpp, key by key, with
// DeepSpeed's defaults (runtime/zero/config.py, runtime/config.py) for what the configuration leaves out.
#include "plan/report/import_deepspeed.hpp"

#include <nlohmann/json.hpp>
#include <set>

#include "plan/cost/memory.hpp"

namespace paratwin {
namespace {

// Keys that set nothing the twin models (optimizer hyper-parameters, schedules, logging).
const std::set<std::string> kWithoutEffect = {"optimizer",
                                              "scheduler",
                                              "gradient_clipping",
                                              "steps_per_print",
                                              "wall_clock_breakdown",
                                              "prescale_gradients",
                                              "zero_allow_untested_optimizer"};

// The configuration's keys, each marked as it is read; a bad value throws at the file naming the key.
class Config {
 public:
  Config(const nlohmann::json& root, std::string file) : root_(root), file_(std::move(file)) {}

  const nlohmann::json* get(const std::string& section, const std::string& key = "") {
    used_.insert(section + (key.empty() ? "" : "." + key));
    const auto s = root_.find(section);
    if (s == root_.end()) return nullptr;
    if (key.empty()) return &*s;
    if (!s->is_object()) fail(section, "expected an object");
    const auto k = s->find(key);
    return k == s->end() ? nullptr : &*k;
  }
  std::optional<long long> integer(const std::string& section, const std::string& key, long long lo,
                                   long long hi) {
    const nlohmann::json* v = get(section, key);
    if (!v) return std::nullopt;
    // DeepSpeed writes bucket sizes as 5e8 too.
    if (!v->is_number() ||
        v->get<double>() != static_cast<double>(static_cast<long long>(v->get<double>())) ||
        v->get<double>() < lo || v->get<double>() > hi)
      fail(section + (key.empty() ? "" : "." + key), "expected an integer from " + std::to_string(lo) +
                                                         " to " + std::to_string(hi) + ", got " + v->dump());
    return static_cast<long long>(v->get<double>());
  }
  bool boolean(const std::string& section, const std::string& key, bool otherwise) {
    const nlohmann::json* v = get(section, key);
    if (!v) return otherwise;
    if (!v->is_boolean()) fail(section + "." + key, "expected true or false, got " + v->dump());
    return v->get<bool>();
  }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw InputError(Location{file_, 0, 0}, key + ": " + what);
  }

  std::vector<std::string> unread() const {
    std::vector<std::string> out;
    for (const auto& [section, value] : root_.items()) {
      if (kWithoutEffect.count(section)) continue;
      if (!value.is_object()) {
        if (!used_.count(section)) out.push_back(section);
        continue;
      }
      for (const auto& [key, inner] : value.items())
        if (!used_.count(section + "." + key) && !used_.count(section + ".*"))
          out.push_back(section + "." + key);
    }
    return out;
  }

 private:
  const nlohmann::json& root_;
  std::string file_;
  std::set<std::string> used_;
};

// train_batch_size = micro-batch x accumulation x dp: any two and the world, or all three.
void read_batch(Config& c, ImportedLaunch& out, std::optional<int> gpus) {
  Plan& p = out.plan;
  const auto batch = c.integer("train_batch_size", "", 1, 1LL << 40);
  const auto micro = c.integer("train_micro_batch_size_per_gpu", "", 1, 1 << 20);
  const auto steps = c.integer("gradient_accumulation_steps", "", 1, 1 << 24);
  const int model_parallel = p.tp * p.pp;
  std::optional<long long> dp;
  if (gpus) {
    if (*gpus % model_parallel)
      c.fail("tensor_parallel.autotp_size", "the GPUs are not a multiple of tp x pp");
    dp = *gpus / model_parallel;
  }
  if (batch && micro && steps) {
    if (*batch % (*micro * *steps))
      c.fail("train_batch_size", "not a multiple of micro-batch x accumulation");
    if (dp && *dp != *batch / (*micro * *steps))
      c.fail("train_batch_size", "is not micro-batch x accumulation x dp for the GPUs given");
    dp = *batch / (*micro * *steps);
  }
  if (!dp || !batch || !micro)
    c.fail("train_batch_size",
           "give train_batch_size and train_micro_batch_size_per_gpu, with gradient_accumulation_steps or "
           "the GPUs");
  if (*batch % (*micro * *dp)) c.fail("train_batch_size", "not a multiple of micro-batch x dp");
  p.dp = static_cast<int>(*dp);
  p.micro_batch = static_cast<int>(*micro);
  p.num_microbatches = static_cast<int>(*batch / (*micro * *dp));
  out.training.global_batch = *batch;
  out.world = p.dp * model_parallel;
}

// DeepSpeed reduces gradients in `communication_data_type` (default: the training precision) and
// accumulates them in `data_types.grad_accum_dtype`; the twin keeps one precision for both: fp32 when
// either is. Returns whether the accumulation is fp32.
bool read_gradient_precision(Config& c, TrainingSpec& t) {
  auto fp32 = [&](const std::string& section, const std::string& key) {
    const nlohmann::json* v = c.get(section, key);
    return v && v->is_string() && (*v == "fp32" || *v == "float32" || *v == "float");
  };
  const bool reduce = fp32("communication_data_type", ""),
             accumulate = fp32("data_types", "grad_accum_dtype");
  if (t.precision != Precision::Fp32 && (reduce || accumulate)) t.grad_reduce = Precision::Fp32;
  return accumulate;
}

void read_zero(Config& c, ImportedLaunch& out) {
  Plan& p = out.plan;
  p.zero = static_cast<int>(c.integer("zero_optimization", "stage", 0, 3).value_or(0));
  p.overlap_dp = c.boolean("zero_optimization", "overlap_comm", p.zero == 3);
  // DeepSpeed's default bucket is 5e8 elements.
  const long long bucket =
      c.integer("zero_optimization", "reduce_bucket_size", 1, 1LL << 40).value_or(500000000);
  c.get("zero_optimization", "allgather_bucket_size");
  p.bucket_size = Bytes(static_cast<double>(bucket) * cost::gradient_bytes(out.training));
  if (const nlohmann::json* off = c.get("zero_optimization", "offload_optimizer"))
    p.offload_optimizer = off->is_object() && off->value("device", std::string("none")) != "none";
  // MiCS: ZeRO 3 within groups of this many ranks, replicated across them (HSDP).
  if (const auto shard = c.integer("zero_optimization", "mics_shard_size", 1, 1 << 24);
      shard && *shard < p.dp) {
    if (p.zero != 3 || p.dp % *shard != 0)
      c.fail("zero_optimization.mics_shard_size",
             "needs stage 3 and a shard size that divides dp=" + std::to_string(p.dp));
    p.dp_replicate = static_cast<int>(p.dp / *shard);
  }
}

Recompute read_checkpointing(Config& c, ImportedLaunch& out) {
  Plan& p = out.plan;
  const bool partition = c.boolean("activation_checkpointing", "partition_activations", false);
  p.sequence_parallel = partition && p.tp > 1;
  c.get("activation_checkpointing", "contiguous_memory_optimization");
  p.offload_activations = c.boolean("activation_checkpointing", "cpu_checkpointing", false);
  const bool checkpoints =
      c.integer("activation_checkpointing", "number_checkpoints", 0, 1 << 20).has_value();
  const auto interval = c.integer("pipeline", "activation_checkpoint_interval", 0, 1 << 20);
  if (interval) return *interval > 0 ? Recompute::Full : checkpoints ? Recompute::Selective : Recompute::None;
  if (checkpoints)
    out.warnings.push_back(
        "activation_checkpointing.number_checkpoints: the model checkpoints its layers; "
        "imported as recompute full (selective cannot be told apart)");
  return checkpoints ? Recompute::Full : Recompute::None;
}

}  // namespace

ImportedLaunch import_deepspeed(const std::string& json_text, const std::string& file, const ModelSpec& model,
                                std::optional<int> seq_len, std::optional<int> gpus) {
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(Location{file, 0, 0}, std::string("not JSON: ") + e.what());
  }
  if (!root.is_object())
    throw InputError(Location{file, 0, 0}, "expected a JSON object (a DeepSpeed config)");
  Config c(root, file);
  ImportedLaunch out;
  out.source = "a DeepSpeed config";
  out.model = model;
  out.training.seq_len = seq_len.value_or(model.seq_len);
  const bool bf16 = c.boolean("bf16", "enabled", false), fp16 = c.boolean("fp16", "enabled", false);
  out.training.precision = bf16 ? Precision::Bf16 : fp16 ? Precision::Fp16 : Precision::Fp32;
  const bool fp32_accumulation = read_gradient_precision(c, out.training);
  Plan& p = out.plan;
  p.tp = static_cast<int>(c.integer("tensor_parallel", "autotp_size", 1, 1024).value_or(1));
  p.pp = static_cast<int>(c.integer("pipeline", "stages", 1, 4096).value_or(1));
  c.get("pipeline", "partition");
  if (p.pp > 1)
    out.warnings.push_back(
        "pipeline: DeepSpeed's PipelineModule splits layers by its own rule; imported as "
        "the twin's even split");
  read_batch(c, out, gpus);
  read_zero(c, out);
  // DeepSpeed runs bf16 through its BF16_Optimizer without ZeRO, and under ZeRO 1 when the accumulation is
  // fp32 (DeepSpeedEngine._do_optimizer_sanity_check); it adds each micro-batch's bf16 gradients into its
  // fp32 buffer and keeps them until the next backward.
  if (out.training.precision == Precision::Bf16 && out.training.grad_reduce == Precision::Fp32 &&
      (p.zero == 0 || (p.zero == 1 && fp32_accumulation)))
    out.training.grad_accumulation = GradAccumulation::Copy;
  const Recompute recompute = read_checkpointing(c, out);
  p.stages = even_stages(model.layers, p.chunks(), "", recompute);
  for (const auto& key : c.unread())
    out.warnings.push_back(key + ": not read (unknown to the import, or nothing the twin models)");
  return out;
}

}  // namespace paratwin
