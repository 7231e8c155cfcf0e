// `paratwin run` and `paratwin tokenize` end to end: mpirun started by paratwin, progress on the
// terminal, the report with the twin's keys and measured loss, profile and trace, a stop and resume
// through the command line, and plans the CPU backend refuses (exit status 2).
#define BOOST_TEST_MODULE exec_cli
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "paratwin_process.hpp"
#include "plan/spec/scenario.hpp"
#include "source_tree.hpp"

using nlohmann::json;
using namespace paratwin_test;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("paratwin-cli-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

const std::string kScenario = paratwin_test::source_dir() + "/scenarios/live-cpu-tiny.yaml";
const std::string kSmall =
    " --set training.seq_len=32 --set training.global_batch=4 --set plan.micro_batch=1";

}  // namespace

BOOST_AUTO_TEST_CASE(tokenize_writes_an_llm_c_token_file) {
  TempDir dir;
  std::ofstream(dir.path / "t.txt") << "abc";
  const Output out =
      run_paratwin("tokenize " + (dir.path / "t.txt").string() + " -o " + (dir.path / "t.bin").string());
  BOOST_TEST(out.status == 0);
  BOOST_TEST(out.text.find("3 tokens") != std::string::npos);
  BOOST_TEST(fs::file_size(dir.path / "t.bin") == 1024u + 6u);
}

BOOST_AUTO_TEST_CASE(run_on_two_ranks_reports_measured_and_predicted_metrics) {
  TempDir dir;
  const Output out =
      run_paratwin("run " + kScenario + kSmall + " --backend cpu --ranks 2 --steps 4 --json " +
                   (dir.path / "r.json").string() + " --profile " + (dir.path / "p.json").string() +
                   " --trace " + (dir.path / "t.json").string());
  BOOST_TEST_INFO(out.text);
  BOOST_TEST_REQUIRE(out.status == 0);
  BOOST_TEST(out.text.find("step     4/4  loss") != std::string::npos);
  BOOST_TEST(out.text.find("tok/s") != std::string::npos);
  BOOST_TEST(out.text.find("ETA") != std::string::npos);
  const json r = read_json(dir.path / "r.json");
  BOOST_TEST(r["evaluator"] == "live");
  BOOST_TEST(r["loss"].size() == 4u);
  BOOST_TEST(r["steps"] == 4);
  BOOST_TEST(r["plan"]["dp"] == 2);
  for (const char* key :
       {"iteration_time_s", "tokens_per_s", "model_tflops_per_gpu", "mfu", "hfu", "peak_memory_gib"}) {
    BOOST_TEST_INFO(key);
    BOOST_TEST(r["metrics"][key].get<double>() > 0);
    BOOST_TEST(r["predicted"][key].get<double>() > 0);
  }
  for (const char* key : {"compute_s", "dp_comm_s", "exposed_comm_s", "optimizer_s"})
    BOOST_TEST(r["breakdown"].contains(key));
  BOOST_TEST(r["reliability"]["restarts"] == 0);
  BOOST_TEST(r["iteration_times_s"].size() == 3u);  // the steps after the first
  BOOST_TEST(r["iteration_busy_s"].size() == 3u);
  // Measured beside predicted per kind of task: one host, so its all-reduces stay inside it.
  std::vector<std::string> kinds;
  for (const json& k : r["by_kind"]) {
    kinds.push_back(k["kind"]);
    BOOST_TEST(k["measured_s"].get<double>() > 0);
    BOOST_TEST(k["predicted_s"].get<double>() > 0);
    // Compute tasks carry the CPU time of their thread; the loader's copies and collectives do not.
    if (k["kind"] != "collective in a host" && k["kind"] != "input batch")
      BOOST_TEST(k["measured_cpu_s"].get<double>() > 0);
  }
  BOOST_TEST(kinds == (std::vector<std::string>{"forward", "backward", "optimizer", "input batch",
                                                "collective in a host"}),
             boost::test_tools::per_element());
  BOOST_TEST(out.text.find("per step, measured (CPU time) / predicted by the twin: forward ") !=
             std::string::npos);
  // predicted{} is what `paratwin plan` says about the same plan.
  BOOST_TEST_REQUIRE(
      run_paratwin("plan " + kScenario + kSmall + " --json " + (dir.path / "plan.json").string()).status ==
      0);
  const json plan = read_json(dir.path / "plan.json");
  BOOST_TEST(r["predicted"]["iteration_time_s"].get<double>() ==
             plan["metrics"]["iteration_time_s"].get<double>());
  BOOST_TEST(r["predicted"]["tokens_per_s"].get<double>() == plan["metrics"]["tokens_per_s"].get<double>());
  // The profile: every task of the Program, by name, with a measured duration.
  const json p = read_json(dir.path / "p.json");
  std::vector<std::string> names;
  BOOST_TEST(p["format"] == "paratwin-profile");
  BOOST_TEST(p["inputs"].get<std::string>().find("model:\n  name: \"tiny-gpt\"") != std::string::npos);
  for (const auto& t : p["tasks"]) {
    names.push_back(t["task"]);
    BOOST_TEST(t["mean_s"].get<double>() > 0);
    BOOST_TEST(t["median_s"].get<double>() > 0);
    BOOST_TEST(t["count"] == 2 * 3);  // two ranks x the three steps after the first
    if (t["stream"] == "compute") {
      BOOST_TEST(t["cpu_s"].get<double>() > 0);
      if (t["kind"] != "optimizer") BOOST_TEST(t["gemm_s"].get<double>() > 0);
    } else {
      BOOST_TEST(t["transfer_s"].get<double>() > 0);
    }
  }
  BOOST_TEST(std::count(names.begin(), names.end(), "optimizer step") == 1);
  BOOST_TEST(std::count(names.begin(), names.end(), "AR dp bucket0") == 1);
  const json t = read_json(dir.path / "t.json");
  int complete = 0;
  for (const auto& e : t["traceEvents"]) complete += e["ph"] == "X" ? 1 : 0;
  BOOST_TEST(complete == int(names.size()) * 2 * 4);  // every task, on both ranks, in all four steps
}

BOOST_AUTO_TEST_CASE(a_killed_run_resumed_from_the_command_line_ends_bit_identical) {
  TempDir dir;
  const std::string run =
      "run " + kScenario + kSmall + " --ranks 2 --steps 4 --checkpoint-every 2 --checkpoint-dir ";
  const std::string common = run + (dir.path / "ckpt").string();
  const Output whole = run_paratwin(run + (dir.path / "ckpt-whole").string() + " --json " +
                                    (dir.path / "whole.json").string());
  BOOST_TEST_REQUIRE(whole.status == 0);
  // Rank 0 dies by SIGKILL after step 3, between the checkpoints of steps 2 and 4; the job ends
  // (the supervisor's recovery off).
  const Output killed = run_paratwin(common + " --kill-after 3 --max-restarts 0");
  BOOST_TEST_INFO(killed.text);
  BOOST_TEST_REQUIRE(killed.status != 0);
  BOOST_TEST(killed.text.find("step     3/4") != std::string::npos);
  BOOST_TEST(killed.text.find("step     4/4") == std::string::npos);
  // A half-written newer checkpoint (no manifest) is reported and skipped.
  fs::create_directories(dir.path / "ckpt" / "step-00000003");
  const Output resumed = run_paratwin(common + " --resume --json " + (dir.path / "resumed.json").string());
  BOOST_TEST_INFO(resumed.text);
  BOOST_TEST_REQUIRE(resumed.status == 0);
  BOOST_TEST(resumed.text.find("checkpoint rejected: ") != std::string::npos);
  BOOST_TEST(resumed.text.find("MANIFEST.json is missing") != std::string::npos);
  BOOST_TEST(resumed.text.find("resumed from") != std::string::npos);
  const json a = read_json(dir.path / "whole.json"), b = read_json(dir.path / "resumed.json");
  BOOST_TEST(a["loss"] == b["loss"]);  // bit-identical: same ranks, same order of every sum
  BOOST_TEST(b["reliability"]["restarts"] == 1);
  BOOST_TEST(b["reliability"]["lost_steps"] == 1);
}

BOOST_AUTO_TEST_CASE(the_tiny_moe_scenario_trains_with_expert_parallelism) {
  TempDir dir;
  // Runs the MoE scenario with `flags`; its JSON report.
  const auto run_moe = [&](const std::string& flags, const std::string& report) {
    const Output out =
        run_paratwin("run " + paratwin_test::source_dir() + "/scenarios/live-cpu-tiny-moe.yaml " + flags +
                     " --json " + (dir.path / report).string());
    BOOST_TEST_INFO(out.text);
    BOOST_TEST_REQUIRE(out.status == 0);
    return read_json(dir.path / report);
  };
  const json r = run_moe("--ranks 2 --steps 8", "r.json");
  BOOST_TEST(r["plan"]["ep"] == 2);
  BOOST_TEST(r["loss"].back().get<double>() < r["loss"].front().get<double>() - 0.5);
  // Beside tp 2, with ZeRO 1 (the dense states sharded over dp 2, each rank's experts its own).
  const json t = run_moe("--set plan.tp=2 --set plan.zero=1 --ranks 2 --steps 2", "tp.json");
  BOOST_TEST(t["plan"]["ep"] == 2);
  BOOST_TEST(t["plan"]["tp"] == 2);
  BOOST_TEST(t["plan"]["zero"] == 1);
}

// The live run records the tokens each expert got in every MoE layer; calibrate folds them into the
// model's routing, and the twin plans with what was measured.
BOOST_AUTO_TEST_CASE(the_tiny_moe_runs_measured_routing_round_trips_through_calibrate) {
  TempDir dir;
  const std::string scenario = paratwin_test::source_dir() + "/scenarios/live-cpu-tiny-moe.yaml";
  const std::filesystem::path profile = dir.path / "p.json", model = dir.path / "m.yaml";
  const Output run = run_paratwin("run " + scenario + " --ranks 2 --steps 2 --profile " + profile.string());
  BOOST_TEST_INFO(run.text);
  BOOST_TEST_REQUIRE(run.status == 0);
  const json routed = read_json(profile)["routing"];
  BOOST_TEST(routed["experts"] == 4);
  BOOST_TEST_REQUIRE(routed["layers"].size() == 4u);  // tiny-moe: every layer's MLP has experts
  double expected_imbalance = 0;
  for (const json& layer : routed["layers"]) {
    const auto t = layer["tokens"].get<std::vector<double>>();
    // Every token of both steps went to its top 2: 2 steps x 8 sequences x 64 tokens x 2.
    BOOST_TEST(t[0] + t[1] + t[2] + t[3] == 2.0 * 8 * 64 * 2);
    // EP rank 0 runs experts 0 and 1, rank 1 experts 2 and 3: hottest over mean.
    expected_imbalance += std::max(t[0] + t[1], t[2] + t[3]) / ((t[0] + t[1] + t[2] + t[3]) / 2) / 4;
  }
  const Output cal = run_paratwin("calibrate " + profile.string() + " --cluster local-cpu -o " +
                                  (dir.path / "c.yaml").string() + " --routing " + model.string());
  BOOST_TEST_INFO(cal.text);
  BOOST_TEST_REQUIRE(cal.status == 0);
  const paratwin::ModelSpec m = paratwin::load_model_file(model.string());
  BOOST_TEST_REQUIRE(m.moe->routing.tokens.size() == 4u);
  for (size_t l = 0; l < 4; ++l)
    BOOST_TEST(m.moe->routing.tokens[l] == routed["layers"][l]["tokens"].get<std::vector<double>>(),
               boost::test_tools::per_element());
  const Output plan = run_paratwin("plan " + scenario + " --set model=" + model.string() + " --json " +
                                   (dir.path / "plan.json").string());
  BOOST_TEST_INFO(plan.text);
  BOOST_TEST_REQUIRE(plan.status == 0);
  const json report = read_json(dir.path / "plan.json");
  if (expected_imbalance > 1) {
    BOOST_TEST(report["routing"]["imbalance"].get<double>() == expected_imbalance,
               boost::test_tools::tolerance(1e-9));
    BOOST_TEST(report["routing"]["cost_s"].get<double>() > 0);
  } else {
    BOOST_TEST(!report.contains("routing"));  // measured perfectly even: nothing to report
  }
}

BOOST_AUTO_TEST_CASE(a_dp_1_scenario_runs_as_one_rank_of_the_two_core_local_cpu) {
  // --ranks sizes the node whatever dp the file gives: a dp 1 scenario on local-cpu (2 cores) runs as
  // one rank, with the threads asked for.
  TempDir dir;
  std::stringstream text;
  text << std::ifstream(kScenario).rdbuf();
  std::string yaml = text.str();
  const size_t dp = yaml.find("  dp: 2\n");
  BOOST_TEST_REQUIRE(dp != std::string::npos);
  yaml.replace(dp, 8, "  dp: 1\n");
  std::ofstream(dir.path / "dp1.yaml") << yaml;
  const Output out =
      run_paratwin("run " + (dir.path / "dp1.yaml").string() + kSmall + " --ranks 1 --threads 2 --steps 1");
  BOOST_TEST_INFO(out.text);
  BOOST_TEST(out.status == 0);
  BOOST_TEST(out.text.find("2 threads per rank") != std::string::npos);
  BOOST_TEST(out.text.find("step     1/1  loss") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(plans_the_cpu_backend_cannot_run_exit_with_status_2) {
  // A plan no backend runs (sequence parallelism splitting 33 tokens over tp 2), and one the live
  // backend does not (a vocabulary of 255 rows over tp 2): refused with the reason.
  const Output sp =
      run_paratwin("run " + kScenario +
                   " --set plan.tp=2 --set plan.sequence_parallel=true --set training.seq_len=33"
                   " --ranks 1 --steps 1");
  BOOST_TEST(sp.status == 2);
  BOOST_TEST(sp.text.find("sequence_parallel splits each sequence's 33 tokens") != std::string::npos);
  const Output vocab =
      run_paratwin("run " + kScenario + " --set model.vocab=255 --set plan.tp=2 --ranks 1 --steps 1");
  BOOST_TEST(vocab.status == 2);
  BOOST_TEST(vocab.text.find("tp 2 does not divide the model's vocabulary (255 tokens)") !=
             std::string::npos);
  // --backend cuda: refused without the toolkit or a GPU, and on a GPU machine for a CPU cluster.
  const Output cuda = run_paratwin("run " + kScenario + " --backend cuda");
  BOOST_TEST(cuda.status == 2);
  BOOST_TEST(cuda.text.find("--backend cuda") != std::string::npos);
  // A plan file runs with its scenario; alone it is refused with the way to run it.
  TempDir dir;
  const std::string plan = (dir.path / "plan.yaml").string();
  BOOST_TEST_REQUIRE(run_paratwin("plan " + kScenario + " -o " + plan).status == 0);
  const Output alone = run_paratwin("run " + plan);
  BOOST_TEST(alone.status == 2);
  BOOST_TEST(alone.text.find("is a plan file") != std::string::npos);
  const Output with =
      run_paratwin("run " + kScenario + " --set training.seq_len=32 --steps 2 --plan " + plan);
  BOOST_TEST_INFO(with.text);
  BOOST_TEST(with.status == 0);
}

// The optimizer's choice for a node of 4 cores runs from its plan file: the file's degrees size the
// local node and stand in for the scenario's (dp 2, micro-batch 4) in the scenario's checks.
BOOST_AUTO_TEST_CASE(the_optimizers_plan_for_a_larger_node_runs_from_its_file) {
  TempDir dir;
  const std::string moe = paratwin_test::source_dir() + "/scenarios/live-cpu-tiny-moe.yaml";
  const std::string plan = (dir.path / "plan.yaml").string();
  const Output chosen =
      run_paratwin("plan " + moe + " --set plan=auto --set cluster.pools.local.gpus_per_node=4 -o " + plan);
  BOOST_TEST_INFO(chosen.text);
  BOOST_TEST_REQUIRE(chosen.status == 0);
  const Output ran =
      run_paratwin("run " + moe + " --steps 2 --plan " + plan + " --json " + (dir.path / "r.json").string());
  BOOST_TEST_INFO(ran.text);
  BOOST_TEST_REQUIRE(ran.status == 0);
  const json r = read_json(dir.path / "r.json");
  const int world = r["plan"]["dp"].get<int>() * r["plan"]["tp"].get<int>() * r["plan"]["pp"].get<int>() *
                    r["plan"]["cp"].get<int>();
  BOOST_TEST(world == 4);
}

// A tp 2 x pp 2 plan on one data-parallel rank: four processes, a report of the job's ranks, a
// profile of pipeline rank 0's role with its sends and TP tasks, which calibrate takes.
BOOST_AUTO_TEST_CASE(a_tensor_and_pipeline_parallel_run_reports_and_profiles_for_calibrate) {
  TempDir dir;
  const std::string report = (dir.path / "r.json").string(), profile = (dir.path / "p.json").string();
  const Output out = run_paratwin("run " + kScenario + kSmall +
                                  " --set plan.tp=2 --set plan.pp=2 --ranks 1 --steps 2 --json " + report +
                                  " --profile " + profile);
  BOOST_TEST_INFO(out.text);
  BOOST_TEST_REQUIRE(out.status == 0);
  BOOST_TEST(out.text.find("tp 2 x pp 2 processes (4 in all)") != std::string::npos);
  const json r = read_json(report);
  BOOST_TEST(r["ranks"] == 4);
  BOOST_TEST(r["loss"].size() == 2u);
  const json p = read_json(profile);
  bool send = false, tp = false;
  for (const auto& t : p["tasks"]) {
    send |= t["task"] == "send F mb0 c0";
    tp |= t["task"] == "AR tp F mb0 c0";
  }
  BOOST_TEST(send);
  BOOST_TEST(tp);
  const Output cal =
      run_paratwin("calibrate " + profile + " --cluster local-cpu -o " + (dir.path / "c.yaml").string());
  BOOST_TEST_INFO(cal.text);
  BOOST_TEST(cal.status == 0);
}

BOOST_AUTO_TEST_CASE(calibrate_refuses_what_is_not_a_profile_with_status_2) {
  TempDir dir;
  const std::string out = (dir.path / "cal.yaml").string();
  const Output scenario = run_paratwin("calibrate " + kScenario + " --cluster local-cpu -o " + out);
  BOOST_TEST(scenario.status == 2);
  BOOST_TEST(scenario.text.find(kScenario + ":") == 0u);
  BOOST_TEST(scenario.text.find("is not a profile of a live run") != std::string::npos);
  const Output missing =
      run_paratwin("calibrate " + (dir.path / "none.json").string() + " --cluster local-cpu -o " + out);
  BOOST_TEST(missing.status == 2);
  BOOST_TEST(missing.text.find("none.json") != std::string::npos);
  const Output cluster = run_paratwin("calibrate " + kScenario + " --cluster local-cpus -o " + out);
  BOOST_TEST(cluster.status == 2);
  BOOST_TEST(cluster.text.find("did you mean 'local-cpu'") != std::string::npos);
  BOOST_TEST(!fs::exists(out));
}

// The twin loop: calibrate on a live run of one plan, then predict a run of another plan on this
// machine. Compute is measured as thread CPU time (medians over steps), so other processes on a
// shared machine taking the core do not stretch what is measured; what they leave behind in the
// caches does, and it changes with the load (and this VM's host), so each turn calibrates on a run
// and predicts the run of the other plan right after it, and the median over five turns of
// predicted / measured is what is checked. The host's slow bursts can last through five turns (twice
// right after a full test run, medians 1.12 and 1.14, where a quiet machine gives 1.00-1.04): a second
// set of five turns is run when the first misses, and a wrong twin misses both. See docs/calibration.md.
BOOST_AUTO_TEST_CASE(after_calibration_the_twin_predicts_another_plan_within_10_percent) {
  TempDir dir;
  // One rank on one thread: the plan predicted is one core's.
  const std::string base = kScenario + " --ranks 1 --threads 1 --set training.global_batch=8";
  // Calibration plan: micro-batch 4 x 2, sequences of 64. Other plan: micro-batch 2 x 4, sequences of
  // 128 (twice the attention per token).
  const std::string other = " --set plan.micro_batch=2 --set training.seq_len=128";
  // The twin's iteration time for the other plan on one core of a cluster file.
  const auto predict = [&](const std::string& cluster) {
    const std::string json = (dir.path / "predicted.json").string();
    BOOST_TEST_REQUIRE(run_paratwin("plan " + kScenario + " --set cluster=" + cluster +
                                    " --set cluster.pools.local.gpus_per_node=1 --set plan.dp=1" +
                                    " --set training.global_batch=8" + other + " --json " + json)
                           .status == 0);
    return read_json(json)["metrics"]["iteration_time_s"].get<double>();
  };
  // The median over five turns of predicted / measured.
  const auto five_turns = [&] {
    std::vector<double> ratios;
    for (int turn = 0; turn < 5; ++turn) {
      const std::string profile = (dir.path / ("p" + std::to_string(turn) + ".json")).string();
      BOOST_TEST_REQUIRE(run_paratwin("run " + base + " --steps 12 --profile " + profile).status == 0);
      const std::string report = (dir.path / ("r" + std::to_string(turn) + ".json")).string();
      BOOST_TEST_REQUIRE(run_paratwin("run " + base + other + " --steps 12 --json " + report).status == 0);
      std::vector<double> busy = read_json(report)["iteration_busy_s"].get<std::vector<double>>();
      std::sort(busy.begin(), busy.end());
      const double measured_s = busy[busy.size() / 2];
      const std::string cal = (dir.path / "cal.yaml").string();
      const Output fitted = run_paratwin("calibrate " + profile + " --cluster local-cpu -o " + cal);
      BOOST_TEST_INFO(fitted.text);
      BOOST_TEST_REQUIRE(fitted.status == 0);
      BOOST_TEST(fitted.text.find("dense GEMMs") != std::string::npos);
      const double predicted_s = predict(cal);
      ratios.push_back(predicted_s / measured_s);
      BOOST_TEST_MESSAGE("turn " << turn << ": micro-batch 2 x 4 of 128 tokens measured " << measured_s * 1e3
                                 << " ms per iteration, twin calibrated on 4 x 2 of 64: " << predicted_s * 1e3
                                 << " ms");
    }
    std::sort(ratios.begin(), ratios.end());
    return ratios[ratios.size() / 2];
  };
  double median = five_turns();
  if (std::abs(median - 1) >= 0.10) median = five_turns();
  BOOST_TEST_MESSAGE("uncalibrated twin: " << predict("local-cpu") * 1e3 << " ms");
  BOOST_TEST(std::abs(median - 1) < 0.10);
}
