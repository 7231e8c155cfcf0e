// The inverse of megatron_launch: a Megatron-LM pretrain_gpt.py argument list (and, when given, the
// torchrun words before it) read back into the model, the training job and the plan it runs, and written
// as a scenario that `paratwin plan` evaluates.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plan/ir/plan.hpp"

namespace paratwin {

// What a Megatron-LM launch says, in the twin's terms. `warnings` names every argument the import did not
// use (unknown to it, or without a counterpart in the twin) and every reading that is approximate.
struct ImportedLaunch {
  ModelSpec model;
  TrainingSpec training;
  Plan plan;                   // stages, when a --pipeline-model-parallel-layout gives them, have no pool yet
  bool uneven_stages = false;  // the stages come from a layout, not from the even split
  int world = 0;               // GPUs: dp x tp x pp x cp
  std::string source = "a Megatron-LM launch";  // what was read, for the scenario's description
  std::vector<std::string> warnings;
};

// Reads pretrain_gpt.py's arguments. `words` may start with a launcher ("torchrun --nnodes 2
// --nproc-per-node 8 pretrain_gpt.py ..."), whose world size then sets dp; otherwise `gpus` must. Throws
// InputError naming the argument for a bad value, a missing one, or one that changes the plan in a way a
// scenario cannot say (a block recompute of some layers, a position embedding the twin has no model of).
ImportedLaunch import_megatron(const std::vector<std::string>& words, std::optional<int> gpus = std::nullopt);

// The words a shell would pass of a launch script as `plan --emit megatron` writes it: comment and
// `export` lines dropped, continuation backslashes joined, double quotes removed.
std::vector<std::string> launch_script_words(const std::string& text);

// The scenario: the model inline, `cluster: {from: CLUSTER, nodes: N}` (whole nodes of `gpus_per_node`, or
// when the world does not fill them one node of `pool` as large as the world), the training job and the
// plan, every field the launch fixes written out.
std::string imported_scenario_yaml(const ImportedLaunch& launch, const std::string& cluster,
                                   const std::string& pool, int gpus_per_node);

}  // namespace paratwin
