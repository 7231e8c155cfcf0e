// Cross-field checks of scenarios.
#include "plan/spec/checks.hpp"

#include <algorithm>

#include "plan/spec/limits.hpp"

namespace paratwin {
namespace {

class Checker {
 public:
  Checker(const ScenarioSpec& s, Diagnostics& diag) : s_(s), diag_(diag) {}

  Location at(const std::string& field) const {
    // The most specific location recorded: "plan.tp", else "plan", else the scenario file.
    for (std::string f = field;;) {
      if (auto it = s_.locations.find(f); it != s_.locations.end()) return it->second;
      const size_t dot = f.rfind('.');
      if (dot == std::string::npos) break;
      f.resize(dot);
    }
    return s_.document.location;
  }
  void error(const std::string& field, const std::string& message) { diag_.error(at(field), message); }
  void warning(const std::string& field, const std::string& message) { diag_.warning(at(field), message); }

  void run() {
    training();
    plan_degrees();
    plan_schedule();
    plan_batch();
    policies();
  }

 private:
  static std::string kv(const std::string& k, long long v) { return k + "=" + std::to_string(v); }

  void training() {
    const auto& t = s_.training;
    if (t.seq_len > s_.model.seq_len)
      error("training.seq_len", kv("training.seq_len", t.seq_len) +
                                    " exceeds the model's maximum sequence length " +
                                    kv("model.seq_len", s_.model.seq_len));
    if (t.attention == AttentionKind::Triton) triton_attention();
    for (const auto& pool : s_.cluster.pools) {
      const DeviceSpec& d = s_.cluster.device_of(pool);
      if (d.peak.contains(t.precision)) continue;
      std::vector<std::string> have;
      for (const auto& [p, rate] : d.peak) have.push_back(enum_name(p, kPrecisionNames));
      error("training.precision", "precision " + enum_name(t.precision, kPrecisionNames) +
                                      " is not supported by device " + d.name + " (pool " + pool.name +
                                      "); expected one of " + join(have));
    }
  }

  // The Triton FlashAttention kernel takes heads up to 128 wide, and its rates are a figure of their own
  // (efficiency.triton): a device without them would silently run it at the GEMM rate.
  void triton_attention() {
    if (s_.model.head_dim > kTritonMaxHeadDim)
      error("training.attention", "attention triton takes heads up to " + std::to_string(kTritonMaxHeadDim) +
                                      " wide (flash_attn_triton.py), got " +
                                      kv("model.head_dim", s_.model.head_dim) + "; use flash2 or flash3");
    for (const auto& pool : s_.cluster.pools) {
      const DeviceSpec& d = s_.cluster.device_of(pool);
      if (!d.efficiency.triton)
        error("training.attention",
              "attention triton needs the Triton kernel's rates, but device " + d.name + " (pool " +
                  pool.name +
                  ") has no efficiency.triton; add them (topologies/dgx-h100.yaml has an "
                  "example) or use flash2");
    }
  }

  void plan_degrees() {
    const auto& p = s_.plan;
    const auto& m = s_.model;
    if (p.tp) {
      const int tp = *p.tp;
      if (m.heads % tp != 0)
        error("plan.tp", kv("plan.tp", tp) + " does not divide " + kv("model.heads", m.heads) +
                             "; tensor parallelism splits attention heads evenly" +
                             nearest_divisor(m.heads, tp, "plan.tp"));
      else if (m.kv_heads % tp != 0)
        error("plan.tp", kv("plan.tp", tp) + " does not divide " + kv("model.kv_heads", m.kv_heads) +
                             "; each tensor-parallel rank needs whole key/value head groups" +
                             nearest_divisor(m.kv_heads, tp, "plan.tp"));
      if (m.vocab % tp != 0)
        warning("plan.tp", "model.vocab=" + std::to_string(m.vocab) + " is not divisible by " +
                               kv("plan.tp", tp) + "; the vocabulary-parallel embedding is padded");
      if (!s_.search.tp_across_nodes)
        for (const auto& pool : s_.cluster.pools)
          if (pool.gpus_per_node % tp != 0)
            error("plan.tp", kv("plan.tp", tp) + " does not fit the " + std::to_string(pool.gpus_per_node) +
                                 " GPUs per node of pool " + pool.name +
                                 ": tensor parallelism stays inside a node's fabric unless "
                                 "search.tp_across_nodes is true" +
                                 nearest_divisor(pool.gpus_per_node, tp, "plan.tp"));
    }
    if (p.pp) {
      const int stages = *p.pp * p.virtual_stages.value_or(1);
      if (stages > m.layers)
        error("plan.pp", kv("plan.pp", *p.pp) +
                             (p.virtual_stages ? " x " + kv("plan.virtual_stages", *p.virtual_stages) : "") +
                             " gives " + std::to_string(stages) + " stages for only " +
                             kv("model.layers", m.layers) + "; every stage needs at least one layer");
    }
    if (p.cp) {
      // Causal context parallelism splits each sequence into 2 x cp chunks to balance the work.
      if (s_.training.seq_len % (2 * *p.cp) != 0)
        error("plan.cp", kv("plan.cp", *p.cp) +
                             " needs training.seq_len divisible by 2 x cp = " + std::to_string(2 * *p.cp) +
                             ", got " + kv("training.seq_len", s_.training.seq_len));
    }
    if (p.expert_tp && p.tp && *p.expert_tp != 1 && *p.expert_tp != *p.tp)
      error("plan.expert_tp", kv("plan.expert_tp", *p.expert_tp) + " with " + kv("plan.tp", *p.tp) +
                                  ": the experts' tensor parallelism is tp (leave expert_tp out) or 1, "
                                  "Megatron-Core's MoE parallel folding (nearest: 1)");
    if (p.ep && *p.ep > 1) {
      if (!m.moe)
        error("plan.ep", kv("plan.ep", *p.ep) + " needs a mixture-of-experts model; model " + m.name +
                             " has no moe section (use ep: 1)");
      else if (m.moe->experts % *p.ep != 0)
        error("plan.ep", kv("plan.ep", *p.ep) + " does not divide " +
                             kv("model.moe.experts", m.moe->experts) +
                             nearest_divisor(m.moe->experts, *p.ep, "plan.ep"));
      const bool folded = p.expert_tp && p.tp && *p.expert_tp < *p.tp;
      if (p.dp && *p.dp % *p.ep != 0 && !folded)
        error("plan.ep", kv("plan.ep", *p.ep) + " must divide " + kv("plan.dp", *p.dp) +
                             ": expert-parallel groups are formed inside the data-parallel group (with "
                             "plan.expert_tp: 1, Megatron-Core's MoE parallel folding, over tp x cp x dp)");
    }
    const int gpus = s_.cluster.gpus();
    const long long model_parallel =
        static_cast<long long>(p.tp.value_or(1)) * p.pp.value_or(1) * p.cp.value_or(1);
    if (p.dp && p.tp && p.pp) {
      const long long used = static_cast<long long>(*p.dp) * model_parallel;
      if (used != gpus)
        error("plan.dp", "dp x tp x pp x cp = " + std::to_string(used) + " but the cluster has " +
                             std::to_string(gpus) + " GPUs" + resize_hint(used, gpus, model_parallel));
    } else if (gpus % model_parallel != 0) {
      error(p.pp ? "plan.pp" : "plan.tp", "tp x pp x cp = " + std::to_string(model_parallel) +
                                              " does not divide the cluster's " + std::to_string(gpus) +
                                              " GPUs");
    }
    if (p.sequence_parallel.value_or(false) && p.tp && *p.tp == 1)
      warning("plan.sequence_parallel", "sequence_parallel has no effect with plan.tp=1");
    if (p.compression && p.compression->kind == CompressionKind::TopK && p.dp && *p.dp == 1)
      warning("plan.compression", "gradient compression has no effect with plan.dp=1");
  }

  void plan_schedule() {
    const auto& p = s_.plan;
    if (p.virtual_stages && *p.virtual_stages > 1 && p.schedule && *p.schedule != Schedule::Interleaved)
      error("plan.virtual_stages", kv("plan.virtual_stages", *p.virtual_stages) +
                                       " needs schedule: interleaved (virtual stages are model chunks of the "
                                       "interleaved 1F1B schedule), got schedule: " +
                                       enum_name(*p.schedule, kScheduleNames));
    if (p.schedule == Schedule::Interleaved) {
      if (p.pp && *p.pp < 2)
        error("plan.schedule",
              "schedule: interleaved needs plan.pp of at least 2, got " + kv("plan.pp", *p.pp));
      if (p.virtual_stages && *p.virtual_stages < 2)
        error("plan.virtual_stages", "schedule: interleaved needs plan.virtual_stages of at least 2, got " +
                                         std::to_string(*p.virtual_stages));
    }
    if (p.pipeline_split) {
      if (p.stages)
        error("plan.pipeline_split",
              "plan.pipeline_split splits the layers when plan.stages does not; give one of them");
      else if (!p.tp || !p.pp || !p.micro_batch)
        error("plan.pipeline_split",
              "plan.pipeline_split needs plan.tp, plan.pp and plan.micro_batch: with any of them auto "
              "the optimizer partitions the layers itself");
      else if (const std::string problem =
                   p.pipeline_split->problem(s_.model.layers, *p.pp * p.virtual_stages.value_or(1));
               !problem.empty())
        error("plan.pipeline_split", "plan.pipeline_split: " + problem);
    }
  }

  void plan_batch() {
    const auto& p = s_.plan;
    const long long gb = s_.training.global_batch;
    if (p.dp && gb % *p.dp != 0) {
      error("training.global_batch", kv("training.global_batch", gb) + " is not divisible by " +
                                         kv("plan.dp", *p.dp) +
                                         "; every data-parallel replica needs the same number of sequences");
      return;
    }
    if (p.dp && p.micro_batch) {
      const long long per_step = static_cast<long long>(*p.dp) * *p.micro_batch;
      if (gb % per_step != 0) {
        error("plan.micro_batch", kv("training.global_batch", gb) +
                                      " is not divisible by dp x micro_batch = " + std::to_string(per_step) +
                                      nearest_divisor(gb / *p.dp, *p.micro_batch, "plan.micro_batch"));
        return;
      }
      const long long microbatches = gb / per_step;
      const std::string too_large = program_size_problem(p.pp.value_or(1), p.virtual_stages.value_or(1),
                                                         microbatches, s_.model.layers, p.zero.value_or(0));
      if (!too_large.empty()) {
        error("training.global_batch", kv("training.global_batch", gb) +
                                           " / (dp x micro_batch) = " + std::to_string(microbatches) +
                                           " micro-batches per step: " + too_large);
        return;
      }
      if (p.schedule == Schedule::Interleaved && p.pp && microbatches % *p.pp != 0)
        error("plan.schedule", "schedule: interleaved needs the number of micro-batches (" +
                                   std::to_string(microbatches) +
                                   " = global_batch / (dp x micro_batch)) to be a "
                                   "multiple of " +
                                   kv("plan.pp", *p.pp));
      if (p.pp && microbatches < *p.pp)
        warning("plan.micro_batch", std::to_string(microbatches) + " micro-batches for " +
                                        kv("plan.pp", *p.pp) +
                                        " stages: the pipeline never fills; expect a large bubble");
    }
  }

  // A sweep over the token or step budget gives each point its training length.
  bool sweep_sets_training_length() const {
    auto sets_length = [](const std::string& path) {
      return path == "training" || path == "training.tokens" || path == "training.steps";
    };
    for (const auto& axis : s_.sweep.grid)
      if (sets_length(axis.path)) return true;
    for (const auto& point : s_.sweep.list)
      for (const auto& setting : point)
        if (sets_length(setting.path)) return true;
    return false;
  }

  void policies() {
    const auto& e = s_.elasticity;
    if (e.policy == ElasticPolicy::Spares && e.spares == 0)
      error("elasticity.spares",
            "elasticity.policy: spares needs elasticity.spares, the number of hot spare GPUs");
    if (e.min_gpus && *e.min_gpus > s_.cluster.gpus())
      error("elasticity.min_gpus", kv("elasticity.min_gpus", *e.min_gpus) + " exceeds the cluster's " +
                                       std::to_string(s_.cluster.gpus()) + " GPUs");
    const bool length_known = s_.training.tokens || s_.training.steps || sweep_sets_training_length();
    if (s_.goal.deadline && !length_known)
      error("goal.deadline",
            "goal.deadline needs training.tokens or training.steps to know how long training is");
    if (s_.goal.budget && !length_known)
      error("goal.budget",
            "goal.budget needs training.tokens or training.steps to know how long training is");
    for (size_t i = 0; i < s_.failures.events.size(); ++i) {
      const auto& ev = s_.failures.events[i];
      const int count = component_count(ev.component);
      if (count > 0 && ev.index >= count)
        error("failures.events[" + std::to_string(i) + "].index",
              "failures.events[" + std::to_string(i) + "].index=" + std::to_string(ev.index) +
                  " but the cluster has " + std::to_string(count) + " " +
                  enum_name(ev.component, kComponentNames) + " components (0.." + std::to_string(count - 1) +
                  ")");
    }
  }

  int component_count(Component c) const {
    int nodes = 0, nics = 0;
    for (const auto& p : s_.cluster.pools) {
      nodes += p.nodes;
      nics += p.nodes * p.nic.count;
    }
    switch (c) {
      case Component::Gpu:
        return s_.cluster.gpus();
      case Component::Host:
        return nodes;
      case Component::Nic:
      case Component::Link:
        return nics;
      case Component::Switch:
        return 0;  // depends on the fabric's construction; checked by the simulator
    }
    return 0;
  }

  // "; the nearest plan.tp that works is 4" for a degree that must divide `n`.
  static std::string nearest_divisor(long long n, long long wanted, const std::string& field) {
    long long best = 1;
    auto consider = [&](long long d) {
      if (std::llabs(d - wanted) < std::llabs(best - wanted) ||
          (std::llabs(d - wanted) == std::llabs(best - wanted) && d < best))
        best = d;
    };
    // Divisors come in pairs around the square root; past 10^12 (a million candidates), the hint looks
    // no further than a million values either side of the wanted one.
    constexpr long long kMostCandidates = 1'000'000;
    if (n <= kMostCandidates * kMostCandidates) {
      for (long long d = 1; d * d <= n; ++d)
        if (n % d == 0) consider(d), consider(n / d);
    } else {
      for (long long d = std::max(1LL, wanted - kMostCandidates); d <= wanted + kMostCandidates; ++d)
        if (n % d == 0) consider(d);
    }
    return "; the nearest " + field + " that works is " + std::to_string(best);
  }

  // "; set cluster.nodes=2 or set plan.dp=16": the fixes that would make the degrees use the cluster.
  std::string resize_hint(long long used, long long gpus, long long model_parallel) const {
    std::vector<std::string> fixes;
    if (s_.cluster.pools.size() == 1 && used % s_.cluster.pools.front().gpus_per_node == 0)
      fixes.push_back("set cluster.nodes=" + std::to_string(used / s_.cluster.pools.front().gpus_per_node));
    if (gpus % model_parallel == 0) fixes.push_back("set plan.dp=" + std::to_string(gpus / model_parallel));
    return fixes.empty() ? "" : "; " + join(fixes, " or ");
  }

  const ScenarioSpec& s_;
  Diagnostics& diag_;
};

}  // namespace

void check_scenario(const ScenarioSpec& scenario, Diagnostics& diag) {
  Checker(scenario, diag).run();
}

}  // namespace paratwin
