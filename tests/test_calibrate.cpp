// Calibration: profiles read back and checked against the Program they measured, the fit recovering
// the figures that produced synthetic measurements, and the cluster and model files it writes.
#define BOOST_TEST_MODULE calibrate
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "plan/analytic/evaluate.hpp"
#include "plan/calibrate/fit.hpp"
#include "plan/spec/catalog.hpp"
#include "plan/topology/rank_threads.hpp"
#include "source_tree.hpp"

using namespace paratwin;
namespace fs = std::filesystem;
namespace tt = boost::test_tools;

namespace {

const std::string kScenario = paratwin_test::source_dir() + "/scenarios/live-cpu-tiny.yaml";
const std::string kLocalCpu = paratwin_test::source_dir() + "/topologies/local-cpu.yaml";

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("paratwin-calibrate-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

// The figures a synthetic machine runs at; launch cost and collective latency as local-cpu says
// unless given.
ClusterSpec truth(std::optional<Seconds> launch = {}, std::optional<Seconds> latency = {}) {
  ClusterSpec c = load_cluster_file(kLocalCpu);
  DeviceSpec& d = c.devices.at("cpu-core");
  d.efficiency.gemm = 0.5;
  d.efficiency.attention = 0.2;
  d.efficiency.memory = 0.3;
  d.efficiency.optimizer = 0.1;
  if (launch) d.efficiency.kernel_launch = *launch;
  c.pools[0].intra_node.allreduce_busbw = BytesPerSecond(4e9);
  if (latency) c.pools[0].intra_node.latency = *latency;
  return c;
}

// A profile as `paratwin run --profile` writes it of scenario `s` (`ranks` on `nodes` hosts, `threads`
// each), with every time the one the cost model gives on `sized` (the machine as the run had it): GEMM
// times at their rates, the attention scores' kernels at theirs where the machine has one of its own, CPU
// time the whole compute task, collectives their transfer.
std::string write_profile(const fs::path& dir, const std::string& name, const ScenarioSpec& s,
                          const ClusterSpec& sized, int ranks, int nodes = 1, int threads = 1) {
  const Plan plan = complete_plan(s);
  const Program program = lower(plan, s.model, s.cluster, s.training);
  const DeviceSpec& d = sized.devices.at("cpu-core");
  const double peak = d.peak.at(Precision::Fp32).value();
  nlohmann::json tasks = nlohmann::json::array();
  const Role& role = program.roles.front();
  for (size_t i = 0; i < role.tasks.size(); ++i) {
    const Task& t = role.tasks[i];
    const double time = task_duration_s(t, sized.pools[0], sized, Precision::Fp32);
    nlohmann::json j = {{"task", t.name}, {"index", i}, {"count", 10}, {"median_s", time}};
    if (t.stream == StreamKind::Compute) {
      j["cpu_s"] = time;
      j["gemm_s"] = (t.work.gemm_flops - t.work.attention_flops).value() / (peak * d.efficiency.gemm);
      j["attention_s"] =
          t.work.attention_flops.value() / (peak * d.efficiency.attention.value_or(d.efficiency.gemm));
      j["gemm_flops"] = t.work.gemm_flops.value();
      if (d.efficiency.scores)
        j["scores_s"] = t.work.scores_bytes.value() / (d.memory_bandwidth.value() * *d.efficiency.scores);
    } else {
      j["bytes"] = t.bytes.value() * t.count;
      j["transfer_s"] = time;
    }
    tasks.push_back(j);
  }
  const nlohmann::json profile = {{"format", kProfileFormat},
                                  {"version", kProfileVersion},
                                  {"scenario", s.name},
                                  {"backend", "cpu"},
                                  {"model", s.model.name},
                                  {"cluster", s.cluster.name},
                                  {"pool", sized.pools[0].name},
                                  {"device", "cpu-core"},
                                  {"ranks", ranks},
                                  {"nodes", nodes},
                                  {"threads", threads},
                                  {"steps", 11},
                                  {"warmup_steps_excluded", 1},
                                  {"inputs", profile_inputs_yaml(s, plan)},
                                  {"tasks", tasks}};
  const fs::path path = dir / (name + ".json");
  std::ofstream(path) << profile.dump(1);
  return path.string();
}

// A profile of the tiny scenario with `sets` on one machine of local-cpu's shape running at the
// figures of `machine`; `threads` per rank: each rank a device of that many of the machine's cores.
std::string synthetic_profile(const fs::path& dir, const std::string& name,
                              const std::vector<std::string>& sets, const ClusterSpec& machine,
                              int threads = 1) {
  std::vector<Override> overrides;
  for (const auto& s : sets) overrides.push_back(parse_override(s));
  const ScenarioSpec s = load_scenario(kScenario, overrides);
  ClusterSpec sized = machine;
  sized.pools[0].gpus_per_node = s.cluster.pools[0].gpus_per_node;
  scale_cpu_devices(sized, threads);
  return write_profile(dir, name, s, sized, complete_plan(s).dp, 1, threads);
}

std::string message_of(const InputError& e) {
  std::string all;
  for (const auto& d : e.diagnostics()) all += d.str() + "\n";
  return all;
}

// The messages of the InputError that `f` throws ("" when it throws none).
template <class F>
std::string input_error(F f) {
  try {
    f();
  } catch (const InputError& e) {
    return message_of(e);
  }
  return "";
}

const FittedFigure& figure(const Calibration& c, const std::string& suffix) {
  for (const auto& f : c.figures)
    if (f.field.ends_with(suffix)) return f;
  BOOST_FAIL("no figure " + suffix);
  throw;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_profile_of_ranks_with_two_threads_calibrates_the_figures_of_one_core) {
  // Each rank of the run was a device of 2 cores: calibrate fits a core's rates (what local-cpu
  // describes), and predicts the run's tasks on devices of 2 cores again.
  TempDir dir;
  const ClusterSpec machine = truth();
  const std::string path = synthetic_profile(dir.path, "p", {"training.global_batch=8"}, machine, 2);
  const Profile profile = load_profile(path);
  BOOST_TEST(profile.threads == 2);
  const Calibration cal = calibrate({lower_profile(profile, kLocalCpu)}, load_cluster_file(kLocalCpu));
  const DeviceSpec& want = machine.devices.at("cpu-core");
  const DeviceSpec& got = cal.cluster.devices.at("cpu-core");
  BOOST_TEST(got.peak.at(Precision::Fp32).value() * got.efficiency.gemm ==
                 want.peak.at(Precision::Fp32).value() * want.efficiency.gemm,
             tt::tolerance(1e-9));
  BOOST_TEST(got.memory_bandwidth.value() * got.efficiency.memory ==
                 want.memory_bandwidth.value() * want.efficiency.memory,
             tt::tolerance(1e-9));
  for (const TaskResidual& t : cal.tasks) BOOST_TEST(t.predicted_s == t.measured_s, tt::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(calibration_recovers_the_rates_that_produced_the_measurements) {
  TempDir dir;
  const ClusterSpec machine = truth();
  const std::string path =
      synthetic_profile(dir.path, "p", {"training.global_batch=8", "plan.bucket_size=300KiB"}, machine);
  const std::vector<ProfiledRun> runs{lower_profile(load_profile(path), kLocalCpu)};
  const Calibration cal = calibrate(runs, load_cluster_file(kLocalCpu));

  const DeviceSpec& want = machine.devices.at("cpu-core");
  const DeviceSpec& got = cal.cluster.devices.at("cpu-core");
  const double want_peak = want.peak.at(Precision::Fp32).value(),
               got_peak = got.peak.at(Precision::Fp32).value();
  BOOST_TEST(got_peak * got.efficiency.gemm == want_peak * want.efficiency.gemm, tt::tolerance(1e-9));
  BOOST_TEST(got_peak * got.efficiency.attention_or_gemm() == want_peak * *want.efficiency.attention,
             tt::tolerance(1e-9));
  BOOST_TEST(got.memory_bandwidth.value() * got.efficiency.memory ==
                 want.memory_bandwidth.value() * want.efficiency.memory,
             tt::tolerance(1e-9));
  BOOST_TEST(got.memory_bandwidth.value() * got.efficiency.optimizer_or_memory() ==
                 want.memory_bandwidth.value() * *want.efficiency.optimizer,
             tt::tolerance(1e-9));
  BOOST_TEST(cal.cluster.pools[0].intra_node.allreduce_busbw->value() == 4e9, tt::tolerance(1e-9));
  // Segments of nearly one mix of launches and traffic do not tell those figures apart: the launch cost
  // keeps its value. The buckets differ in size (the tied embedding's head part rides in the first,
  // plan/ir/buckets.hpp), so the collectives' latency is fitted, to the machine's.
  BOOST_TEST(cal.cluster.pools[0].intra_node.latency.value() == machine.pools[0].intra_node.latency.value(),
             tt::tolerance(1e-6));
  BOOST_TEST(!figure(cal, "kernel_launch").fitted);
  for (const TaskResidual& t : cal.tasks) BOOST_TEST(t.predicted_s == t.measured_s, tt::tolerance(1e-6));
  // Calibrated on 2 ranks, the cluster keeps the size it was given.
  BOOST_TEST(cal.cluster.pools[0].gpus_per_node == load_cluster_file(kLocalCpu).pools[0].gpus_per_node);
}

namespace {

// The compute tasks' time of the tiny scenario under `sets` on `cluster` (one rank).
double compute_s(const std::vector<std::string>& sets, const ClusterSpec& cluster) {
  std::vector<Override> overrides;
  for (const auto& s : sets) overrides.push_back(parse_override(s));
  const ScenarioSpec s = load_scenario(kScenario, overrides);
  const Program program = lower(complete_plan(s), s.model, s.cluster, s.training);
  double total = 0;
  for (const Task& t : program.roles.front().tasks)
    if (t.stream == StreamKind::Compute)
      total += task_duration_s(t, cluster.pools[0], cluster, Precision::Fp32);
  return total;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_attention_scores_kernels_timed_apart_get_a_rate_of_their_own) {
  // A CPU core keeps a head's scores in its caches, so its softmax runs faster per byte than the kernels
  // that stream activations (3x on this machine). A profile that times the softmax apart fits both rates,
  // and the twin holds on a plan with another mix of them: longer sequences, more scores per activation.
  TempDir dir;
  ClusterSpec machine = truth();
  machine.devices.at("cpu-core").efficiency.scores = 0.9;
  const std::vector<std::string> profiled{"training.global_batch=8", "plan.micro_batch=4"},
      other{"training.global_batch=8", "plan.micro_batch=2", "training.seq_len=128"};
  const std::string path = synthetic_profile(dir.path, "p", profiled, machine);
  const Calibration cal =
      calibrate({lower_profile(load_profile(path), kLocalCpu)}, load_cluster_file(kLocalCpu));
  const DeviceSpec& got = cal.cluster.devices.at("cpu-core");
  const DeviceSpec& want = machine.devices.at("cpu-core");
  BOOST_TEST(figure(cal, "efficiency.scores").fitted);
  BOOST_REQUIRE(got.efficiency.scores.has_value());
  BOOST_TEST(got.memory_bandwidth.value() * *got.efficiency.scores ==
                 want.memory_bandwidth.value() * *want.efficiency.scores,
             tt::tolerance(1e-9));
  BOOST_TEST(got.memory_bandwidth.value() * got.efficiency.memory ==
                 want.memory_bandwidth.value() * want.efficiency.memory,
             tt::tolerance(1e-9));
  const double truth_s = compute_s(other, machine);
  BOOST_TEST(compute_s(other, cal.cluster) == truth_s, tt::tolerance(1e-9));

  // The same profile without the softmax timed apart (a GPU's, or one from before): one rate over both
  // kinds, right on its own plan and slow on the longer sequences, whose bytes are more of the scores.
  nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
  for (auto& t : j["tasks"]) t.erase("scores_s");
  std::ofstream(path) << j.dump(1);
  const Calibration lumped =
      calibrate({lower_profile(load_profile(path), kLocalCpu)}, load_cluster_file(kLocalCpu));
  BOOST_TEST(!lumped.cluster.devices.at("cpu-core").efficiency.scores.has_value());
  BOOST_TEST(compute_s(profiled, lumped.cluster) == compute_s(profiled, machine), tt::tolerance(1e-3));
  BOOST_TEST(compute_s(other, lumped.cluster) > 1.01 * truth_s);
}

BOOST_AUTO_TEST_CASE(two_shapes_tell_launch_cost_from_bandwidth_and_latency_from_busbw) {
  TempDir dir;
  const ClusterSpec machine = truth(Seconds(3e-6), Seconds(5e-6));
  const std::vector<ProfiledRun> runs{
      lower_profile(load_profile(synthetic_profile(dir.path, "a", {"plan.micro_batch=1"}, machine)),
                    kLocalCpu),
      lower_profile(load_profile(synthetic_profile(
                        dir.path, "b", {"training.seq_len=128", "plan.bucket_size=300KiB"}, machine)),
                    kLocalCpu)};
  const Calibration cal = calibrate(runs, load_cluster_file(kLocalCpu));
  BOOST_TEST(figure(cal, "kernel_launch").fitted);
  BOOST_TEST(cal.cluster.devices.at("cpu-core").efficiency.kernel_launch.value() == 3e-6,
             tt::tolerance(1e-6));
  BOOST_TEST(figure(cal, "latency").fitted);
  BOOST_TEST(cal.cluster.pools[0].intra_node.latency.value() == 5e-6, tt::tolerance(1e-6));
  BOOST_TEST(cal.cluster.pools[0].intra_node.allreduce_busbw->value() == 4e9, tt::tolerance(1e-6));
  for (const TaskResidual& t : cal.tasks) BOOST_TEST(t.predicted_s == t.measured_s, tt::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(the_calibrated_cluster_file_loads_and_says_where_it_came_from) {
  TempDir dir;
  const std::string path = synthetic_profile(dir.path, "p", {"training.global_batch=8"}, truth());
  const std::vector<ProfiledRun> runs{lower_profile(load_profile(path), "local-cpu")};
  const Calibration cal = calibrate(runs, load_cluster_argument("local-cpu"));
  // One backward and one forward hold launches and traffic in one proportion: the launch cost is kept.
  BOOST_TEST(!figure(cal, "kernel_launch").fitted);
  const std::string text = calibrated_cluster_yaml(cal, runs, "local-cpu", "2026-01-01 00:00:00 UTC");
  BOOST_TEST(text.find("# Calibrated by `paratwin calibrate` on 2026-01-01 00:00:00 UTC from local-cpu") ==
             0u);
  BOOST_TEST(text.find(path) != std::string::npos);
  BOOST_TEST(text.find("rms residual") != std::string::npos);
  BOOST_TEST(text.find("gemm: 0.5") != std::string::npos);
  BOOST_TEST(text.find("# calibrated: dense GEMMs") != std::string::npos);
  std::ofstream(dir.path / "cal.yaml") << text;
  const ClusterSpec loaded = load_cluster_file((dir.path / "cal.yaml").string());
  BOOST_TEST(
      loaded.devices.at("cpu-core").efficiency.gemm == cal.cluster.devices.at("cpu-core").efficiency.gemm,
      tt::tolerance(1e-9));
  // The twin on the calibrated file predicts the measured run.
  const ScenarioSpec s =
      load_scenario(kScenario, {parse_override("training.global_batch=8"),
                                parse_override("cluster=" + (dir.path / "cal.yaml").string())});
  const Program program = lower(complete_plan(s), s.model, s.cluster, s.training);
  double measured = 0;
  for (const TaskResidual& t : cal.tasks) measured += t.measured_s;
  BOOST_TEST(evaluate(program, s.cluster, s.training).iteration_time_s == measured, tt::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(every_catalog_cluster_round_trips_through_its_file_form) {
  TempDir dir;
  for (const auto& entry : Catalog::installed().list(CatalogKind::Topology)) {
    BOOST_TEST_CONTEXT(entry.name) {
      const ClusterSpec c = load_cluster_file(entry.path);
      std::ofstream(dir.path / "c.yaml") << to_yaml(c);
      const ClusterSpec back = load_cluster_file((dir.path / "c.yaml").string());
      BOOST_TEST(back.name == c.name);
      BOOST_TEST(back.gpus() == c.gpus());
      BOOST_TEST(back.peak(Precision::Bf16).value() == c.peak(Precision::Bf16).value(), tt::tolerance(1e-9));
      BOOST_TEST(back.device_memory().value() == c.device_memory().value(), tt::tolerance(1e-9));
      BOOST_TEST(back.network.oversubscription == c.network.oversubscription, tt::tolerance(1e-9));
      BOOST_TEST(back.storage_bandwidth.value() == c.storage_bandwidth.value(), tt::tolerance(1e-9));
      // The text of the text is the same: nothing is lost or rounded on a second pass.
      BOOST_TEST(to_yaml(back) == to_yaml(c));
    }
  }
}

BOOST_AUTO_TEST_CASE(every_catalog_model_round_trips_through_its_file_form) {
  for (const auto& entry : Catalog::installed().list(CatalogKind::Model)) {
    BOOST_TEST_CONTEXT(entry.name) {
      const ModelSpec m = load_model_file(entry.path);
      Diagnostics diag;
      const ModelSpec back = parse_model(parse_yaml(to_yaml(m), "back"), "model", diag);
      BOOST_TEST(!diag.has_errors());
      BOOST_TEST(to_yaml(back) == to_yaml(m));
      BOOST_TEST(count_parameters(back).total == count_parameters(m).total);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_file_that_is_not_a_profile_is_refused_by_name) {
  const std::string message = input_error([] { load_profile(kScenario); });
  BOOST_TEST(message.find(kScenario + " is not a profile of a live run") != std::string::npos);
  BOOST_TEST(message.find("paratwin run SCENARIO --profile FILE") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_profile_missing_a_task_names_it) {
  TempDir dir;
  const std::string path = synthetic_profile(dir.path, "p", {}, truth());
  nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
  const std::string last = j["tasks"].back()["task"];
  j["tasks"].erase(j["tasks"].size() - 1);
  std::ofstream(path) << j.dump(1);
  const std::string message = input_error([&] { lower_profile(load_profile(path), kLocalCpu); });
  BOOST_TEST(message.find("no measurement of task '" + last + "'") != std::string::npos);
  BOOST_TEST(message.find(path) == 0u);
}

BOOST_AUTO_TEST_CASE(a_profile_from_before_the_data_loaders_copies_still_calibrates) {
  TempDir dir;
  const std::string path =
      synthetic_profile(dir.path, "p", {"training.global_batch=8", "plan.bucket_size=300KiB"}, truth());
  const Calibration now =
      calibrate({lower_profile(load_profile(path), kLocalCpu)}, load_cluster_file(kLocalCpu));
  // As version 1 wrote it: no input-batch copies, the tasks numbered without them.
  nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
  nlohmann::json tasks = nlohmann::json::array();
  for (nlohmann::json t : j["tasks"])
    if (!t["task"].get<std::string>().starts_with("copy h2d batch")) {
      t["index"] = tasks.size();
      tasks.push_back(t);
    }
  BOOST_REQUIRE(tasks.size() < j["tasks"].size());
  j["tasks"] = tasks;
  j["version"] = 1;
  std::ofstream(path) << j.dump(1);
  const ProfiledRun old = lower_profile(load_profile(path), kLocalCpu);
  BOOST_TEST(old.profile.tasks.size() == old.program.roles.front().tasks.size());
  const Calibration before = calibrate({old}, load_cluster_file(kLocalCpu));
  BOOST_TEST(to_yaml(before.cluster) == to_yaml(now.cluster));
  // A profile of version 2 must have measured them.
  j["version"] = 2;
  std::ofstream(path) << j.dump(1);
  const std::string message = input_error([&] { lower_profile(load_profile(path), kLocalCpu); });
  BOOST_TEST(
      message.find(
          "but the Program (model tiny-gpt, scenario live-cpu-tiny) has 'copy h2d batch mb0 c0' there") !=
          std::string::npos,
      message);
}

BOOST_AUTO_TEST_CASE(a_profile_of_another_model_is_refused_task_by_task) {
  TempDir dir;
  // Tasks measured on tiny-gpt, inputs claiming a wider model: the work differs.
  const std::string path = synthetic_profile(dir.path, "p", {}, truth());
  nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
  const std::string inputs = j["inputs"];
  j["inputs"] = inputs.substr(0, inputs.find("  hidden: 128")) + "  hidden: 256" +
                inputs.substr(inputs.find("  hidden: 128") + 13);
  std::ofstream(path) << j.dump(1);
  const std::string message = input_error([&] { lower_profile(load_profile(path), kLocalCpu); });
  BOOST_TEST(message.find("task 'F mb0 c0' did") != std::string::npos);
  BOOST_TEST(message.find("a profile of another model or plan?") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_malformed_profile_field_is_reported_at_its_line) {
  TempDir dir;
  const std::string path = synthetic_profile(dir.path, "p", {}, truth());
  nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
  j["tasks"][0]["median_s"] = "soon";
  std::ofstream(path) << j.dump(1);
  const std::string message = input_error([&] { load_profile(path); });
  BOOST_TEST(message.find(path + ":") == 0u);
  BOOST_TEST(message.find("tasks[0].median_s") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(attention_and_optimizer_efficiencies_apply_to_their_own_work_only) {
  const ClusterSpec c = load_cluster_file(kLocalCpu);
  DeviceSpec d = c.devices.at("cpu-core");
  cost::KernelCost attention, dense, step;
  attention.gemm_flops = attention.attention_flops = dense.gemm_flops = Flops(1e9);
  step.optimizer_bytes = Bytes(1e9);
  const double a0 = cost::compute_time(attention, d, Precision::Fp32).value();
  const double d0 = cost::compute_time(dense, d, Precision::Fp32).value();
  const double s0 = cost::compute_time(step, d, Precision::Fp32).value();
  BOOST_TEST(a0 == d0);  // without figures of their own, as fast as the rest
  d.efficiency.attention = d.efficiency.gemm / 4;
  d.efficiency.optimizer = d.efficiency.memory / 2;
  BOOST_TEST(cost::compute_time(attention, d, Precision::Fp32).value() == 4 * a0, tt::tolerance(1e-12));
  BOOST_TEST(cost::compute_time(dense, d, Precision::Fp32).value() == d0);
  BOOST_TEST(cost::compute_time(step, d, Precision::Fp32).value() == 2 * s0, tt::tolerance(1e-12));
}

namespace {

const std::string kCpuHosts = paratwin_test::source_dir() + "/topologies/cpu-hosts.yaml";

// A profile of 2 hosts x 2 data-parallel ranks on `machine` (cpu-hosts with its own figures), every
// task measured at the cost model's time there, as `paratwin run --hosts a:2,b:2 --profile` writes it.
std::string two_host_profile(const fs::path& dir, const std::string& name, const std::string& bucket,
                             const ClusterSpec& machine) {
  const ScenarioSpec s = load_scenario(
      kScenario, {parse_override("cluster=" + kCpuHosts), parse_override("plan.dp=4"),
                  parse_override("training.global_batch=8"), parse_override("plan.micro_batch=2"),
                  parse_override("plan.bucket_size=" + bucket)});
  return write_profile(dir, name, s, machine, 4, 2);
}

}  // namespace

BOOST_AUTO_TEST_CASE(collectives_across_hosts_give_the_network_between_them_apart_from_the_host_inside) {
  // The DP all-reduce of 2 hosts x 2 ranks crosses hosts (the model's hierarchical or flat algorithm,
  // whichever is faster) and uses each host's shared memory too; two bucket sizes tell the link's
  // latency from its bandwidth.
  TempDir dir;
  ClusterSpec machine = load_cluster_file(kCpuHosts);
  machine.pools[0].nic.achievable = BytesPerSecond(40e6);
  machine.pools[0].nic.latency = Seconds(300e-6);
  std::vector<ProfiledRun> runs;
  for (const char* bucket : {"256KiB", "4MiB"})
    runs.push_back(
        lower_profile(load_profile(two_host_profile(dir.path, bucket, bucket, machine)), kCpuHosts));
  BOOST_TEST(runs.front().profile.nodes == 2);
  const Calibration cal = calibrate(runs, load_cluster_file(kCpuHosts));
  const NicSpec& nic = cal.cluster.pools[0].nic;
  BOOST_TEST(figure(cal, "nic.achievable").fitted);
  BOOST_TEST(figure(cal, "nic.latency").fitted);
  BOOST_TEST(nic.achievable->value() == 40e6, tt::tolerance(1e-6));
  BOOST_TEST(nic.latency.value() == 300e-6, tt::tolerance(1e-6));
  // Every collective crossed hosts: the figures inside a host are left to collectives inside one.
  BOOST_TEST(!figure(cal, "intra_node.allreduce_busbw").fitted);
  for (const TaskResidual& t : cal.tasks)
    if (t.task.starts_with("AR dp")) BOOST_TEST(t.predicted_s == t.measured_s, tt::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(a_profile_of_one_host_leaves_the_network_between_hosts_as_it_was) {
  TempDir dir;
  const std::string path = synthetic_profile(dir.path, "p", {"training.global_batch=8"}, truth());
  const Calibration cal =
      calibrate({lower_profile(load_profile(path), kLocalCpu)}, load_cluster_file(kLocalCpu));
  BOOST_TEST(!figure(cal, "nic.achievable").fitted);
  BOOST_TEST(figure(cal, "nic.achievable").measured.find("no collective crossed hosts") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_spread_common_to_the_steps_kernels_is_told_from_each_kernels_own) {
  TempDir dir;
  const std::string path =
      synthetic_profile(dir.path, "p", {"training.global_batch=8", "plan.micro_batch=2"}, truth());
  // Every compute task varies by 5% from step to step; the step's total varies as much (they vary
  // together: all of it is the step's) or as independent draws would make it (none of it is).
  nlohmann::json profile = nlohmann::json::parse(std::ifstream(path));
  double total = 0, squares = 0;
  for (auto& t : profile["tasks"])
    if (t.contains("cpu_s")) {  // the compute tasks
      t["cpu_cv"] = 0.05;
      total += t["cpu_s"].get<double>();
      squares += std::pow(t["cpu_s"].get<double>(), 2);
    }
  profile["step_cpu_correlation"] = 0.6;  // one rank in this profile: not a correlation between ranks
  auto variability = [&](double step_cv) {
    profile["step_cpu_cv"] = step_cv;
    std::ofstream(path) << profile.dump(1);
    return calibrate({lower_profile(load_profile(path), kLocalCpu)}, load_cluster_file(kLocalCpu))
        .variability;
  };
  const KernelVariability together = variability(0.05);
  BOOST_TEST(together.step_cv == 0.05, tt::tolerance(1e-9));
  BOOST_TEST(together.cv[size_t(KernelKind::Forward)] <= 1e-6);
  BOOST_TEST(together.step_samples > 0);
  const KernelVariability apart = variability(0.05 * std::sqrt(squares) / total);
  BOOST_TEST(apart.step_cv <= 1e-6);
  BOOST_TEST(apart.cv[size_t(KernelKind::Forward)] == 0.05, tt::tolerance(1e-9));
  BOOST_TEST(apart.cv[size_t(KernelKind::Backward)] == 0.05, tt::tolerance(1e-9));
  // Half of each kernel's variance shared: s^2 = e^2 = 0.05^2 / 2.
  const double half = 0.05 / std::sqrt(2.0);
  const KernelVariability shared =
      variability(std::sqrt(half * half * (total * total - squares) + 0.05 * 0.05 * squares) / total);
  BOOST_TEST(shared.step_cv == half, tt::tolerance(1e-9));
  BOOST_TEST(shared.cv[size_t(KernelKind::Forward)] == half, tt::tolerance(1e-9));
  // The file calibrate --variability writes carries it as the scenario's variability.steps.
  const fs::path file = dir.path / "v.yaml";
  std::ofstream(file) << variability_yaml(shared, {lower_profile(load_profile(path), kLocalCpu)}, "now");
  const ScenarioSpec s = load_scenario(kScenario, {parse_override("variability=" + file.string())});
  BOOST_TEST(s.variability.steps.cv == half, tt::tolerance(1e-5));
  BOOST_TEST(shared.step_correlation == 0);
  BOOST_TEST(to_text(shared).find("; whole steps 3.5%, correlated 0.00 between ranks") != std::string::npos,
             to_text(shared));
  // Profiled over two ranks, their step totals' correlation is the step factor's between GPUs.
  profile["ranks"] = 2;
  for (auto& t : profile["tasks"]) t["count"] = 2 * t["count"].get<int>();
  const KernelVariability two = variability(0.05);
  BOOST_TEST(two.step_correlation == 0.6, tt::tolerance(1e-12));
  std::ofstream(file) << variability_yaml(two, {lower_profile(load_profile(path), kLocalCpu)}, "now");
  BOOST_TEST(load_scenario(kScenario, {parse_override("variability=" + file.string())})
                     .variability.steps.correlation == 0.6,
             tt::tolerance(1e-5));
}

// Two ranks whose mean step totals differ by R: what step-to-step noise of 5% (correlated 0.6 between
// them) leaves in a mean over the measured steps comes off, and the rest is the device's speed_cv in the
// calibrated cluster, which its file keeps.
BOOST_AUTO_TEST_CASE(the_ranks_persistent_spread_is_the_devices_speed_spread) {
  TempDir dir;
  const std::string path =
      synthetic_profile(dir.path, "p", {"training.global_batch=8", "plan.micro_batch=2"}, truth());
  nlohmann::json profile = nlohmann::json::parse(std::ifstream(path));
  for (auto& t : profile["tasks"]) {
    if (t.contains("cpu_s")) t["cpu_cv"] = 0.05;
    t["count"] = 2 * t["count"].get<int>();
  }
  profile["ranks"] = 2;
  profile["step_cpu_cv"] = 0.05;
  profile["step_cpu_correlation"] = 0.6;
  const int steps = profile["steps"].get<int>() - profile.value("warmup_steps_excluded", 0);
  const auto calibrated = [&](double rank_cv) {
    profile["rank_cpu_cv"] = rank_cv;
    std::ofstream(path) << profile.dump(1);
    return calibrate({lower_profile(load_profile(path), kLocalCpu)}, load_cluster_file(kLocalCpu));
  };
  const double noise = 0.4 * 0.05 * 0.05 / steps;
  const Calibration cal = calibrated(0.03);
  BOOST_TEST(cal.variability.ranks == 2);
  BOOST_TEST(cal.variability.rank_cv == std::sqrt(0.03 * 0.03 - noise), tt::tolerance(1e-9));
  const DeviceSpec& device = cal.cluster.devices.at("cpu-core");
  BOOST_TEST(device.speed_cv == cal.variability.rank_cv, tt::tolerance(1e-12));
  BOOST_TEST(figure(cal, "speed_cv").fitted);
  BOOST_TEST(to_text(cal.variability).find("; ranks apart throughout") != std::string::npos);
  const fs::path file = dir.path / "c.yaml";
  std::ofstream(file) << calibrated_cluster_yaml(cal, {lower_profile(load_profile(path), kLocalCpu)},
                                                 "local-cpu", "now");
  BOOST_TEST(load_cluster_file(file.string()).devices.at("cpu-core").speed_cv == device.speed_cv,
             tt::tolerance(1e-5));
  // A spread no larger than the noise leaves none; one rank measures none.
  BOOST_TEST(calibrated(std::sqrt(noise) / 2).variability.rank_cv == 0.0);
  BOOST_TEST(calibrated(std::sqrt(noise) / 2).cluster.devices.at("cpu-core").speed_cv == 0.0);
}

BOOST_AUTO_TEST_CASE(the_kernels_spread_is_pooled_per_kind_and_read_back_as_the_scenarios_variability) {
  TempDir dir;
  // Two micro-batches: two forward tasks, whose spreads (3% and 5%, as many executions) pool to the root
  // of their mean square; the optimizer's 20% stands alone.
  const std::string path =
      synthetic_profile(dir.path, "p", {"training.global_batch=8", "plan.micro_batch=2"}, truth());
  nlohmann::json profile = nlohmann::json::parse(std::ifstream(path));
  int forward = 0;
  for (auto& t : profile["tasks"]) {
    const std::string name = t["task"];
    if (name.starts_with("F ")) t["cpu_cv"] = forward++ == 0 ? 0.03 : 0.05;
    if (name == "optimizer step") t["cpu_cv"] = 0.2;
  }
  std::ofstream(path) << profile.dump(1);
  const Calibration cal =
      calibrate({lower_profile(load_profile(path), kLocalCpu)}, load_cluster_file(kLocalCpu));
  const KernelVariability& v = cal.variability;
  BOOST_TEST(forward == 2);
  BOOST_TEST(v.cv[size_t(KernelKind::Forward)] == std::sqrt((0.03 * 0.03 + 0.05 * 0.05) / 2),
             tt::tolerance(1e-12));
  BOOST_TEST(v.cv[size_t(KernelKind::Optimizer)] == 0.2, tt::tolerance(1e-12));
  BOOST_TEST(v.tasks[size_t(KernelKind::Backward)] == 0);  // the profile recorded no spread for them
  BOOST_TEST(v.tasks[size_t(KernelKind::Recompute)] == 0);
  // The file calibrate --variability writes is the scenario's variability, by --set variability=FILE.
  const fs::path file = dir.path / "v.yaml";
  std::ofstream(file) << variability_yaml(v, {lower_profile(load_profile(path), kLocalCpu)}, "now");
  const ScenarioSpec s = load_scenario(kScenario, {parse_override("variability=" + file.string())});
  BOOST_TEST(s.variability.kernel_cv[size_t(KernelKind::Optimizer)] == 0.2, tt::tolerance(1e-5));
  BOOST_TEST((s.variability.kernel_distribution == NoiseDistribution::Lognormal));
  const std::string wrong =
      input_error([&] { load_scenario(kScenario, {parse_override("variability=nothing")}); });
  BOOST_TEST(wrong.find("expected a variability mapping or the path of a file written by paratwin calibrate "
                        "--variability, got 'nothing'") != std::string::npos);
}
