// `paratwin simulate SCENARIO`: runs the scenario's plan (or the optimizer's best plan for it) as a
// SimGrid simulation (contention between flows, stragglers) and, with --horizon, replays failures,
// checkpoints and restarts over that time.
#include <iostream>

#include "cli/commands.hpp"
#include "plan/io/atomic_file.hpp"
#include "plan/io/failure_trace.hpp"
#include "plan/ir/program.hpp"
#include "plan/report/report.hpp"
#include "plan/report/trace_file.hpp"
#include "plan/search/choose.hpp"
#include "sim/simulate.hpp"

namespace paratwin::cli {

void add_simulate_command(CLI::App& app, int& exit_status) {
  struct Options {
    std::string scenario, plan_file, json, trace, horizon, failure_trace;
    std::vector<std::string> sets;
    int iterations = 1;
    std::uint64_t seed = 1;
    bool all_ranks = false;
  };
  auto opts = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("simulate",
                                 "simulate a scenario's plan with SimGrid: contention, stragglers, failures");
  cmd->add_option("scenario", opts->scenario, "scenario file")->required();
  cmd->add_option("--set", opts->sets, "override a scenario field, e.g. --set plan.tp=8")
      ->type_name("KEY=VALUE");
  cmd->add_option("--plan", opts->plan_file, "simulate this plan file instead of the scenario's plan")
      ->type_name("PLAN.yaml");
  cmd->add_option("--iterations", opts->iterations,
                  "iterations simulated back to back (the report gives their mean)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--horizon", opts->horizon,
                  "replay failures, checkpoints and restarts over this time, e.g. 54d")
      ->type_name("DURATION");
  cmd->add_option("--seed", opts->seed, "seed for stragglers and random failures");
  cmd->add_option("--failure-trace", opts->failure_trace,
                  "replay a live run's failures (paratwin run --failure-trace) over its horizon")
      ->type_name("FILE");
  cmd->add_flag("--all-ranks", opts->all_ranks,
                "simulate every rank, without folding symmetric TP lanes, CP lanes and DP replicas (slower, "
                "same result)");
  cmd->add_option("--json", opts->json, "write the report as JSON (- for standard output)")
      ->type_name("FILE|-");
  cmd->add_option("--trace", opts->trace,
                  "write a Chrome trace with link usage and failure markers; gzip when FILE ends in .gz")
      ->type_name("FILE");
  cmd->callback([opts, &exit_status] {
    // A live run's trace brings the overrides that made its plan; the command line's come after.
    std::optional<FailureTrace> replayed;
    std::vector<std::string> sets = opts->sets;
    if (!opts->failure_trace.empty()) {
      replayed = load_failure_trace(opts->failure_trace);
      sets.insert(sets.begin(), replayed->sets.begin(), replayed->sets.end());
    }
    ScenarioSpec scenario = load_scenario(opts->scenario, parse_overrides(sets));
    if (replayed) apply_failure_trace(*replayed, scenario);
    print_diagnostics(scenario.warnings);
    // As `paratwin plan`: a scenario that leaves degrees to the optimizer simulates its best plan.
    const Plan plan = choose_plan(scenario, opts->plan_file, {1, false}).plan;
    sim::SimulateOptions options;
    options.iterations = opts->iterations;
    options.seed = opts->seed;
    if (is_perfetto_path(opts->trace))
      throw InputError(Location{"<--trace " + opts->trace + ">"},
                       "simulate writes its trace as Chrome JSON (FILE.json, or FILE.json.gz "
                       "gzip-compressed); .pftrace is written by `paratwin plan --trace` only");
    options.trace = !opts->trace.empty();
    options.all_ranks = opts->all_ranks;
    if (!opts->horizon.empty()) {
      const QuantityParse h = parse_quantity(opts->horizon, Dimension::Duration);
      if (!h.value || *h.value <= 0)
        throw InputError(
            Location{"<--horizon " + opts->horizon + ">"},
            "expected a positive duration for --horizon" + (h.error.empty() ? "" : ": " + h.error));
      options.horizon = Seconds(*h.value);
    }
    if (replayed) {
      if (!options.horizon) options.horizon = Seconds(replayed->horizon_s);
      options.device_failure_domains = true;
      options.checkpoint_cost_s = replayed->checkpoint_cost_s;
      options.checkpoint_write_behind_s = replayed->checkpoint_write_s;
      options.regrow_at_checkpoint = true;
    }
    const sim::SimulationResult result = sim::simulate(scenario, plan, options);
    if (opts->json != "-") {
      std::cout << to_text(result.report);
      if (!result.folding.empty()) std::cout << "  folding: " << result.folding << "\n";
      if (result.reliability) std::cout << sim::to_text(*result.reliability);
    }
    if (!opts->json.empty()) write_file_atomically(opts->json, result.json.dump(2) + "\n");
    if (!opts->trace.empty()) write_trace_file(opts->trace, [&](std::ostream& out) { out << result.trace; });
    exit_status = kExitOk;
  });
}

}  // namespace paratwin::cli
