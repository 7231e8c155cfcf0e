// Semantic checks of a parsed scenario: the combinations of model, cluster, job and fixed plan fields
// that cannot work, each reported at the field that has to change, with the reason.
#pragma once

#include "plan/spec/diagnostics.hpp"
#include "plan/spec/scenario.hpp"

namespace paratwin {

// Adds every problem found to `diag` (errors) and questionable but workable settings (warnings).
void check_scenario(const ScenarioSpec& scenario, Diagnostics& diag);

}  // namespace paratwin
