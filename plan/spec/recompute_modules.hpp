// Megatron-Core's recompute_modules: which parts of a layer selective recomputation runs again.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plan/spec/diagnostics.hpp"
#include "plan/spec/doc.hpp"

namespace paratwin {

// The parts of each layer that `recompute: selective` runs again in the backward instead of keeping
// their outputs: Megatron-Core's recompute_modules (docs/scenario-language.md, plan.recompute_modules).
// core_attn is the attention core (Megatron's default, and the twin's selective mode before the
// modules); layernorm the norms that are modules of their own, which under Transformer Engine is an
// MoE layer's pre-MLP norm (the others are fused into the next linear); moe_act the experts'
// activation. layernorm and moe_act discard their outputs once the next linear has used them
// (Megatron's CheckpointWithoutOutput).
struct RecomputeModules {
  bool core_attn = true;
  bool layernorm = false;
  bool moe_act = false;

  bool operator==(const RecomputeModules&) const = default;
  std::vector<std::string> list() const;  // in kRecomputeModuleNames' order
  std::string names() const;              // the list joined: "core_attn, layernorm"
};

// The module names Megatron-Core takes in recompute_modules that the twin runs, and those it takes
// that the twin does not model (plan.recompute_modules refuses them by name).
extern const std::vector<std::string> kRecomputeModuleNames;
extern const std::vector<std::string> kUnmodelledRecomputeModules;

// Turns on the module called `name`; false when the twin runs no module of that name.
bool add_recompute_module(RecomputeModules& modules, const std::string& name);

// Reads a list of module names (`what` names the field in messages): each once, each one the twin
// runs; std::nullopt after reporting what is wrong.
std::optional<RecomputeModules> read_recompute_modules(const DocNode& node, const std::string& what,
                                                       Diagnostics& diag);

}  // namespace paratwin
