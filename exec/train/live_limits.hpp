// What each live backend cannot run, beyond what verify() refuses for every plan: checked by
// `paratwin run` before any rank starts (exec/run/live_run.cpp) and again by the training session.
#pragma once

#include <string>
#include <vector>

#include "plan/ir/plan.hpp"

namespace paratwin::exec {

enum class LiveBackend { Cpu, Cuda };

// What the live CPU backend cannot run in this plan and model, in words; empty when it can.
std::vector<std::string> live_cpu_limitations(const Plan& plan, const ModelSpec& model);

// The same for `backend` (the CUDA backend runs a part of what the CPU backend runs).
std::vector<std::string> live_limitations(const Plan& plan, const ModelSpec& model, LiveBackend backend);

}  // namespace paratwin::exec
