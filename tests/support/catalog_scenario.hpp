// Scenarios for tests: YAML text loaded against the repository's catalog, with --set overrides.
#pragma once

#include <string>
#include <vector>

#include "plan/spec/catalog.hpp"
#include "plan/spec/doc.hpp"
#include "plan/spec/scenario.hpp"

namespace paratwin_test {

inline const paratwin::Catalog& catalog() {
  static const paratwin::Catalog c(PARATWIN_SOURCE_DIR);
  return c;
}

// Throws paratwin::InputError on bad input, as load_scenario does.
inline paratwin::ScenarioSpec scenario(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  std::vector<paratwin::Override> overrides;
  for (const auto& s : sets) overrides.push_back(paratwin::parse_override(s));
  return paratwin::load_scenario(paratwin::parse_yaml(yaml, "test.yaml"), overrides, catalog());
}

}  // namespace paratwin_test
