// The optimizer's answer for people and scripts: the top candidates, why the best wins, and what was
// rejected and why.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "plan/search/optimizer.hpp"

namespace paratwin {

std::string to_text(const SearchResult& result, const ScenarioSpec& scenario);
// Adds `candidates[]` and `rejected{reason: count}` (and the search statistics) to a report.
void add_search(nlohmann::json& report, const SearchResult& result, const ScenarioSpec& scenario);

}  // namespace paratwin
