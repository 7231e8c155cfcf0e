// Scenarios for the tests from YAML text and `--set` overrides, read against the repository's
// catalog (models/, topologies/), as `paratwin` reads a scenario file.
#pragma once

#include <string>
#include <vector>

#include "plan/spec/scenario.hpp"

namespace paratwin_test {

inline const paratwin::Catalog& catalog() {
  static const paratwin::Catalog c(PARATWIN_SOURCE_DIR);
  return c;
}

inline paratwin::ScenarioSpec scenario(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  std::vector<paratwin::Override> overrides;
  for (const auto& s : sets) overrides.push_back(paratwin::parse_override(s));
  return paratwin::load_scenario(paratwin::parse_yaml(yaml, "test.yaml"), overrides, catalog());
}

}  // namespace paratwin_test
