// The plan a command works on: a plan file, the scenario's fixed plan, or the optimizer's best when
// the scenario leaves tp, pp or micro_batch to it — verified either way.
#pragma once

#include <optional>
#include <string>

#include "plan/search/optimizer.hpp"

namespace paratwin {

struct ChosenPlan {
  Plan plan;
  std::optional<SearchResult> search;  // when the optimizer chose
};

// Throws InputError listing every reason the plan cannot run (at the plan file, or at the
// scenario's `plan:`), or saying what runs out when the optimizer finds nothing that fits.
ChosenPlan choose_plan(const ScenarioSpec& scenario, const std::string& plan_file,
                       const SearchOptions& options);

}  // namespace paratwin
