// What the Megatron-LM and DeepSpeed renderings of a plan share: one recompute mode for the whole model,
// layers per chunk, the gradient bucket in elements.
#include "plan/report/emit.hpp"

#include <algorithm>
#include <set>

#include "plan/cost/memory.hpp"
#include "plan/spec/suggest.hpp"

namespace paratwin::emit_detail {

Recompute uniform_recompute(const Plan& p, std::vector<std::string>& notes) {
  if (p.stages.empty()) return Recompute::None;
  auto strength = [](Recompute r) {
    return r == Recompute::Full ? 3 : r == Recompute::Op ? 2 : r == Recompute::Selective ? 1 : 0;
  };
  Recompute strongest = p.stages.front().recompute;
  bool mixed = false;
  for (const auto& st : p.stages) {
    mixed |= st.recompute != p.stages.front().recompute;
    if (strength(st.recompute) > strength(strongest)) strongest = st.recompute;
  }
  if (mixed) {
    std::vector<std::string> modes;
    for (const auto& st : p.stages) modes.push_back(enum_name(st.recompute, kRecomputeNames));
    notes.push_back("recompute per stage (" + join(modes, ", ") +
                    "): one setting applies to every stage here, so the strongest (" +
                    enum_name(strongest, kRecomputeNames) + ") is emitted");
  }
  int every = 1;
  for (const auto& st : p.stages)
    if (st.recompute != Recompute::None) every = std::max(every, st.recompute_every);
  if (every > 1)
    notes.push_back("recompute_every " + std::to_string(every) +
                    ": the frameworks' settings here recompute every layer of a stage (Megatron-LM's "
                    "block method picks a stage's first layers instead), so every layer's is emitted");
  if (strongest == Recompute::Op) {
    notes.push_back(
        "recompute op (torchtitan's per-operator policy) has no Megatron-LM or DeepSpeed setting: full "
        "recomputation is emitted, which keeps less and recomputes more");
    return Recompute::Full;
  }
  return strongest;
}

int block_recompute_layers(const Plan& p, std::vector<std::string>& notes) {
  std::set<int> counts;
  for (const auto& st : p.stages)
    if (st.recompute != Recompute::None) counts.insert(st.recompute_layers);
  if (counts.size() == 1) return *counts.begin();
  if (counts.size() > 1 && *counts.rbegin() > 0)
    notes.push_back(
        "recompute_layers differs between stages: the frameworks' settings here take one count, so "
        "every layer's recompute is emitted");
  return 0;
}

std::vector<int> chunk_layers(const Plan& p) {
  std::vector<int> out;
  for (const auto& st : p.stages) out.push_back(st.layer_end - st.layer_begin);
  return out;
}

long long bucket_elements(const Plan& p, const ScenarioSpec& s) {
  // The same count plan/ir/buckets.cpp cuts the gradients into.
  return std::max(1LL, static_cast<long long>(p.bucket_size.value() / cost::gradient_bytes(s.training)));
}

}  // namespace paratwin::emit_detail
