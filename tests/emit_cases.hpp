// The plans the emit and import tests render: golden plans and more (uneven layouts, interleaving,
// offload, cp with ep), each a catalog scenario with --set overrides.
#pragma once

#include <string>
#include <vector>

#include "catalog_scenario.hpp"
#include "plan/ir/plan.hpp"

namespace paratwin_test {

using paratwin::Override;
using paratwin::ScenarioSpec;

struct Case {
  std::string name, scenario;
  std::vector<std::string> sets;
};

inline const std::vector<std::string> kLlama = {"model=llama3-8b", "training.global_batch=256",
                                                "training.seq_len=4096", "plan.micro_batch=1"};
inline const std::vector<std::string> kMixtral = {"model=mixtral-8x7b",        "cluster.nodes=8",
                                                  "training.global_batch=256", "training.seq_len=4096",
                                                  "plan.micro_batch=1",        "plan.tp=2"};

// The plan the search chose for hetero-h100-a100, fixed: the A100 stages get fewer layers.
inline const std::string kHeteroPlan =
    "plan={tp: 2, pp: 4, cp: 4, dp: 4, micro_batch: 1, sequence_parallel: true, zero: 1, stages: ["
    "{layers: [0, 11], pool: a100}, {layers: [11, 22], pool: a100}, {layers: [22, 51], pool: h100}, "
    "{layers: [51, 80], pool: h100}]}";

inline std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

// The plans the golden files hold, and with them the arithmetic test's.
inline const std::vector<Case> kGolden = {
    {"quickstart", "quickstart", {}},
    {"gpt3-175b-interleaved", "gpt3-175b-1024-a100", {}},
    {"hetero-uneven-cp4", "hetero-h100-a100", {kHeteroPlan}},
    {"llama-zero3-offload", "quickstart",
     with(kLlama, {"plan.zero=3", "plan.offload.optimizer=true", "plan.tp=2", "plan.pp=1", "plan.dp=16"})},
    {"llama-gpipe-fp16-tp-cp-pp-dp", "quickstart",
     with(kLlama, {"plan.tp=2", "plan.pp=4", "plan.dp=4", "plan.schedule=gpipe", "training.precision=fp16",
                   "plan.order=tp-cp-pp-dp", "plan.recompute=full"})},
    {"mixtral-ep4-zero2-pp2", "quickstart",
     with(kMixtral, {"plan.ep=4", "plan.zero=2", "plan.pp=2", "plan.dp=16"})},
};

// More plans for the arithmetic: uneven layouts, interleaving, offload, cp with ep.
inline const std::vector<Case> kMore = {
    {"gpt3-126-layers-pp16",
     "gpt3-175b-1024-a100",
     {"model.layers=126", "plan.pp=16", "plan.dp=8", "plan.schedule=1f1b", "plan.virtual_stages=1"}},
    {"gpt3-v5", "gpt3-175b-1024-a100", {"plan.virtual_stages=5"}},
    {"llama-interleaved-v3", "quickstart",
     with(kLlama,
          {"plan.tp=2", "plan.pp=4", "plan.dp=4", "plan.schedule=interleaved", "plan.virtual_stages=3"})},
    {"llama-pp3", "quickstart", with(kLlama, {"cluster.nodes=3", "plan.tp=2", "plan.pp=3", "plan.dp=4"})},
    {"llama-offload-activations", "quickstart",
     with(kLlama,
          {"plan.offload.activations=true", "plan.recompute=none", "plan.tp=2", "plan.pp=1", "plan.dp=16"})},
    {"llama-cp2-zero0", "quickstart",
     with(kLlama, {"plan.tp=2", "plan.cp=2", "plan.pp=1", "plan.dp=8", "plan.zero=0"})},
    {"mixtral-ep8-cp2-zero3", "quickstart",
     with(kMixtral, {"plan.ep=8", "plan.cp=2", "plan.pp=1", "plan.dp=16", "plan.zero=3"})},
    {"live-cpu-tiny-moe", "live-cpu-tiny-moe", {}},
};

inline ScenarioSpec load(const Case& c) {
  std::vector<Override> overrides;
  for (const auto& s : c.sets) overrides.push_back(paratwin::parse_override(s));
  return paratwin::load_scenario(paratwin_test::source_dir() + "/scenarios/" + c.scenario + ".yaml",
                                 overrides, catalog());
}

}  // namespace paratwin_test
