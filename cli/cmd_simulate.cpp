// `paratwin simulate SCENARIO`: runs the scenario's plan (or the optimizer's best plan for it) as a
// SimGrid simulation (contention between flows, stragglers) and, with --horizon, replays failures,
// checkpoints and restarts over that time.
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/sweep/plotter.hpp"
#include "plan/chakra/chakra_writer.hpp"
#include "plan/chakra/replay_workload.hpp"
#include "plan/io/atomic_file.hpp"
#include "plan/io/failure_trace.hpp"
#include "plan/ir/program.hpp"
#include "plan/report/report.hpp"
#include "plan/report/trace_file.hpp"
#include "plan/search/choose.hpp"
#include "sim/chakra_replay.hpp"
#include "sim/simulate.hpp"

namespace paratwin::cli {
namespace {

// From this many iterations on, a run on a terminal reports its progress.
constexpr int kProgressIterations = 50;

}  // namespace

namespace {

// `--chakra DIR`: the traces replayed on the scenario's cluster instead of the scenario's plan.
void replay_traces(const std::string& dir, const ScenarioSpec& scenario, const std::string& json_path) {
  const chakra::ReplayWorkload workload = chakra::load_replay_workload(dir);
  const sim::ReplayResult r = sim::replay_chakra(workload, scenario.cluster);
  const nlohmann::json json = {{"evaluator", "chakra-replay"},
                               {"traces", dir},
                               {"cluster", scenario.cluster.name},
                               {"ranks", r.rank_end_s.size()},
                               {"nodes", r.nodes},
                               {"activities", r.activities},
                               {"iteration_time_s", r.end_s},
                               {"rank_end_s", r.rank_end_s}};
  if (json_path != "-")
    std::cout << "replayed " << r.nodes << " Chakra nodes of " << r.rank_end_s.size() << " ranks on "
              << scenario.cluster.name << ": iteration time " << r.end_s << " s\n";
  if (!json_path.empty()) write_file_atomically(json_path, json.dump(2) + "\n");
}

}  // namespace

void add_simulate_command(CLI::App& app, int& exit_status) {
  struct Options {
    std::string scenario, plan_file, json, trace, horizon, failure_trace, chakra, png, point;
    std::vector<std::string> emit;  // chakra DIR
    std::vector<std::string> sets;
    int iterations = 1;
    double slower_than_pct = 5;
    std::uint64_t seed = 1;
    bool all_ranks = false;
  };
  auto opts = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("simulate",
                                 "simulate a scenario's plan with SimGrid: contention, stragglers, failures");
  cmd->add_option("scenario", opts->scenario, "scenario file")->required();
  cmd->add_option("--set", opts->sets, "override a scenario field, e.g. --set plan.tp=8")
      ->type_name("KEY=VALUE");
  add_point_option(cmd, opts->point);
  cmd->add_option("--plan", opts->plan_file, "simulate this plan file instead of the scenario's plan")
      ->type_name("PLAN.yaml");
  cmd->add_option("--iterations", opts->iterations,
                  "iterations simulated back to back (the report gives their mean; with several, or with "
                  "the scenario's variability, their P50, P95 and P99)")
      ->check(CLI::Range(1, 10000));
  cmd->add_option("--slower-than", opts->slower_than_pct,
                  "report the probability that a step is more than this many percent slower than the "
                  "noise-free one (default 5)")
      ->type_name("PCT")
      ->check(CLI::Range(0.0, 1000.0));
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
  cmd->add_option("--png", opts->png,
                  "draw the iteration times' histogram and distribution function (with --iterations N or "
                  "the scenario's variability)")
      ->type_name("FILE");
  auto* trace =
      cmd->add_option("--trace", opts->trace,
                      "write a Chrome trace with link usage and failure markers; gzip when FILE ends "
                      "in .gz")
          ->type_name("FILE");
  auto* emit = cmd->add_option("--emit", opts->emit,
                               "also write the plan as Chakra execution traces into DIR, with the "
                               "simulation's times (chakra DIR; see plan --emit)")
                   ->type_name("chakra DIR")
                   ->expected(2);
  cmd->add_option(
         "--chakra", opts->chakra,
         "replay Chakra execution traces (DIR/<prefix>.<rank>.et, as plan --emit chakra writes them) "
         "on the scenario's cluster instead of its plan: rank r on GPU r")
      ->type_name("DIR")
      ->excludes(trace)
      ->excludes("--plan")
      ->excludes("--horizon")
      ->excludes("--failure-trace")
      ->excludes("--all-ranks")
      ->excludes("--iterations")
      ->excludes(emit);
  cmd->callback([opts, &exit_status] {
    if (is_jobs_scenario(opts->scenario)) {
      // Several jobs: each alone and all together; what belongs to one job's run is refused by name.
      const std::vector<std::pair<bool, std::string>> one_job_only = {
          {!opts->plan_file.empty(), "--plan"},
          {!opts->horizon.empty(), "--horizon"},
          {!opts->trace.empty(), "--trace"},
          {!opts->emit.empty(), "--emit"},
          {!opts->failure_trace.empty(), "--failure-trace"},
          {!opts->chakra.empty(), "--chakra"},
          {opts->all_ranks, "--all-ranks"}};
      for (const auto& [given, flag] : one_job_only)
        if (given)
          throw InputError(Location{"<" + flag + ">"},
                           flag + " applies to a scenario of one job; " + opts->scenario +
                               " holds several (jobs:), whose simulation takes --set, --iterations, --json "
                               "and --png");
      simulate_jobs_command(opts->scenario, opts->sets, opts->iterations, opts->json, opts->png);
      exit_status = kExitOk;
      return;
    }
    // A live run's trace brings the overrides that made its plan; the command line's come after.
    std::optional<FailureTrace> replayed;
    std::vector<std::string> sets = opts->sets;
    if (!opts->failure_trace.empty()) {
      replayed = load_failure_trace(opts->failure_trace);
      sets.insert(sets.begin(), replayed->sets.begin(), replayed->sets.end());
    }
    ScenarioSpec scenario = load_scenario_point(opts->scenario, sets, opts->point);
    if (replayed) apply_failure_trace(*replayed, scenario);
    print_diagnostics(scenario.warnings);
    if (!opts->chakra.empty()) {
      replay_traces(opts->chakra, scenario, opts->json);
      exit_status = kExitOk;
      return;
    }
    // As `paratwin plan`: a scenario that leaves degrees to the optimizer simulates its best plan.
    const Plan plan = choose_plan(scenario, opts->plan_file, {1, false}).plan;
    sim::SimulateOptions options;
    options.iterations = opts->iterations;
    options.seed = opts->seed;
    options.slower_than_pct = opts->slower_than_pct;
    options.progress = opts->iterations >= kProgressIterations && ::isatty(STDERR_FILENO);
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
    if (!opts->emit.empty() && opts->emit.front() != "chakra")
      throw CLI::ValidationError("--emit",
                                 "simulate emits chakra DIR only; got '" + opts->emit.front() + "'");
    if (!opts->png.empty() && !png_available())
      throw InputError(Location{"<--png " + opts->png + ">"},
                       "--png needs paratwin-plot, which is built when Qt 6 Gui is found; install "
                       "qt6-base-dev and rebuild");
    if (!opts->png.empty() && opts->iterations < 2 && !scenario.variability.any())
      throw InputError(Location{"<--png " + opts->png + ">"},
                       "--png draws the spread of iteration times: simulate more than one (--iterations "
                       "100) or give the scenario a variability section");
    const sim::SimulationResult result = sim::simulate(scenario, plan, options);
    if (!opts->emit.empty()) {
      const Program program = lower(plan, scenario.model, scenario.cluster, scenario.training);
      const std::string& dir = opts->emit.back();
      const auto written = chakra::write_chakra_traces(dir, chakra::trace_prefix(scenario.name), program,
                                                       scenario, result.role_timings);
      if (opts->json != "-")
        std::cout << "wrote " << written.ranks << " Chakra traces with the simulation's times to " << dir
                  << "\n";
    }
    if (opts->json != "-") {
      std::cout << to_text(result.report);
      if (result.spread) std::cout << to_text(*result.spread);
      if (result.unfolded_for_variability)
        std::cout << "  (every rank simulated: the scenario's variability makes them differ)\n";
      if (!result.folding.empty()) std::cout << "  folding: " << result.folding << "\n";
      if (result.reliability) std::cout << sim::to_text(*result.reliability);
    }
    if (!opts->json.empty()) write_file_atomically(opts->json, result.json.dump(2) + "\n");
    if (!opts->trace.empty()) write_trace_file(opts->trace, [&](std::ostream& out) { out << result.trace; });
    if (!opts->png.empty()) write_report_png("spread", result.json.dump(), opts->png);
    exit_status = kExitOk;
  });
}

}  // namespace paratwin::cli
