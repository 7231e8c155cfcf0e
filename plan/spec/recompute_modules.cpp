// Megatron-Core's recompute_modules as a plan says them: their names, and reading a list of them.
#include "plan/spec/recompute_modules.hpp"

#include <algorithm>
#include <set>

#include "plan/spec/reader.hpp"

namespace paratwin {

const std::vector<std::string> kRecomputeModuleNames = {"core_attn", "layernorm", "moe_act"};
// Megatron-Core's other choices (TransformerConfig.recompute_modules, Megatron-LM d98e8a64dd).
const std::vector<std::string> kUnmodelledRecomputeModules = {
    "mla_up_proj", "mlp", "moe", "shared_experts", "gdn_norm_out", "gdp_in_proj", "gdp_qkv", "mhc"};

namespace {

// The field of `m` (const or not) that a module name sets, nullptr for a name the twin does not run.
template <class M>
auto* flag_of(M& m, std::string_view name) {
  if (name == "core_attn") return &m.core_attn;
  if (name == "layernorm") return &m.layernorm;
  return name == "moe_act" ? &m.moe_act : nullptr;
}

}  // namespace

bool add_recompute_module(RecomputeModules& modules, const std::string& name) {
  bool* flag = flag_of(modules, name);
  if (flag) *flag = true;
  return flag != nullptr;
}

std::vector<std::string> RecomputeModules::list() const {
  std::vector<std::string> out;
  for (const std::string& name : kRecomputeModuleNames)
    if (*flag_of(*this, name)) out.push_back(name);
  return out;
}

std::string RecomputeModules::names() const {
  return join(list());
}

std::optional<RecomputeModules> read_recompute_modules(const DocNode& node, const std::string& what,
                                                       Diagnostics& diag) {
  if (!node.is_sequence() || node.items.empty()) {
    diag.error(node.location, "expected a list of modules for " + what + ", e.g. [layernorm, moe_act]; got " +
                                  describe(node));
    return std::nullopt;
  }
  RecomputeModules m{.core_attn = false};
  std::set<std::string> seen;
  bool ok = true;
  for (const DocNode& item : node.items) {
    if (item.is_scalar() &&
        std::ranges::find(kUnmodelledRecomputeModules, item.scalar) != kUnmodelledRecomputeModules.end()) {
      diag.error(item.location, "'" + item.scalar + "' in " + what +
                                    " is one of Megatron-Core's recompute modules that the twin does not "
                                    "model; it recomputes " +
                                    join(kRecomputeModuleNames) +
                                    " (plan.recompute full recomputes whole layers)");
      ok = false;
      continue;
    }
    const auto name = read_choice(item, what, kRecomputeModuleNames, diag);
    if (!name) {
      ok = false;
    } else if (!seen.insert(*name).second) {
      diag.error(item.location, "'" + *name + "' is listed twice in " + what);
      ok = false;
    } else {
      add_recompute_module(m, *name);
    }
  }
  return ok ? std::optional(m) : std::nullopt;
}

}  // namespace paratwin
