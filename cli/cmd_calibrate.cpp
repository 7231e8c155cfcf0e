// `paratwin calibrate PROFILE... --cluster NAME|FILE -o FILE`: fits the cluster's efficiency figures to
// what live runs measured and writes the calibrated cluster file, which `plan`, `simulate` and `run`
// then take as their cluster (`--set cluster=FILE`); with --routing also the model with the expert
// routing the run measured (`--set model=FILE`).
#include <chrono>
#include <ctime>
#include <iostream>

#include "cli/commands.hpp"
#include "plan/calibrate/fit.hpp"
#include "plan/calibrate/measured_routing.hpp"
#include "plan/io/atomic_file.hpp"

namespace paratwin::cli {

namespace {

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &utc);
  return buf;
}

}  // namespace

void add_calibrate_command(CLI::App& app, int& exit_status) {
  struct Options {
    std::vector<std::string> profiles;
    std::string cluster, output, routing, variability;
  };
  auto opts = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("calibrate", "fit a cluster's efficiency figures to profiles of live runs");
  cmd->add_option("profiles", opts->profiles, "profiles written by paratwin run --profile")
      ->required()
      ->type_name("PROFILE...");
  cmd->add_option("--cluster", opts->cluster, "the cluster the runs ran on: a catalog name or a file")
      ->required()
      ->type_name("NAME|FILE");
  cmd->add_option("-o,--output", opts->output, "calibrated cluster file to write")
      ->required()
      ->type_name("FILE");
  cmd->add_option(
         "--routing", opts->routing,
         "also write the model with the expert routing the (first) profile measured, for --set model=FILE")
      ->type_name("FILE");
  cmd->add_option("--variability", opts->variability,
                  "also write the spread of kernel times the profiles measured, for --set variability=FILE")
      ->type_name("FILE");
  cmd->callback([opts, &exit_status] {
    const ClusterSpec cluster = load_cluster_argument(opts->cluster);
    std::vector<ProfiledRun> runs;
    for (const std::string& path : opts->profiles)
      runs.push_back(lower_profile(load_profile(path), opts->cluster));
    const Calibration cal = calibrate(runs, cluster);
    // Both checked before either file is written: a profile without routing leaves no half result.
    const std::string routing = opts->routing.empty() ? "" : measured_model_yaml(runs.front(), utc_now());
    write_file_atomically(opts->output, calibrated_cluster_yaml(cal, runs, opts->cluster, utc_now()));
    if (!routing.empty()) write_file_atomically(opts->routing, routing);
    if (!opts->variability.empty())
      write_file_atomically(opts->variability, variability_yaml(cal.variability, runs, utc_now()));

    std::cout << "calibrated " << cal.cluster.name << " (device " << cal.device << ", pool " << cal.pool
              << ") from " << runs.size() << " profile(s):\n";
    for (const FittedFigure& f : cal.figures) std::cout << "  " << to_text(f) << "\n";
    for (const std::string& n : cal.notes) std::cout << "  note: " << n << "\n";
    std::cout << "  kernel-time variability      " << to_text(cal.variability) << "\n";
    std::cout << "wrote " << opts->output << "; use it with --set cluster=" << opts->output << "\n";
    if (!opts->variability.empty())
      std::cout << "wrote " << opts->variability << " (the spread of kernel times); use it with "
                << "--set variability=" << opts->variability << "\n";
    if (!routing.empty())
      std::cout << "wrote " << opts->routing << " (the model with its measured expert routing); use it with "
                << "--set model=" << opts->routing << "\n";
    else if (!runs.front().profile.routed.empty())
      std::cout << "  note: the profile measured expert routing; --routing FILE writes it into the model\n";
    exit_status = kExitOk;
  });
}

}  // namespace paratwin::cli
