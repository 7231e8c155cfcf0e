// The simulate command's engine: detailed iterations in child processes, the horizon replay, and the
// Report, JSON and trace assembled from them.
#include "sim/simulate.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>

#include "plan/analytic/evaluate.hpp"
#include "plan/report/goodput_report.hpp"
#include "plan/report/routing_cost.hpp"
#include "plan/report/trace.hpp"
#include "plan/spec/limits.hpp"
#include "plan/util/child_process.hpp"
#include "plan/util/seeded_random.hpp"
#include "sim/interpreter.hpp"

namespace paratwin::sim {
namespace {

// The noise-free reference runs this many iterations (at most) and takes its last: a steady step.
constexpr int kNoiseFreeIterations = 2;

nlohmann::json to_json(const Interpretation& in) {
  nlohmann::json links = nlohmann::json::array();
  for (const auto& l : in.links)
    links.push_back({{"link", l.link}, {"capacity", l.capacity_Bps}, {"usage", l.usage_Bps}});
  nlohmann::json timings = nlohmann::json::array();
  for (const auto& role : in.role_timings) {
    std::vector<std::pair<double, double>> t;
    for (const auto& tm : role) t.push_back({tm.start_s, tm.end_s});
    timings.push_back(t);
  }
  return {{"ends", in.iteration_end_s},
          {"timings", timings},
          {"ranks", in.role_rank},
          {"activities", in.activities},
          {"links", links}};
}

Interpretation from_json(const nlohmann::json& j) {
  Interpretation in;
  in.iteration_end_s = j.at("ends").get<std::vector<double>>();
  in.role_rank = j.at("ranks").get<std::vector<int>>();
  in.activities = j.at("activities").get<long long>();
  for (const auto& role : j.at("timings")) {
    std::vector<TaskTiming> t;
    for (const auto& p : role) t.push_back({p[0].get<double>(), p[1].get<double>()});
    in.role_timings.push_back(std::move(t));
  }
  for (const auto& l : j.at("links"))
    in.links.push_back({l.at("link").get<std::string>(), l.at("capacity").get<double>(),
                        l.at("usage").get<std::vector<std::pair<double, double>>>()});
  return in;
}

// Runs `interpret` in a child process (one SimGrid engine per process) and returns what it found.
Interpretation interpret_in_child(const Program& program, const ClusterSpec& cluster,
                                  const TrainingSpec& training, const RankLayout& layout,
                                  const InterpretOptions& options) {
  const auto [in, status] = run_forked([&]() -> std::pair<std::string, int> {
    try {
      return {to_json(interpret(program, cluster, training, layout, options)).dump(), 0};
    } catch (const std::exception& e) {
      return {nlohmann::json{{"error", e.what()}}.dump(), 1};
    }
  });
  nlohmann::json j = nlohmann::json::parse(in.empty() ? "{}" : in, nullptr, false);
  if (j.is_object() && j.contains("error"))
    throw std::runtime_error("simulation failed: " + j["error"].get<std::string>());
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !j.is_object() || !j.contains("ends"))
    throw std::runtime_error("the simulation process ended abnormally (status " + std::to_string(status) +
                             ")");
  return from_json(j);
}

// Hosts (nodes) that straggle: chosen by the seed, all their GPUs slowed.
std::vector<double> straggler_slowdowns(const FailureSpec& failures, const RankLayout& layout,
                                        std::uint64_t seed, std::vector<int>& nodes_out) {
  std::vector<double> slowdown;
  SeededRandom random(seed ^ 0x5eed5eed5eedULL);
  std::vector<double> node_slowdown(layout.nodes(), 1.0);
  for (const StragglerSpec& s : failures.stragglers) {
    for (int k = 0, placed = 0; placed < std::min(s.count, layout.nodes()) && k < 100 * layout.nodes(); ++k) {
      const int node = static_cast<int>(random.below(static_cast<std::uint64_t>(layout.nodes())));
      if (node_slowdown[node] != 1.0) continue;
      node_slowdown[node] = s.slowdown;
      nodes_out.push_back(node);
      ++placed;
    }
  }
  if (nodes_out.empty()) return slowdown;
  slowdown.resize(layout.gpus());
  for (int g = 0; g < layout.gpus(); ++g) slowdown[g] = node_slowdown[layout.site(g).node];
  return slowdown;
}

// Multiplies the stragglers' slowdowns by each GPU's drawn persistent slowness (variability.ranks).
void apply_gpu_slowness(const VariabilitySpec& variability, int gpus, std::uint64_t seed,
                        InterpretOptions& io) {
  const std::vector<double> drawn = draw_gpu_slowness(variability.ranks, gpus, seed);
  if (drawn.empty()) return;
  if (io.gpu_slowdown.empty()) io.gpu_slowdown.assign(drawn.size(), 1.0);
  for (size_t g = 0; g < drawn.size(); ++g) io.gpu_slowdown[g] *= drawn[g];
  io.slowdown_drawn = true;
  io.at_slowest_gpu = false;  // the draws replace the device's expected slowest GPU
}

// The spread of the simulated iterations against the noise-free step: without variability, the
// iterations themselves are noise-free; with it, the same plan, stragglers and seed simulated apart
// without variability (folded as usual), its last iteration a steady step.
IterationSpread spread_of(const ScenarioSpec& scenario, const Plan& plan, const Program& program,
                          const std::vector<double>& iteration_times,
                          const std::vector<double>& straggler_slowdown, const SimulateOptions& options) {
  double noise_free_s = iteration_times.empty() ? 0 : iteration_times.back();
  if (scenario.variability.any()) {
    RankLayout plain(plan, scenario.cluster);
    if (!options.all_ranks) plain.fold(scenario.cluster, straggler_slowdown);
    InterpretOptions o;
    o.iterations = std::min(std::max(1, options.iterations), kNoiseFreeIterations);
    o.gpu_slowdown = straggler_slowdown;
    o.at_slowest_gpu = !scenario.variability.ranks_vary();  // as the drawn iterations ran
    const Interpretation i = interpret_in_child(program, scenario.cluster, scenario.training, plain, o);
    const std::vector<double>& ends = i.iteration_end_s;
    noise_free_s = ends.size() > 1 ? ends.back() - ends.end()[-2] : ends.back();
  }
  return summarize_spread(iteration_times, noise_free_s, options.slower_than_pct);
}

nlohmann::json reliability_json(const Reliability& r) {
  return {{"horizon_s", r.horizon_s},
          {"goodput", r.goodput},
          {"effective_training_time_ratio", r.effective_training_time_ratio},
          {"failures", r.failures},
          {"restarts", r.restarts},
          {"lost_work_s", r.lost_work_s},
          {"checkpoint_interval_s", r.checkpoint_interval_s},
          {"optimal_checkpoint_interval_s", r.optimal_checkpoint_interval_s},
          {"young_daly_interval_s", r.young_daly_interval_s},
          {"job_mtbf_s", r.job_mtbf_s},
          {"checkpoint_cost_s", r.checkpoint_cost_s},
          {"checkpoint_overhead_s", r.checkpoint_overhead_s},
          {"downtime_s", r.downtime_s},
          {"productive_s", r.productive_s},
          {"useful_tokens", r.useful_tokens},
          {"min_gpus", r.min_gpus},
          {"time_to_train_s", r.time_to_train_s}};
}

// Per watched link, its capacity and the mean and peak of the sampled usage over the simulated
// iterations (the GUI colours the topology by it). Names drop SimGrid's `_UP` half suffix.
nlohmann::json link_utilization_json(const std::vector<LinkSeries>& links, double total_s) {
  nlohmann::json out = nlohmann::json::array();
  for (const LinkSeries& l : links) {
    double sum = 0, peak = 0;
    int samples = 0;
    for (const auto& [t, usage] : l.usage_Bps)
      if (t < total_s) {
        sum += usage;
        peak = std::max(peak, usage);
        ++samples;
      }
    const double mean = samples ? sum / samples : 0;
    std::string name = l.link;
    if (name.size() > 3 && name.compare(name.size() - 3, 3, "_UP") == 0) name.resize(name.size() - 3);
    out.push_back({{"link", name},
                   {"capacity_GBps", l.capacity_Bps / 1e9},
                   {"mean_GBps", mean / 1e9},
                   {"peak_GBps", peak / 1e9},
                   {"utilization", l.capacity_Bps > 0 ? mean / l.capacity_Bps : 0.0}});
  }
  return out;
}

// The analytic trace, plus link-usage counters and failure markers, written event by event.
std::string make_trace(const Program& program, const Evaluation& ev, const Interpretation& in,
                       const std::optional<Reliability>& reliability) {
  std::ostringstream out;
  write_chrome_trace(out, program, ev, [&](const TraceEventSink& write) {
    const int links_pid = 1000, reliability_pid = 1001;
    write({{"name", "process_name"},
           {"ph", "M"},
           {"pid", links_pid},
           {"args", {{"name", "links (GB/s in use)"}}}});
    for (const auto& l : in.links)
      for (const auto& [t, usage] : l.usage_Bps)
        write({{"name", l.link},
               {"ph", "C"},
               {"pid", links_pid},
               {"ts", t * 1e6},
               {"args", {{"GBps", usage / 1e9}}}});
    if (!reliability) return;
    write({{"name", "process_name"},
           {"ph", "M"},
           {"pid", reliability_pid},
           {"args", {{"name", "reliability (horizon time)"}}}});
    for (const auto& e : reliability->events)
      write({{"name", e.what},
             {"ph", "i"},
             {"s", "g"},
             {"pid", reliability_pid},
             {"tid", 0},
             {"ts", e.at_s * 1e6},
             {"cat", e.what.substr(0, e.what.find(' '))},
             {"args", {{"useful_tokens", e.useful_tokens}}}});
  });
  return out.str();
}

// The simulation's work, estimated before it is done: each rank SimGrid runs executes its role's
// tasks, and a communication task is one or two flows (about 1.4 to 1.7 activities a task, measured).
void check_simulation_size(const ScenarioSpec& scenario, const Program& program, const RankLayout& layout,
                           int iterations, bool trace) {
  const std::int64_t simulated_ranks = layout.simulated_ranks();
  const std::int64_t tasks_per_rank = std::int64_t(program.task_count()) / std::max(1, program.plan.pp);
  const std::int64_t activities = 2 * tasks_per_rank * simulated_ranks * iterations;
  if (activities > limit_value(kSimActivitiesLimit))
    throw InputError(
        Location{scenario.file.empty() ? "<scenario>" : scenario.file},
        "the simulation would run about " + std::to_string(activities) + " activities (" +
            std::to_string(tasks_per_rank) + " tasks on each of " + std::to_string(simulated_ranks) +
            " simulated ranks x " + std::to_string(iterations) +
            " iterations); fewer --iterations, fewer micro-batches per step (raise plan.micro_batch) "
            "or a smaller cluster bring it under" +
            limit_note(kSimActivitiesLimit));
  if (trace)
    if (const std::string big =
            trace_size_problem(chrome_trace_events(program), std::int64_t(program.task_count()));
        !big.empty())
      throw InputError(Location{"<--trace>"}, big);
}

// The job as the failure model sees it (simulate(): a horizon is replayed over it).
JobShape horizon_job_shape(const ScenarioSpec& scenario, const Plan& plan, const Program& program,
                           const RankLayout& layout, const SimulateOptions& options) {
  JobShape job = job_shape(scenario, plan, program);
  if (options.checkpoint_cost_s) job.checkpoint_cost_s = *options.checkpoint_cost_s;
  job.checkpoint_write_behind_s = options.checkpoint_write_behind_s;
  job.regrow_at_checkpoint = options.regrow_at_checkpoint;
  if (options.device_failure_domains) {
    job.nodes = layout.gpus();
    job.gpus_per_node = job.nics_per_node = job.switches = 1;
  }
  // The horizon's failures and blocks of training, counted before any is sampled (or anything simulated).
  const HorizonWork work = expected_horizon_work(scenario, job, options.horizon->value());
  const auto refuse_past = [&](double count, const InputLimit& limit, const std::string& what,
                               const std::string& fix) {
    if (count <= double(limit_value(limit))) return;
    throw InputError(Location{"<--horizon>"},
                     "a horizon of " + to_string(*options.horizon) + " would " + what + " about " +
                         std::to_string(static_cast<long long>(std::min(count, 9e18))) + "; " + fix +
                         " bring it under" + limit_note(limit));
  };
  refuse_past(work.failures, kHorizonFailuresLimit,
              "sample failures:", "a shorter --horizon or lower failure rates (a longer failures.*.mtbf)");
  refuse_past(work.blocks, kHorizonBlocksLimit, "replay blocks of training between checkpoints:",
              "a shorter --horizon or a longer checkpoint.interval");
  return job;
}

}  // namespace

SimulationResult simulate(const ScenarioSpec& scenario, const Plan& plan, const SimulateOptions& options) {
  SimulationResult result;
  const Program program = lower(plan, scenario.model, scenario.cluster, scenario.training);
  RankLayout layout(plan, scenario.cluster);
  // Variability gives every rank its own draws: nothing is symmetric, so nothing folds.
  const VariabilitySpec& variability = scenario.variability;
  result.unfolded_for_variability = !options.all_ranks && variability.any() && plan.gpus() > 1;
  InterpretOptions io;
  io.iterations = std::max(1, options.iterations);
  io.gpu_slowdown = straggler_slowdowns(scenario.failures, layout, options.seed, result.straggler_nodes);
  const std::vector<double> noise_free_slowdown = io.gpu_slowdown;
  apply_gpu_slowness(variability, layout.gpus(), options.seed, io);
  io.kernel_noise = KernelNoise(variability, options.seed);
  io.progress = options.progress;
  if (!options.all_ranks && !variability.any()) layout.fold(scenario.cluster, io.gpu_slowdown);
  check_simulation_size(scenario, program, layout, io.iterations, options.trace);
  std::optional<JobShape> horizon_job;
  if (options.horizon) horizon_job = horizon_job_shape(scenario, plan, program, layout, options);
  if (options.trace) {
    const double estimate = evaluate(program, scenario.cluster, scenario.training).iteration_time_s;
    io.sample_period_s = estimate * io.iterations / 400;
  }
  const Interpretation in = interpret_in_child(program, scenario.cluster, scenario.training, layout, io);
  result.activities = in.activities;
  result.role_timings = in.role_timings;
  const double total_s = in.iteration_end_s.empty() ? 0 : in.iteration_end_s.back();
  const double iteration_s = total_s / io.iterations;
  Evaluation ev = summarize_timings(program, scenario.cluster, scenario.training, in.role_timings);
  // The simulated iteration ends with the last rank, which may be one whose role was not observed.
  ev.iteration_time_s = std::max(ev.iteration_time_s, iteration_s);
  if (io.at_slowest_gpu)
    ev.compute_pace = compute_pace(program, scenario.cluster, program.roles[size_t(ev.critical_role)]);
  result.report = make_report(scenario.name, program, ev);
  result.report.evaluator = "simulation";
  // The report's iteration is the mean over the simulated iterations.
  Metrics& m = result.report.metrics;
  m.iteration_time_s = iteration_s;
  m.tokens_per_s = program.tokens_per_iteration / iteration_s;
  m.model_tflops_per_gpu = program.model_flops_per_iteration.value() / iteration_s / program.world / 1e12;
  m.mfu = program.model_flops_per_iteration.value() / (iteration_s * ev.peak.value());
  m.hfu = ev.hardware_flops.value() / (iteration_s * ev.peak.value());
  add_routing_cost(result.report, scenario);
  add_expected_goodput(result.report, scenario, program);  // the closed form, beside the replayed horizon

  nlohmann::json configurations = nlohmann::json::array();  // shrunk configurations met on the horizon
  if (options.horizon) {
    const PoolSpec& pool = scenario.cluster.pools.front();
    const JobShape job = *horizon_job;

    // Tokens/s per configuration: the full one from above; a shrunk one simulated in detail when the
    // cluster is one pool, the replicas fill whole nodes and the simulation is small (at most
    // kDetailedShrinkActivities activities, a second or two: a horizon then costs little beside the
    // iteration), else scaled from the full one by its replicas (each replica's work per iteration
    // is unchanged).
    constexpr long long kDetailedShrinkActivities = 250'000;
    const bool detailed = in.activities <= kDetailedShrinkActivities;
    std::map<int, double> rates{{plan.dp, program.tokens_per_iteration / iteration_s}};
    const Throughput throughput = [&](int dp) {
      if (auto it = rates.find(dp); it != rates.end()) return it->second;
      double rate = rates.at(plan.dp) * dp / plan.dp;
      bool simulated = false;
      const long long gpus = static_cast<long long>(dp) * job.replica_gpus;
      if (detailed && dp > 0 && scenario.cluster.homogeneous() && gpus % pool.gpus_per_node == 0) {
        Plan shrunk = plan;
        shrunk.dp = dp;
        ClusterSpec cluster = scenario.cluster;
        cluster.pools.front().nodes = static_cast<int>(gpus / pool.gpus_per_node);
        TrainingSpec training = scenario.training;
        training.global_batch = static_cast<std::int64_t>(dp) * plan.micro_batch * plan.num_microbatches;
        if (verify(shrunk, scenario.model, cluster, training).empty()) {
          const Program p = lower(shrunk, scenario.model, cluster, training);
          RankLayout l(shrunk, cluster);
          if (!options.all_ranks) l.fold(cluster);
          InterpretOptions o;
          o.gpu_slowdown.clear();
          const Interpretation i = interpret_in_child(p, cluster, training, l, o);
          rate = p.tokens_per_iteration / i.iteration_end_s.back();
          simulated = true;
        }
      }
      rates[dp] = rate;
      configurations.push_back(
          {{"dp", dp}, {"gpus", gpus}, {"tokens_per_s", rate}, {"simulated", simulated}});
      return rate;
    };
    result.reliability = replay(scenario, job, options.horizon->value(), options.seed, throughput);
  }

  std::vector<double> iteration_times;
  for (double previous = 0; double end : in.iteration_end_s) {
    iteration_times.push_back(end - previous);
    previous = end;
  }
  if (variability.any() || io.iterations > 1)
    result.spread = spread_of(scenario, plan, program, iteration_times, noise_free_slowdown, options);

  if (layout.simulated_ranks() < layout.world()) {
    const RankLayout::Folding& f = layout.folding();
    result.folding = std::to_string(layout.simulated_ranks()) + " of " + std::to_string(layout.world()) +
                     " ranks simulated (each stands for " + std::to_string(f.tp) + " TP lanes x " +
                     std::to_string(f.cp) + " CP lanes x " + std::to_string(f.dp) +
                     " DP replicas; replicas with a straggler simulated whole; --all-ranks: every rank)";
  }
  result.json = to_json(result.report);
  nlohmann::json sim = {{"iterations", io.iterations},
                        {"iteration_times_s", nlohmann::json::array()},
                        {"activities", in.activities},
                        {"seed", options.seed},
                        {"folded_tp_lanes", layout.folding().tp},
                        {"unfolded_for_variability", result.unfolded_for_variability},
                        {"folded_cp_lanes", layout.folding().cp},
                        {"folded_dp_replicas", layout.folding().dp},
                        {"simulated_ranks", layout.simulated_ranks()},
                        {"straggler_nodes", result.straggler_nodes}};
  sim["iteration_times_s"] = iteration_times;
  if (result.spread) sim["spread"] = to_json(*result.spread);
  if (io.slowdown_drawn)  // the GPU that sets the pace of a synchronous step
    sim["slowest_gpu_factor"] = *std::max_element(io.gpu_slowdown.begin(), io.gpu_slowdown.end());
  if (options.horizon) sim["shrunk_configurations"] = configurations;
  if (!in.links.empty()) sim["links"] = link_utilization_json(in.links, total_s);
  result.json["simulation"] = sim;
  if (result.reliability) result.json["reliability"] = reliability_json(*result.reliability);
  if (options.trace) result.trace = make_trace(program, ev, in, result.reliability);
  return result;
}

std::string to_text(const Reliability& r) {
  auto seconds = [](double s) { return to_string(Seconds(s)); };
  char buf[256];
  std::string out = "  reliability over " + seconds(r.horizon_s) + ":\n";
  auto row = [&](const char* label, const std::string& value) {
    std::snprintf(buf, sizeof buf, "    %-26s %s\n", label, value.c_str());
    out += buf;
  };
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * r.goodput);
  row("goodput", buf);
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * r.effective_training_time_ratio);
  row("effective training time", buf);
  row("failures / restarts", std::to_string(r.failures) + " / " + std::to_string(r.restarts));
  row("lost work", seconds(r.lost_work_s));
  row("downtime", seconds(r.downtime_s));
  row("checkpoint cost", seconds(r.checkpoint_cost_s));
  row("checkpoint interval", seconds(r.checkpoint_interval_s) + " (best " +
                                 seconds(r.optimal_checkpoint_interval_s) + ", Young/Daly " +
                                 seconds(r.young_daly_interval_s) + ")");
  row("fewest GPUs", std::to_string(r.min_gpus));
  if (r.time_to_train_s > 0) row("time to train", seconds(r.time_to_train_s));
  return out;
}

}  // namespace paratwin::sim
