// Scenarios for tests: YAML text loaded against the repository's catalog, with --set overrides.
#pragma once

#include <string>
#include <vector>

#include "plan/ir/plan.hpp"
#include "plan/spec/catalog.hpp"
#include "plan/spec/doc.hpp"
#include "plan/spec/scenario.hpp"
#include "source_tree.hpp"

namespace paratwin_test {

inline const paratwin::Catalog& catalog() {
  static const paratwin::Catalog c(source_dir());
  return c;
}

// Throws paratwin::InputError on bad input, as load_scenario does.
inline paratwin::ScenarioSpec scenario(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  std::vector<paratwin::Override> overrides;
  for (const auto& s : sets) overrides.push_back(paratwin::parse_override(s));
  return paratwin::load_scenario(paratwin::parse_yaml(yaml, "test.yaml"), overrides, catalog());
}

// The first problem with the scenario's plan, whether its checks (InputError) or the plan's verification
// find it; "none" when the plan can run.
inline std::string plan_problem(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  try {
    const paratwin::ScenarioSpec s = scenario(yaml, sets);
    const auto problems = paratwin::verify(paratwin::complete_plan(s), s.model, s.cluster, s.training);
    return problems.empty() ? std::string("none") : problems.front();
  } catch (const paratwin::InputError& e) {
    return e.what();
  }
}

}  // namespace paratwin_test
