// `paratwin plan SCENARIO`: with a fixed plan, evaluates it with the analytic evaluator; with
// `plan: auto` (or tp, pp or micro_batch left to it), searches for the best plan first. Reports
// iteration time, throughput, MFU, memory and the time breakdown; writes the plan, the Program and a
// Chrome trace on request.
#include <iostream>

#include "cli/commands.hpp"
#include "plan/analytic/evaluate.hpp"
#include "plan/chakra/chakra_writer.hpp"
#include "plan/io/atomic_file.hpp"
#include "plan/ir/program.hpp"
#include "plan/report/emit.hpp"
#include "plan/report/goodput_report.hpp"
#include "plan/report/perfetto_trace.hpp"
#include "plan/report/report.hpp"
#include "plan/report/routing_cost.hpp"
#include "plan/report/trace.hpp"
#include "plan/report/trace_file.hpp"
#include "plan/search/choose.hpp"
#include "plan/search/search_report.hpp"

namespace paratwin::cli {

namespace {

// `--emit FORMAT [DIR]`: chakra writes files and needs the directory; the others print and take none.
void check_emit(const std::vector<std::string>& emit) {
  if (emit.empty()) return;
  const std::string& format = emit.front();
  if (format != "plan" && format != "megatron" && format != "deepspeed" && format != "chakra")
    throw CLI::ValidationError(
        "--emit", "unknown format '" + format + "'; expected plan, megatron, deepspeed or chakra DIR");
  if (format == "chakra" && emit.size() != 2)
    throw CLI::ValidationError("--emit",
                               "chakra writes one trace file per rank: name their directory, "
                               "--emit chakra DIR");
  if (format != "chakra" && emit.size() != 1)
    throw CLI::ValidationError("--emit", format + " prints to standard output and takes no '" + emit.back() +
                                             "'; only chakra takes a directory");
}

}  // namespace

void add_plan_command(CLI::App& app, int& exit_status) {
  struct Options {
    std::string scenario;
    std::vector<std::string> sets;
    std::string plan_file, json, trace, output, program, point;
    std::vector<std::string> emit;  // FORMAT, and DIR for chakra
    int top = 0;
  };
  auto opts = std::make_shared<Options>();
  auto* cmd =
      app.add_subcommand("plan", "evaluate a scenario's plan: iteration time, MFU, memory, breakdown");
  cmd->add_option("scenario", opts->scenario, "scenario file")->required();
  cmd->add_option("--set", opts->sets, "override a scenario field, e.g. --set plan.tp=8")
      ->type_name("KEY=VALUE");
  add_point_option(cmd, opts->point);
  cmd->add_option("--plan", opts->plan_file, "evaluate this plan file instead of the scenario's plan")
      ->type_name("PLAN.yaml");
  cmd->add_option("--json", opts->json, "write the report as JSON (- for standard output)")
      ->type_name("FILE|-");
  cmd->add_option("--trace", opts->trace,
                  "write the schedule as a Chrome trace (Perfetto); gzip when FILE ends in .gz, Perfetto "
                  "protobuf for .pftrace")
      ->type_name("FILE");
  cmd->add_option("-o,--output", opts->output, "write the plan file")->type_name("PLAN.yaml");
  cmd->add_option("--program", opts->program, "write the Program's text form (- for standard output)")
      ->type_name("FILE|-");
  cmd->add_option("--emit", opts->emit,
                  "instead of the report: print the plan as a plan file, a Megatron-LM launch (environment, "
                  "torchrun, pretrain_gpt.py arguments) or a DeepSpeed config (exit 2 when DeepSpeed cannot "
                  "run the plan); or write one Chakra execution trace per rank into DIR (chakra DIR)")
      ->type_name("plan|megatron|deepspeed|chakra DIR")
      ->expected(1, 2);
  cmd->add_option("--top", opts->top,
                  "show the N best plans of the search (default: the scenario's search.top)")
      ->check(CLI::Range(1, 1000));
  cmd->callback([opts, &exit_status] {
    check_emit(opts->emit);
    if (is_jobs_scenario(opts->scenario)) {
      for (const auto& [given, flag] :
           std::vector<std::pair<bool, std::string>>{{!opts->plan_file.empty(), "--plan"},
                                                     {!opts->trace.empty(), "--trace"},
                                                     {!opts->output.empty(), "--output"},
                                                     {!opts->program.empty(), "--program"},
                                                     {!opts->emit.empty(), "--emit"}})
        if (given)
          throw InputError(Location{"<" + flag + ">"},
                           flag + " applies to a scenario of one job; " + opts->scenario +
                               " holds several (jobs:), whose plan takes --set and --json");
      plan_jobs_command(opts->scenario, opts->sets, opts->json);
      exit_status = kExitOk;
      return;
    }
    const ScenarioSpec scenario = load_scenario_point(opts->scenario, opts->sets, opts->point);
    print_diagnostics(scenario.warnings);
    SearchOptions options;
    options.top = opts->top ? opts->top : scenario.search.top;
    const ChosenPlan chosen = choose_plan(scenario, opts->plan_file, options);
    const Plan& plan = chosen.plan;
    const std::optional<SearchResult>& search = chosen.search;
    const std::string emit = opts->emit.empty() ? "" : opts->emit.front();
    if (emit == "plan") {
      std::cout << to_yaml(plan);
      exit_status = kExitOk;
      return;
    }
    if (emit == "chakra") {
      const Program program = lower(plan, scenario.model, scenario.cluster, scenario.training);
      const std::string& dir = opts->emit.back();
      const std::string prefix = chakra::trace_prefix(scenario.name);
      const chakra::ChakraSummary written = chakra::write_chakra_traces(dir, prefix, program, scenario);
      std::cout << "wrote " << written.ranks << " Chakra traces (" << written.nodes << " nodes) to " << dir
                << "/" << prefix << ".<rank>.et and " << written.process_groups << " process groups to "
                << dir << "/" << prefix << ".comm_groups.json\n";
      exit_status = kExitOk;
      return;
    }
    if (!emit.empty()) {
      // Megatron's notes are comments in its launch text; DeepSpeed's JSON stays clean on standard output.
      const EmittedConfig emitted =
          emit == "megatron" ? megatron_launch(plan, scenario) : deepspeed_config(plan, scenario);
      std::cout << emitted.text;
      if (emit == "deepspeed")
        for (const auto& note : emitted.notes)
          std::cerr << "note: not in the DeepSpeed config: " << note << "\n";
      exit_status = kExitOk;
      return;
    }
    const Program program = lower(plan, scenario.model, scenario.cluster, scenario.training);
    const Evaluation evaluation = evaluate(program, scenario.cluster, scenario.training);
    Report report = make_report(scenario.name, program, evaluation);
    add_routing_cost(report, scenario);
    add_expected_goodput(report, scenario, program);
    const bool quiet = opts->json == "-" || opts->program == "-";
    if (!quiet && search) std::cout << to_text(*search, scenario);
    if (!quiet) std::cout << to_text(report);
    nlohmann::json json = to_json(report);
    if (search) add_search(json, *search, scenario);
    if (!opts->json.empty()) write_file_atomically(opts->json, json.dump(2) + "\n");
    if (!opts->trace.empty()) {
      if (const std::string big =
              trace_size_problem(chrome_trace_events(program), std::int64_t(program.task_count()));
          !big.empty())
        throw InputError(Location{"<--trace " + opts->trace + ">"}, big);
      write_trace_file(opts->trace, [&](std::ostream& out) {
        if (is_perfetto_path(opts->trace))
          write_perfetto_trace(out, program, evaluation);
        else
          write_chrome_trace(out, program, evaluation);
      });
    }
    if (!opts->output.empty()) write_file_atomically(opts->output, to_yaml(plan));
    if (!opts->program.empty()) write_file_atomically(opts->program, to_text(program));
    exit_status = kExitOk;
  });
}

}  // namespace paratwin::cli
