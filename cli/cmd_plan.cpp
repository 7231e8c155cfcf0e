// `paratwin plan SCENARIO`: evaluates the scenario's plan with the analytic evaluator and reports
// iteration time, throughput, MFU, memory and the time breakdown; writes the plan, the Program and
// a Chrome trace on request.
#include <iostream>

#include "cli/commands.hpp"
#include "plan/analytic/evaluate.hpp"
#include "plan/io/atomic_file.hpp"
#include "plan/ir/program.hpp"
#include "plan/report/report.hpp"
#include "plan/report/trace.hpp"

namespace paratwin::cli {

void add_plan_command(CLI::App& app, int& exit_status) {
  struct Options {
    std::string scenario;
    std::vector<std::string> sets;
    std::string plan_file, json, trace, output, program;
    std::string emit;
  };
  auto opts = std::make_shared<Options>();
  auto* cmd =
      app.add_subcommand("plan", "evaluate a scenario's plan: iteration time, MFU, memory, breakdown");
  cmd->add_option("scenario", opts->scenario, "scenario file")->required();
  cmd->add_option("--set", opts->sets, "override a scenario field, e.g. --set plan.tp=8")
      ->type_name("KEY=VALUE");
  cmd->add_option("--plan", opts->plan_file, "evaluate this plan file instead of the scenario's plan")
      ->type_name("PLAN.yaml");
  cmd->add_option("--json", opts->json, "write the report as JSON (- for standard output)")
      ->type_name("FILE|-");
  cmd->add_option("--trace", opts->trace, "write the schedule as a Chrome trace (Perfetto)")
      ->type_name("FILE");
  cmd->add_option("-o,--output", opts->output, "write the plan file")->type_name("PLAN.yaml");
  cmd->add_option("--program", opts->program, "write the Program's text form (- for standard output)")
      ->type_name("FILE|-");
  cmd->add_option("--emit", opts->emit, "print the plan in another form instead of the report")
      ->check(CLI::IsMember({"plan"}));
  cmd->callback([opts, &exit_status] {
    const ScenarioSpec scenario = load_scenario(opts->scenario, parse_overrides(opts->sets));
    print_diagnostics(scenario.warnings);
    const Plan plan =
        opts->plan_file.empty() ? complete_plan(scenario) : load_plan_file(opts->plan_file, scenario);
    if (auto problems = verify(plan, scenario.model, scenario.cluster, scenario.training);
        !problems.empty()) {
      std::vector<Diagnostic> errors;
      const Location where =
          opts->plan_file.empty()
              ? scenario.locations.count("plan") ? scenario.locations.at("plan") : scenario.document.location
              : Location{opts->plan_file};
      for (auto& p : problems) errors.push_back({Severity::Error, where, "the plan cannot run: " + p});
      throw InputError(std::move(errors));
    }
    if (opts->emit == "plan") {
      std::cout << to_yaml(plan);
      exit_status = kExitOk;
      return;
    }
    const Program program = lower(plan, scenario.model, scenario.cluster, scenario.training);
    const Evaluation evaluation = evaluate(program, scenario.cluster, scenario.training);
    const Report report = make_report(scenario.name, program, evaluation);
    if (opts->json != "-" && opts->program != "-") std::cout << to_text(report);
    if (!opts->json.empty()) write_file_atomically(opts->json, to_json(report).dump(2) + "\n");
    if (!opts->trace.empty()) write_file_atomically(opts->trace, chrome_trace(program, evaluation));
    if (!opts->output.empty()) write_file_atomically(opts->output, to_yaml(plan));
    if (!opts->program.empty()) write_file_atomically(opts->program, to_text(program));
    exit_status = kExitOk;
  });
}

}  // namespace paratwin::cli
