// One rank of a live run: set-up, the training loop, progress, and rank 0's output files.
#include "exec/run/live_run.hpp"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "exec/backend_info.hpp"
#include "exec/checkpoint/directory_probe.hpp"
#include "exec/comm/communicator.hpp"
#include "exec/gpt/gemm.hpp"
#include "exec/run/launch_checks.hpp"
#include "exec/run/memory_report.hpp"
#include "exec/supervise/rank_agent.hpp"
#include "exec/threads.hpp"
#include "exec/train/kind_comparison.hpp"
#include "exec/train/live_limits.hpp"
#include "exec/train/measurements.hpp"
#include "exec/train/trainer.hpp"
#include "plan/io/atomic_file.hpp"
#include "plan/spec/catalog.hpp"
#include "plan/spec/doc.hpp"
#include "plan/topology/rank_threads.hpp"
#include "plan/util/child_process.hpp"

namespace paratwin::exec {

void add_live_run_options(CLI::App& cmd, LiveRunOptions& o) {
  cmd.add_option("scenario", o.scenario, "scenario file")->required();
  cmd.add_option("--plan", o.plan_file, "run this plan file instead of the scenario's plan")
      ->type_name("PLAN.yaml");
  cmd.add_option("--set", o.sets, "override a scenario field, e.g. --set training.global_batch=16")
      ->type_name("KEY=VALUE");
  cmd.add_option("--backend", o.backend, "cpu (Eigen + MPI) or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  cmd.add_option("--ranks", o.ranks, "data-parallel ranks (default: the plan's dp)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--threads", o.threads,
                 "threads per rank for the CPU kernels and GEMMs (default: the cores divided by the ranks)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--steps", o.steps, "total steps of the run (default: the scenario's)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--data", o.data, "token file (.bin) or text to train on (default: data/tiny-corpus.txt)");
  cmd.add_option("--checkpoint-dir", o.checkpoint_dir, "write checkpoints here (and resume from here)");
  cmd.add_option("--checkpoint-every", o.checkpoint_every,
                 "checkpoint every N steps (default: the plan's checkpoint_interval, and at the end)");
  cmd.add_flag("--resume", o.resume, "continue from the newest complete checkpoint in --checkpoint-dir");
  cmd.add_option("--profile", o.profile, "write the measured duration of every task")->type_name("FILE");
  cmd.add_option("--trace", o.trace, "write a Chrome trace of the run (Perfetto)")->type_name("FILE");
  cmd.add_option("--json", o.json, "write the report as JSON (- for standard output)")->type_name("FILE|-");
  cmd.add_option("--seed", o.seed, "seed of the initial weights");
  cmd.add_option("--lr", o.lr, "peak learning rate (warm-up, then cosine)");
  cmd.add_option("--stop-after", o.stop_after,
                 "stop after this step without a final checkpoint, as if killed")
      ->group("");  // for tests of resume
  cmd.add_option("--kill-after", o.kill_after, "rank 0 kills itself (SIGKILL) after this step")->group("");
  // The supervisor tells its ranks how many hosts the launch spans (--hosts, --hostfile, Slurm).
  cmd.add_option("--nodes", o.nodes, "hosts of this launch")->group("");
}

std::vector<std::string> live_rank_overrides(const std::string& path, int ranks,
                                             const std::vector<Override>& overrides, int nodes) {
  // The cluster as written (the --set overrides may not validate against it before dp changes too),
  // whatever dp the file gives: --ranks replaces it (a dp 1 scenario on a 2-core local-cpu included).
  // A --set cluster=NAME names the cluster that is resized.
  std::vector<Override> base = {parse_override("plan.dp=auto")};
  for (const Override& o : overrides)
    if (o.path.size() == 1 && o.path[0] == "cluster") base.push_back(o);
  const ScenarioSpec as_written = load_scenario(path, base);
  const ClusterSpec& c = as_written.cluster;
  // `ranks` data-parallel replicas of tp x pp x cp ranks each (the degrees as the overrides set them).
  int tp = as_written.plan.tp.value_or(1), pp = as_written.plan.pp.value_or(1),
      cp = as_written.plan.cp.value_or(1);
  for (const Override& o : overrides)
    if (o.path.size() == 2 && o.path[0] == "plan" &&
        (o.path[1] == "tp" || o.path[1] == "pp" || o.path[1] == "cp")) {
      const int value = std::atoi(o.text.substr(o.text.find('=') + 1).c_str());
      (o.path[1] == "tp" ? tp : o.path[1] == "pp" ? pp : cp) = value > 0 ? value : 1;
    }
  const int world = ranks * tp * pp * cp;
  std::vector<std::string> out;
  if (nodes > 0 && c.pools.size() == 1) {
    // One pool on several hosts: a node each, the processes shared evenly.
    if (nodes > 1 && c.pools.front().nic.bandwidth.value() <= 0)
      throw InputError(Location{path}, "cluster " + c.name +
                                           " describes one machine (no NIC between nodes); run on hosts "
                                           "with a cluster of hosts, e.g. --set cluster=cpu-hosts");
    if (world % nodes != 0)
      throw InputError(Location{path},
                       "--ranks " + std::to_string(ranks) + " x tp x pp x cp = " + std::to_string(world) +
                           " processes do not split evenly over " + std::to_string(nodes) + " hosts");
    out.push_back("cluster.pools." + c.pools.front().name + ".nodes=" + std::to_string(nodes));
    out.push_back("cluster.pools." + c.pools.front().name +
                  ".gpus_per_node=" + std::to_string(world / nodes));
  } else if (c.gpus() != world) {
    if (c.pools.size() != 1 || c.pools.front().nodes != 1)
      throw InputError(Location{path},
                       "--ranks " + std::to_string(ranks) + " x tp x pp x cp does not match the cluster's " +
                           std::to_string(c.gpus()) + " devices; size the cluster with --set");
    out.push_back("cluster.pools." + c.pools.front().name + ".gpus_per_node=" + std::to_string(world));
  }
  out.push_back("plan.dp=" + std::to_string(ranks));
  return out;
}

ScenarioSpec load_live_scenario(const std::string& path, std::vector<Override> overrides, int ranks,
                                int nodes) {
  if (ranks <= 0 && nodes > 1)
    ranks = load_scenario(path, overrides).plan.dp.value_or(0);  // its dp, on hosts
  if (ranks <= 0) return load_scenario(path, overrides);
  for (const auto& set : live_rank_overrides(path, ranks, overrides, nodes))
    overrides.push_back(parse_override(set));
  return load_scenario(path, overrides);
}

LiveRunSetup prepare_live_run(const LiveRunOptions& o) {
  if (o.backend == "cuda") {
    // Refused here, before mpirun starts any rank, with exit status 2.
    const CudaDevices gpus = query_cuda_devices();
    if (!gpus.built)
      throw InputError(Location{o.scenario}, "--backend cuda: " + gpus.detail + "; use --backend cpu");
    if (gpus.count == 0)
      throw InputError(Location{o.scenario}, "--backend cuda needs a GPU and this machine shows none (" +
                                                 gpus.detail + "); use --backend cpu");
  }
  // A plan file names no model or cluster: say how to run one instead of listing its unknown keys.
  const DocNode document = load_yaml_file(o.scenario);
  if (document.is_mapping() && !document.find("model") && (document.find("dp") || document.find("tp")))
    throw InputError(document.location,
                     o.scenario +
                         " is a plan file, which names no model or cluster; run it with its "
                         "scenario: paratwin run SCENARIO --plan " +
                         o.scenario);
  std::vector<Override> overrides;
  for (const auto& s : o.sets) overrides.push_back(parse_override(s));
  int ranks = o.ranks;
  if (!o.plan_file.empty()) {
    // The plan file's degrees and micro-batch stand in for the scenario's before it loads, so that the
    // scenario's own checks and the cluster's size follow the plan that runs (a plan the optimizer
    // chose for a larger local-cpu node runs as it is).
    const DocNode plan = load_yaml_file(o.plan_file);
    for (const std::string key :
         {"dp", "tp", "pp", "cp", "ep", "micro_batch", "schedule", "virtual_stages"}) {
      const DocNode* n = plan.is_mapping() ? plan.find(key) : nullptr;
      if (!n || !n->is_scalar()) continue;
      overrides.push_back(parse_override("plan." + key + "=" + n->scalar));
      if (key == "dp" && ranks <= 0) ranks = std::max(0, std::atoi(n->scalar.c_str()));  // its ranks
    }
  }
  LiveRunSetup setup{load_live_scenario(o.scenario, overrides, ranks, o.nodes), {}};
  setup.plan =
      o.plan_file.empty() ? complete_plan(setup.scenario) : load_plan_file(o.plan_file, setup.scenario);
  std::vector<std::string> problems =
      verify(setup.plan, setup.scenario.model, setup.scenario.cluster, setup.scenario.training);
  // Every limit of the backend, here, before mpirun starts any rank.
  const LiveBackend backend = o.backend == "cuda" ? LiveBackend::Cuda : LiveBackend::Cpu;
  for (auto& p : live_limitations(setup.plan, setup.scenario.model, backend)) problems.push_back(p);
  if (o.backend == "cuda")
    for (const PoolSpec& pool : setup.scenario.cluster.pools)
      if (pool.intra_node.kind == FabricKind::SharedMemory)
        problems.push_back("cluster " + setup.scenario.cluster.name + " is a CPU cluster (pool " + pool.name +
                           " shares memory); --backend cuda runs a GPU cluster's plan, e.g. "
                           "scenarios/live-gpu-gpt2.yaml");
  if (o.ranks > 0 && setup.plan.dp != o.ranks)
    problems.push_back("--ranks " + std::to_string(o.ranks) + " but the plan file fixes dp " +
                       std::to_string(setup.plan.dp));
  if (!problems.empty()) {
    std::vector<Diagnostic> errors;
    for (auto& p : problems)
      errors.push_back({Severity::Error, Location{o.scenario}, "the plan cannot run live: " + p});
    throw InputError(std::move(errors));
  }
  if (o.backend == "cpu") {
    // The ranks of a node share its cores (as run_live_rank counts them).
    setup.threads =
        o.threads > 0 ? o.threads : default_rank_threads(setup.plan.gpus() / std::max(1, o.nodes));
    scale_cpu_devices(setup.scenario.cluster, setup.threads);
  }
  return setup;
}

namespace {

std::string duration_text(double s) {
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%.1fs", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%dm%02ds", int(s) / 60, int(s) % 60);
  else
    std::snprintf(buf, sizeof buf, "%dh%02dm", int(s) / 3600, int(s) / 60 % 60);
  return buf;
}

// The rank's training and, on rank 0, its progress and output files.
int train_rank(const LiveRunOptions& opts, const LiveRunSetup& setup, Communicator& comm, RankAgent* agent) {
  const ScenarioSpec& scenario = setup.scenario;
  const Plan& plan = setup.plan;
  const bool lead = comm.rank() == 0;
  std::ostream& out = opts.json == "-" ? std::cerr : std::cout;
  TrainOptions o;
  o.steps = opts.steps;
  o.data = live_data_path(opts);
  o.checkpoint_dir = opts.checkpoint_dir;
  o.checkpoint_every = opts.checkpoint_every;
  o.resume = opts.resume;
  o.seed = opts.seed;
  o.learning_rate = opts.lr;
  o.stop_after = opts.stop_after;
  TrainingSession* trainer_of_hooks = nullptr;  // the hooks run inside trainer.run()
  if (agent)
    o.on_checkpoint = [&agent](int64_t step, double snapshot_s, double write_s) {
      agent->checkpoint_done(step, snapshot_s, write_s);
    };
  if (lead)
    o.on_message = [&out](const std::string& m) { out << "paratwin run: " << m << "\n" << std::flush; };
  o.on_step = [&, kill_after = opts.kill_after](const StepReport& r) {
    if (lead) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "step %5lld/%lld  loss %.4f  %8.0f tok/s  %7.1f ms/step  ETA %s\n",
                    static_cast<long long>(r.step), static_cast<long long>(r.steps), r.loss, r.tokens_per_s,
                    r.step_s * 1e3, duration_text(r.eta_s).c_str());
      out << buf << std::flush;
    }
    if (agent)
      agent->after_step(r, [&] {
        trainer_of_hooks->wait_for_checkpoints();
        comm.barrier();
      });
    // Fault injection for the resume tests: an abrupt death once the checkpoints taken are on disk.
    if (lead && r.step == kill_after) {
      trainer_of_hooks->wait_for_checkpoints();
      std::raise(SIGKILL);
    }
  };
  const auto set_up_start = std::chrono::steady_clock::now();
  const std::unique_ptr<TrainingSession> chosen = opts.backend == "cuda"
                                                      ? make_cuda_trainer(scenario, plan, comm, o)
                                                      : std::make_unique<Trainer>(scenario, plan, comm, o);
  const double set_up_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - set_up_start).count();
  TrainingSession& trainer = *chosen;
  trainer_of_hooks = &trainer;
  if (lead) {
    char buf[256];
    std::snprintf(
        buf, sizeof buf,
        "live run of %s: %s on %d %s; per rank and step %d x %d sequences of %d tokens; %lld steps\n",
        scenario.name.c_str(), scenario.model.name.c_str(), plan.dp, trainer.devices().c_str(),
        plan.num_microbatches, plan.micro_batch, scenario.training.seq_len,
        static_cast<long long>(trainer.total_steps()));
    out << buf << std::flush;
    if (opts.backend == "cpu")
      out << "paratwin run: " << rank_threads() << (rank_threads() == 1 ? " thread" : " threads")
          << " per rank; GEMMs on " << kernels::gemm_library() << "\n"
          << std::flush;
    char set_up[96];
    std::snprintf(set_up, sizeof set_up, "paratwin run: model and optimizer set up in %.2fs\n", set_up_s);
    out << set_up << std::flush;
    if (plan.tp * plan.pp * plan.cp > 1)
      out << "paratwin run: each of the " << plan.dp << " data-parallel ranks is tp " << plan.tp << " x pp "
          << plan.pp << (plan.cp > 1 ? " x cp " + std::to_string(plan.cp) : std::string()) << " processes ("
          << comm.size() << " in all)\n"
          << std::flush;
    if (opts.backend == "cpu" && scenario.training.precision != Precision::Fp32)
      out << "paratwin run: the scenario trains in "
          << enum_name(scenario.training.precision, kPrecisionNames)
          << "; the CPU backend computes in fp32 (the twin's prediction keeps " +
                 enum_name(scenario.training.precision, kPrecisionNames) + ")\n";
    if (scenario.training.attention != AttentionKind::Unfused)
      out << "paratwin run: the scenario's attention is "
          << enum_name(scenario.training.attention, kAttentionNames)
          << "; the live engines compute it unfused (the twin's prediction keeps the fused kernel)\n";
  }
  const RunResult result = trainer.run();
  // The profile is of pipeline rank 0's role (world rank 0's): its ranks have the same tasks.
  RunTimings timings;
  if (Communicator* group = trainer.timing_group()) timings = gather_timings(*group, trainer.role(), result);
  const nlohmann::json measured = measured_memory_json(comm, scenario, trainer.program(), result);
  if (lead) {
    if (!opts.profile.empty()) {
      nlohmann::json profile = profile_json(scenario, trainer.program(), timings);
      profile["backend"] = opts.backend;
      write_file_atomically(opts.profile, profile.dump(1) + "\n");
    }
    if (!opts.trace.empty()) write_file_atomically(opts.trace, live_chrome_trace(trainer.program(), timings));
    auto report = live_report_json(scenario, trainer.program(), result, timings);
    report.update(measured);
    report["by_kind"] = by_kind_json(scenario, trainer.program(), timings);
    if (!opts.json.empty()) write_file_atomically(opts.json, report.dump(2) + "\n");
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "done: loss %.4f -> %.4f; %.0f tokens/s measured, %.0f predicted by the twin; %.1fs\n",
                  result.losses.empty() ? 0.0 : result.losses.front(),
                  result.losses.empty() ? 0.0 : result.losses.back(),
                  report["metrics"]["tokens_per_s"].get<double>(),
                  report["predicted"]["tokens_per_s"].get<double>(), result.seconds);
    out << measured_memory_text(report) << by_kind_text(report["by_kind"]) << buf << std::flush;
  }
  if (agent) agent->done();
  return 0;
}

}  // namespace

int run_live_rank(const LiveRunOptions& opts) {
  const LiveRunSetup setup = prepare_live_run(opts);
  MpiSession session;
  auto comm = mpi_world();
  if (opts.backend == "cpu") set_rank_threads(setup.threads);
  // Under `paratwin run`'s supervision: heartbeats, finished checkpoints and injected faults.
  const std::unique_ptr<RankAgent> agent = RankAgent::from_environment(comm->rank());
  try {
    // Checkpoints must reach every host's ranks alike, before any is written.
    if (!opts.checkpoint_dir.empty()) probe_shared_directory(opts.checkpoint_dir, *comm);
    return train_rank(opts, setup, *comm, agent.get());
  } catch (const InputError& e) {
    // Bad input the checks before launch could not see: the supervisor must not restart the job.
    if (agent) agent->refused(e.diagnostics().empty() ? e.what() : e.diagnostics().front().str());
    throw;
  } catch (const std::exception& e) {
    // Said here, while the supervisor's channel is still open: its closing reads as the rank's end, and
    // the supervisor then stops the job, which could cut the message off. The training's objects are
    // gone already; the process leaves without MPI_Finalize (as MpiSession does when unwinding) and
    // mpirun ends the other ranks.
    std::cerr << "paratwin run: error: " << e.what() << std::endl;
    std::_Exit(1);
  }
}

std::string rank_executable() {
  return sibling_executable("paratwin-rank");
}

}  // namespace paratwin::exec
