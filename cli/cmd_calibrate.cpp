// `paratwin calibrate [PROFILE...] --cluster NAME|FILE -o FILE`: fits the cluster's efficiency figures
// to what live runs measured (profiles of `paratwin run --profile`) and to microbenchmarks of the real
// machines (--nccl-tests: nccl-tests output; --gemm-sweep: GEMM rates by shape; --attention-sweep: a
// fused attention kernel's rates by key length), and writes the
// calibrated cluster file, which `plan`, `simulate` and `run` then take as their cluster (`--set
// cluster=FILE`); with --routing also the model with the expert routing the run measured (`--set
// model=FILE`).
#include <chrono>
#include <ctime>
#include <iostream>

#include "cli/commands.hpp"
#include "plan/calibrate/attention_sweep.hpp"
#include "plan/calibrate/fit.hpp"
#include "plan/calibrate/gemm_sweep.hpp"
#include "plan/calibrate/measured_routing.hpp"
#include "plan/calibrate/nccl_tests.hpp"
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
    std::vector<std::string> profiles, nccl_tests, gemm_sweeps, attention_sweeps;
    std::string cluster, output, routing, variability, pool;
  };
  auto opts = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "calibrate", "fit a cluster's efficiency figures to profiles of live runs and to microbenchmarks");
  cmd->add_option("profiles", opts->profiles, "profiles written by paratwin run --profile")
      ->type_name("PROFILE...");
  cmd->add_option("--nccl-tests", opts->nccl_tests,
                  "nccl-tests output (all_reduce_perf, all_gather_perf, reduce_scatter_perf, "
                  "alltoall_perf): one host's run sets the node's curve of that collective, runs across "
                  "hosts the NIC's figures")
      ->type_name("FILE...");
  cmd->add_option("--gemm-sweep", opts->gemm_sweeps,
                  "GEMM rates by shape, CSV m,n,k,dtype,tflops: fits the device's GEMM shares and tile cost")
      ->type_name("FILE...");
  cmd->add_option("--attention-sweep", opts->attention_sweeps,
                  "a fused attention kernel's rates by key length: flash-attention's benchmark output or CSV "
                  "kernel,causal,head_dim,seq_len,dtype,fwd_tflops,bwd_tflops; replaces the device's "
                  "efficiency.flash2, flash3 or triton")
      ->type_name("FILE...");
  cmd->add_option("--pool", opts->pool,
                  "the pool the microbenchmarks ran on (the cluster's only pool by default)")
      ->type_name("NAME");
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
    const Location usage{"paratwin calibrate"};
    if (opts->profiles.empty() && opts->nccl_tests.empty() && opts->gemm_sweeps.empty() &&
        opts->attention_sweeps.empty())
      throw InputError(usage,
                       "nothing to calibrate from: expected profiles (paratwin run --profile), --nccl-tests, "
                       "--gemm-sweep or --attention-sweep files");
    if (opts->profiles.empty() && !(opts->routing.empty() && opts->variability.empty()))
      throw InputError(usage, std::string(opts->routing.empty() ? "--variability" : "--routing") +
                                  " needs profiles: microbenchmarks measure no routing or kernel spread");
    const ClusterSpec cluster = load_cluster_argument(opts->cluster);
    // Every input read (and refused, if it must be) before anything is fitted or written.
    std::vector<ProfiledRun> runs;
    for (const std::string& path : opts->profiles)
      runs.push_back(lower_profile(load_profile(path), opts->cluster));
    std::vector<NcclTestsRun> nccl;
    for (const std::string& path : opts->nccl_tests) nccl.push_back(load_nccl_tests(path));
    std::vector<GemmSweep> sweeps;
    for (const std::string& path : opts->gemm_sweeps) sweeps.push_back(load_gemm_sweep(path));
    std::vector<AttentionSweep> attention;
    for (const std::string& path : opts->attention_sweeps) attention.push_back(load_attention_sweep(path));
    Calibration cal = runs.empty() ? start_calibration(cluster, opts->pool) : calibrate(runs, cluster);
    if (!opts->pool.empty() && opts->pool != cal.pool)
      throw InputError(usage, "the profiles ran on pool " + cal.pool + ", --pool names " + opts->pool +
                                  ": calibrate one pool at a time");
    apply_gemm_sweeps(sweeps, cal);
    apply_attention_sweeps(attention, cal);
    apply_nccl_tests(nccl, cal);
    // Both checked before either file is written: a profile without routing leaves no half result.
    const std::string routing = opts->routing.empty() ? "" : measured_model_yaml(runs.front(), utc_now());
    write_file_atomically(opts->output, calibrated_cluster_yaml(cal, runs, opts->cluster, utc_now()));
    if (!routing.empty()) write_file_atomically(opts->routing, routing);
    if (!opts->variability.empty())
      write_file_atomically(opts->variability, variability_yaml(cal.variability, runs, utc_now()));

    std::cout << "calibrated " << cal.cluster.name << " (device " << cal.device << ", pool " << cal.pool
              << ") from " << runs.size() << " profile(s), " << nccl.size() << " nccl-tests run(s), "
              << sweeps.size() << " GEMM sweep(s) and " << attention.size() << " attention sweep(s):\n";
    for (const FittedFigure& f : cal.figures) std::cout << "  " << to_text(f) << "\n";
    for (const std::string& n : cal.notes) std::cout << "  note: " << n << "\n";
    if (!runs.empty()) std::cout << "  kernel-time variability      " << to_text(cal.variability) << "\n";
    std::cout << "wrote " << opts->output << "; use it with --set cluster=" << opts->output << "\n";
    if (!opts->variability.empty())
      std::cout << "wrote " << opts->variability << " (the spread of kernel times); use it with "
                << "--set variability=" << opts->variability << "\n";
    if (!routing.empty())
      std::cout << "wrote " << opts->routing << " (the model with its measured expert routing); use it with "
                << "--set model=" << opts->routing << "\n";
    else if (!runs.empty() && !runs.front().profile.routed.empty())
      std::cout << "  note: the profile measured expert routing; --routing FILE writes it into the model\n";
    exit_status = kExitOk;
  });
}

}  // namespace paratwin::cli
