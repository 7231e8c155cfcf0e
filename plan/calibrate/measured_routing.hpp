// The expert routing a live run measured, folded into the scenario: `paratwin calibrate --routing FILE`
// writes the run's model with `moe.routing: {kind: measured, tokens: ...}`, which plan, simulate and
// sweep take with `--set model=FILE`.
#pragma once

#include <string>

#include "plan/calibrate/profile.hpp"

namespace paratwin {

// The tokens per expert the profile recorded, as model.moe.routing: one row per MoE layer when it
// has every MoE layer of `model` (a profile covers pipeline rank 0's layers), else one row, their sum,
// for every layer. Throws InputError when the profile has no routing or another number of experts.
MoeRouting measured_routing(const Profile& profile, const ModelSpec& model);

// The model file: the run's model with its measured routing, headed by where it came from.
std::string measured_model_yaml(const ProfiledRun& run, const std::string& timestamp);

}  // namespace paratwin
