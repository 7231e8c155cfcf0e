// `paratwin describe SCENARIO`: the scenario's model, cluster and job in one screen.
#include <iostream>

#include "cli/commands.hpp"
#include "plan/io/atomic_file.hpp"
#include "plan/spec/scenario.hpp"
#include "plan/spec/summary.hpp"

namespace paratwin::cli {

void add_describe_command(CLI::App& app, int& exit_status) {
  struct Options {
    std::string scenario;
    std::vector<std::string> sets;
    std::string json, point;
  };
  auto opts = std::make_shared<Options>();
  auto* cmd =
      app.add_subcommand("describe", "summarize a scenario: model size and FLOPs, cluster size and peak");
  cmd->add_option("scenario", opts->scenario, "scenario file")->required();
  cmd->add_option("--set", opts->sets, "override a scenario field, e.g. --set cluster.nodes=64")
      ->type_name("KEY=VALUE");
  add_point_option(cmd, opts->point);
  cmd->add_option("--json", opts->json, "also write the summary as JSON to FILE (- for standard output)")
      ->type_name("FILE|-");
  cmd->callback([opts, &exit_status] {
    const ScenarioSpec scenario = load_scenario_point(opts->scenario, opts->sets, opts->point);
    print_diagnostics(scenario.warnings);
    const ScenarioSummary summary = summarize(scenario);
    if (opts->json != "-") std::cout << to_text(summary);
    if (!opts->json.empty()) write_file_atomically(opts->json, to_json(summary).dump(2) + "\n");
    exit_status = kExitOk;
  });
}

}  // namespace paratwin::cli
