// libFuzzer target: any bytes given as a plan file (`--plan PLAN.yaml`) either make a plan for the
// quickstart scenario that verify() judges, and that is lowered when it passes, or raise InputError.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "plan/ir/plan.hpp"
#include "plan/ir/program.hpp"
#include "plan/spec/catalog.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const paratwin::ScenarioSpec scenario =
      paratwin::load_scenario(paratwin::Catalog::installed().root() + "/scenarios/quickstart.yaml");
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    paratwin::Diagnostics diag;
    const paratwin::PlanRequest request =
        paratwin::parse_plan_request(paratwin::parse_yaml(text, "plan.yaml"), diag);
    diag.throw_if_errors();
    const paratwin::Plan plan = paratwin::complete_plan(request, scenario);
    if (paratwin::verify(plan, scenario.model, scenario.cluster, scenario.training).empty())
      paratwin::lower(plan, scenario.model, scenario.cluster, scenario.training, {.task_names = false});
  } catch (const paratwin::InputError&) {
  }
  return 0;
}
