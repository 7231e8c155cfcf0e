// Subcommands of `paratwin`. Each registers itself on the app and, when chosen, sets the exit status.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "plan/spec/doc.hpp"
#include "plan/spec/scenario.hpp"

namespace paratwin::cli {

// Exit statuses: 0 success, 1 failure of the machine (I/O), 2 bad input (files, flags).
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;

void add_list_command(CLI::App& app, int& exit_status);
void add_validate_command(CLI::App& app, int& exit_status);
void add_describe_command(CLI::App& app, int& exit_status);
void add_plan_command(CLI::App& app, int& exit_status);
void add_simulate_command(CLI::App& app, int& exit_status);
void add_gui_command(CLI::App& app, int& exit_status);
void add_run_command(CLI::App& app, int& exit_status, const std::vector<std::string>& argv);
void add_tokenize_command(CLI::App& app, int& exit_status);
void add_sweep_command(CLI::App& app, int& exit_status, const std::vector<std::string>& argv);
void add_calibrate_command(CLI::App& app, int& exit_status);
void add_import_command(CLI::App& app, int& exit_status);

// Scenarios of several jobs (`jobs:`, cmd_jobs.cpp), which plan and simulate hand over to these.
bool is_jobs_scenario(const std::string& path);
void plan_jobs_command(const std::string& path, const std::vector<std::string>& sets,
                       const std::string& json);
void simulate_jobs_command(const std::string& path, const std::vector<std::string>& sets, int iterations,
                           const std::string& json, const std::string& png);

// Parses each `--set KEY=VALUE`; throws InputError on a malformed one.
std::vector<Override> parse_overrides(const std::vector<std::string>& arguments);
// The scenario at `path` with the `--set` overrides; with a `point` (`--point NAME`), its sweep.list entry
// of that name, the overrides applied after the entry's settings.
ScenarioSpec load_scenario_point(const std::string& path, const std::vector<std::string>& sets,
                                 const std::string& point);
// Registers `--point NAME` on a command that evaluates one scenario.
void add_point_option(CLI::App* command, std::string& point);
// Prints warnings to standard error in the compiler-style format.
void print_diagnostics(const std::vector<Diagnostic>& diagnostics);

}  // namespace paratwin::cli
