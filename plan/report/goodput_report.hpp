// What the scenario's failures cost a report's plan, in closed form (plan/reliability): goodput,
// checkpoint interval and cost, lost work and downtime. plan, simulate and the GUI say it alike.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "plan/ir/program.hpp"
#include "plan/reliability/expected_goodput.hpp"
#include "plan/spec/scenario.hpp"

namespace paratwin {

struct Report;

// Fills report.goodput from the plan's Program when the scenario has failure rates (else nothing).
void add_expected_goodput(Report& report, const ScenarioSpec& scenario, const Program& program);

nlohmann::json to_json(const ExpectedGoodput& goodput);
// A few lines of the report's table: goodput and where the rest of the time goes.
std::string to_text(const ExpectedGoodput& goodput);

}  // namespace paratwin
