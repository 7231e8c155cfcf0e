// Single-rank live training: the data path, the loss falling on the shipped corpus, checkpoints that
// resume bit-identically after a kill, and corrupt or truncated checkpoints rejected with a reason.
#define BOOST_TEST_MODULE exec_train
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "exec/checkpoint/checkpoint.hpp"
#include "exec/comm/local_communicator.hpp"
#include "exec/data/loader.hpp"
#include "exec/data/token_file.hpp"
#include "exec/run/live_run.hpp"
#include "exec/threads.hpp"
#include "exec/train/interpreter.hpp"
#include "exec/train/trainer.hpp"
#include "plan/spec/scenario.hpp"
#include "source_tree.hpp"

using namespace paratwin;
using namespace paratwin::exec;
namespace fs = std::filesystem;

namespace {

const std::string kCorpus = paratwin_test::source_dir() + "/data/tiny-corpus.txt";

// live-cpu-tiny on one rank, small enough for a unit test: 4 sequences of 32 tokens per step, in 2
// micro-batches (gradient accumulation), DP buckets of one layer each.
ScenarioSpec small_scenario() {
  return load_live_scenario(paratwin_test::source_dir() + "/scenarios/live-cpu-tiny.yaml",
                            {parse_override("training.global_batch=4"), parse_override("training.seq_len=32"),
                             parse_override("plan.micro_batch=2")},
                            1);
}

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

TrainOptions options(int64_t steps, const std::string& checkpoints = "") {
  TrainOptions o;
  o.steps = steps;
  o.data = kCorpus;
  o.checkpoint_dir = checkpoints;
  return o;
}

}  // namespace

BOOST_AUTO_TEST_CASE(token_files_round_trip_and_reject_what_is_not_one) {
  TempDir dir("paratwin-tokens");
  const std::string text = "Hello, world.\n";
  const auto tokens = tokenize_bytes(text);
  write_token_file((dir.path / "t.bin").string(), tokens);
  BOOST_TEST(read_token_file((dir.path / "t.bin").string()) == tokens);
  BOOST_TEST(detokenize_bytes(tokens) == text);
  BOOST_TEST(fs::file_size(dir.path / "t.bin") == 1024 + 2 * text.size());
  std::ofstream((dir.path / "bad.bin").string()) << std::string(2000, 'x');
  try {
    read_token_file((dir.path / "bad.bin").string());
    BOOST_FAIL("a file without the magic number was read");
  } catch (const std::runtime_error& e) {
    BOOST_TEST(std::string(e.what()).find("magic") != std::string::npos);
  }
  fs::resize_file(dir.path / "t.bin", 1024 + 4);
  BOOST_CHECK_THROW(read_token_file((dir.path / "t.bin").string()), std::runtime_error);
}

BOOST_AUTO_TEST_CASE(data_of_a_step_does_not_depend_on_how_it_is_split) {
  DataLoader data(load_tokens(kCorpus), 16, 256);
  std::vector<int32_t> whole_in(4 * 16), whole_out(4 * 16), part_in(2 * 16), part_out(2 * 16);
  data.fill(8, 4, whole_in.data(), whole_out.data());
  data.fill(10, 2, part_in.data(), part_out.data());
  BOOST_TEST(std::equal(part_in.begin(), part_in.end(), whole_in.begin() + 32));
  BOOST_TEST(whole_out[0] == whole_in[1]);  // targets are the next tokens
}

BOOST_AUTO_TEST_CASE(loss_on_the_shipped_corpus_falls_well_below_its_start) {
  const ScenarioSpec s = small_scenario();
  LocalCommunicator comm;
  Trainer trainer(s, complete_plan(s), comm, options(25));
  const RunResult r = trainer.run();
  BOOST_TEST_REQUIRE(r.losses.size() == 25u);
  BOOST_TEST(std::abs(r.losses.front() - std::log(256.0)) < 0.2);  // starts near uniform
  BOOST_TEST(r.losses.back() < 0.6 * r.losses.front());
}

BOOST_AUTO_TEST_CASE(an_fp16_scenario_runs_its_overflow_check_and_trains_as_without_it) {
  // The CPU backend computes in fp32: the Program's overflow flag is summed every step and never set,
  // so the steps are the fp32 run's, to the bit.
  ScenarioSpec fp16 = small_scenario();
  fp16.training.precision = Precision::Fp16;
  for (auto& [name, device] : fp16.cluster.devices)  // a CPU has no fp16 rate: the twin's is not at stake
    device.peak[Precision::Fp16] = device.peak.at(Precision::Fp32);
  const Program program = lower(complete_plan(fp16), fp16.model, fp16.cluster, fp16.training);
  BOOST_TEST(std::count_if(program.roles.front().tasks.begin(), program.roles.front().tasks.end(),
                           [](const Task& t) { return t.purpose == Purpose::OverflowCheck; }) == 1);
  std::vector<std::vector<double>> losses;
  for (const ScenarioSpec& s : {small_scenario(), fp16}) {
    LocalCommunicator comm;
    Trainer trainer(s, complete_plan(s), comm, options(4));
    losses.push_back(trainer.run().losses);
  }
  BOOST_TEST(losses[0] == losses[1]);
}

BOOST_AUTO_TEST_CASE(one_rank_on_two_threads_follows_one_thread_within_1e_5) {
  // The same run on 1 and on 2 threads of one rank: every kernel cuts its work into pieces whose bounds
  // do not depend on the threads, so only the GEMMs' own splits may round differently.
  const ScenarioSpec s = small_scenario();
  const Plan plan = complete_plan(s);
  LocalCommunicator comm;
  std::vector<std::vector<double>> losses;
  std::vector<double> weights_sum;
  for (int threads : {1, 2}) {
    set_rank_threads(threads);
    BOOST_TEST_REQUIRE(rank_threads() == threads);
    Trainer trainer(s, plan, comm, options(10));
    losses.push_back(trainer.run().losses);
    double sum = 0;
    for (float w : trainer.weights()) sum += double(w) * w;
    weights_sum.push_back(sum);
  }
  set_rank_threads(1);
  BOOST_TEST_REQUIRE(losses[0].size() == 10u);
  BOOST_TEST_REQUIRE(losses[1].size() == 10u);
  double worst = 0;
  for (size_t i = 0; i < 10; ++i) worst = std::max(worst, std::abs(losses[1][i] / losses[0][i] - 1));
  BOOST_TEST_MESSAGE("2 threads against 1 over 10 steps: worst relative loss difference " << worst);
  for (size_t i = 0; i < 10; ++i) {
    BOOST_TEST_INFO("step " << i + 1 << ": 1 thread " << losses[0][i] << ", 2 threads " << losses[1][i]);
    BOOST_TEST(std::abs(losses[1][i] - losses[0][i]) <= 1e-5 * std::abs(losses[0][i]));
  }
  BOOST_TEST(std::abs(weights_sum[1] - weights_sum[0]) <= 1e-5 * weights_sum[0]);
  BOOST_TEST(losses[0].back() < losses[0].front());  // it trained
}

BOOST_AUTO_TEST_CASE(a_run_killed_between_checkpoints_resumes_bit_identical) {
  const ScenarioSpec s = small_scenario();
  const Plan plan = complete_plan(s);
  LocalCommunicator comm;
  TempDir whole("paratwin-ckpt-whole"), killed("paratwin-ckpt-killed");

  TrainOptions o = options(6, whole.path.string());
  o.checkpoint_every = 2;
  Trainer uninterrupted(s, plan, comm, o);
  const RunResult expected = uninterrupted.run();

  o.checkpoint_dir = killed.path.string();
  o.stop_after = 5;  // killed after step 5: the checkpoint of step 4 is the newest
  Trainer first(s, plan, comm, o);
  first.run();
  o.stop_after = -1;
  o.resume = true;
  Trainer second(s, plan, comm, o);
  const RunResult resumed = second.run();
  BOOST_TEST(resumed.resumed_from == 4);
  BOOST_TEST(resumed.lost_steps == 1);
  BOOST_TEST(resumed.losses == expected.losses);  // exact: the same computation in the same order
  BOOST_TEST(second.weights() == uninterrupted.weights());
}

BOOST_AUTO_TEST_CASE(corrupt_and_truncated_checkpoints_are_rejected_with_a_reason) {
  const ScenarioSpec s = small_scenario();
  LocalCommunicator comm;
  TempDir dir("paratwin-ckpt-corrupt");
  TrainOptions o = options(3, dir.path.string());
  o.checkpoint_every = 1;
  Trainer trainer(s, complete_plan(s), comm, o);
  trainer.run();
  const size_t n = trainer.weights().size();
  BOOST_TEST(load_latest_checkpoint(dir.path.string(), n).state->step == 3);

  // Flip one bit of the newest weights: it is skipped, the one before is taken.
  const fs::path newest = dir.path / "step-00000003" / "weights.bin";
  {
    std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1000);
    char c = 0;
    f.read(&c, 1);
    f.seekp(1000);
    c ^= 0x10;
    f.write(&c, 1);
  }
  CheckpointSearch found = load_latest_checkpoint(dir.path.string(), n);
  BOOST_TEST_REQUIRE(found.state.has_value());
  BOOST_TEST(found.state->step == 2);
  BOOST_TEST_REQUIRE(found.rejected.size() == 1u);
  BOOST_TEST(found.rejected[0].find("step-00000003: weights.bin is corrupt: checksum") != std::string::npos);

  // Truncate the next one's optimizer state and remove the oldest's manifest (an unfinished write).
  fs::resize_file(dir.path / "step-00000002" / "optimizer.bin", 100);
  fs::remove(dir.path / "step-00000001" / "MANIFEST.json");
  found = load_latest_checkpoint(dir.path.string(), n);
  BOOST_TEST(!found.state.has_value());
  BOOST_TEST_REQUIRE(found.rejected.size() == 3u);
  BOOST_TEST(found.rejected[1].find("optimizer.bin is truncated") != std::string::npos);
  BOOST_TEST(found.rejected[2].find("MANIFEST.json is missing") != std::string::npos);

  // A checkpoint of another model's size is refused too.
  BOOST_TEST(load_latest_checkpoint(dir.path.string(), n + 1).state.has_value() == false);
}

BOOST_AUTO_TEST_CASE(plans_the_cpu_backend_cannot_run_are_refused_with_a_reason) {
  ScenarioSpec s = load_scenario(
      paratwin_test::source_dir() + "/scenarios/live-cpu-tiny.yaml",
      {parse_override("plan.dp=1"), parse_override("plan.cp=2"), parse_override("plan.micro_batch=4"),
       parse_override("training.global_batch=8"), parse_override("plan.recompute=full")});
  BOOST_TEST(s.cluster.gpus() == 2);
  LocalCommunicator comm;
  try {
    Trainer t(s, complete_plan(s), comm, options(1));
    BOOST_FAIL("a plan for 2 ranks was accepted on 1");
  } catch (const std::invalid_argument& e) {
    // Recomputation runs beside CP: what is refused is the rank count, and only that.
    BOOST_TEST(std::string(e.what()).find("dp x tp x pp x cp = 2 but 1 ranks run it") != std::string::npos);
    BOOST_TEST(std::string(e.what()).find("not implemented live") == std::string::npos);
  }
}

// One list of limits per backend, which `paratwin run` reads before mpirun starts a rank: what the CPU
// backend runs and the CUDA one does not yet is each named.
BOOST_AUTO_TEST_CASE(each_limit_of_the_cuda_backend_is_named_in_the_list_read_before_launch) {
  const ScenarioSpec s = small_scenario();
  Plan p = complete_plan(s);
  BOOST_TEST(live_limitations(p, s.model, LiveBackend::Cuda).empty());  // data parallelism: both run it
  p.tp = 2;
  p.zero = 3;
  p.offload_optimizer = p.offload_activations = true;
  p.compression.kind = CompressionKind::TopK;
  p.stages.front().recompute = Recompute::Selective;
  BOOST_TEST(live_limitations(p, s.model, LiveBackend::Cpu).empty());
  // The CPU backend reshards ZeRO 3 as plan.reshard says, whichever it is.
  Plan kept = p;
  for (Reshard reshard : {Reshard::AfterBackward, Reshard::AfterStep}) {
    kept.reshard = reshard;
    BOOST_TEST(live_limitations(kept, s.model, LiveBackend::Cpu).empty());
  }
  std::string cuda;
  for (const auto& l : live_limitations(p, s.model, LiveBackend::Cuda)) cuda += l + "\n";
  BOOST_TEST_INFO(cuda);
  for (const char* named : {"data parallelism only", "ZeRO 0-2", "offload the optimizer",
                            "offload activations", "compress gradients", "does not recompute"})
    BOOST_TEST(cuda.find(named) != std::string::npos);
  const ScenarioSpec moe = load_scenario(paratwin_test::source_dir() + "/scenarios/live-cpu-tiny-moe.yaml");
  std::string moe_limits;
  for (const auto& l : live_limitations(complete_plan(moe), moe.model, LiveBackend::Cuda))
    moe_limits += l + "\n";
  BOOST_TEST(moe_limits.find("dense models only") != std::string::npos);
  // ZeRO 2 reduce-scatters every micro-batch's gradients over several replicas: the CUDA runner reduces
  // once a step, so it runs it with one micro-batch only.
  Plan zero2 = complete_plan(s);
  zero2.zero = 2;
  zero2.dp = 2;
  zero2.num_microbatches = 2;
  const auto named_zero2 = [&](const Plan& plan) {
    for (const auto& l : live_limitations(plan, s.model, LiveBackend::Cuda))
      if (l.find("ZeRO 2 reduce-scatters each of the 2 micro-batches'") != std::string::npos) return true;
    return false;
  };
  BOOST_TEST(named_zero2(zero2));
  BOOST_TEST(live_limitations(zero2, s.model, LiveBackend::Cpu).empty());
  zero2.num_microbatches = 1;
  BOOST_TEST(!named_zero2(zero2));
  BOOST_TEST(live_limitations(zero2, s.model, LiveBackend::Cuda).empty());
}

// Every recompute mode runs on the CPU backend (each layer recomputes whole, per operator, the modules
// selective recomputation lists or nothing; which layers, recompute_every and recompute_layers say); the
// CUDA backend recomputes nothing yet.
BOOST_AUTO_TEST_CASE(the_cpu_backend_runs_every_recompute_mode) {
  const ScenarioSpec s = small_scenario();
  Plan p = complete_plan(s);
  const auto limits = [&](const Plan& plan) {
    std::string all;
    for (const auto& l : live_limitations(plan, s.model, LiveBackend::Cpu)) all += l + "\n";
    return all;
  };
  p.stages.front().recompute = Recompute::Op;
  BOOST_TEST(limits(p).empty(), limits(p));
  BOOST_TEST(!live_limitations(p, s.model, LiveBackend::Cuda).empty());
  p.stages.front().recompute = Recompute::Full;
  p.stages.front().recompute_every = 2;
  BOOST_TEST(limits(p).empty(), limits(p));
  p.stages.front().recompute_every = 1;
  p.stages.front().recompute_layers = 1;  // Megatron-LM's block method
  BOOST_TEST(limits(p).empty(), limits(p));
  p.stages.front().recompute_layers = 0;
  // Megatron-Core's recompute modules beyond the attention core likewise.
  p.stages.front().recompute = Recompute::Selective;
  BOOST_TEST(limits(p).empty());
  p.stages.front().recompute_modules.moe_act = true;
  BOOST_TEST(limits(p).empty(), limits(p));
}

// Combined 1F1B runs live at pp 1 and under the interleaved schedule (test_exec_ep runs both); the CUDA
// backend runs no MoE model.
BOOST_AUTO_TEST_CASE(the_cpu_backend_runs_combined_1f1b_at_any_pp) {
  const ScenarioSpec s = load_scenario(paratwin_test::source_dir() + "/scenarios/live-cpu-tiny-moe.yaml");
  Plan p = complete_plan(s);
  p.overlap_ep = true;
  p.pp = 1;
  BOOST_TEST(live_limitations(p, s.model, LiveBackend::Cpu).empty());
  p.pp = 2;
  p.schedule = Schedule::Interleaved;
  BOOST_TEST(live_limitations(p, s.model, LiveBackend::Cpu).empty());
  BOOST_TEST(!live_limitations(p, s.model, LiveBackend::Cuda).empty());
}

// ALiBi, sliding windows and YaRN run on the CPU backend; the CUDA backend's attention and rotary
// embedding have none of them, so it refuses them before launch.
BOOST_AUTO_TEST_CASE(the_cuda_backend_refuses_alibi_sliding_windows_and_yarn_before_launch) {
  ScenarioSpec s = small_scenario();
  const Plan p = complete_plan(s);
  s.model.position = PositionKind::Alibi;
  s.model.sliding_window = 8;
  BOOST_TEST(live_limitations(p, s.model, LiveBackend::Cpu).empty());
  std::string all;
  for (const auto& l : live_limitations(p, s.model, LiveBackend::Cuda)) all += l + "\n";
  BOOST_TEST(all.find("position alibi runs on the CPU") != std::string::npos, all);
  BOOST_TEST(all.find("sliding_window runs on the CPU") != std::string::npos, all);
  s.model.position = PositionKind::Rope;
  s.model.sliding_window = 0;
  s.model.yarn_factor = 32;
  BOOST_TEST(live_limitations(p, s.model, LiveBackend::Cpu).empty());
  all.clear();
  for (const auto& l : live_limitations(p, s.model, LiveBackend::Cuda)) all += l + "\n";
  BOOST_TEST(all.find("yarn_factor runs on the CPU") != std::string::npos, all);
}

namespace {

// Records the order in which the interpreter starts, polls and finishes tasks; communication
// completes only when waited for, the slowest network there is.
class RecordingRunner final : public TaskRunner {
 public:
  std::vector<std::string> events;
  void compute(int, const Task& t) override { events.push_back("run " + t.name); }
  int start(int i, const Task& t) override {
    events.push_back("start " + t.name);
    return i;
  }
  bool poll(int) override { return false; }
  void finish(int h) override { events.push_back("finish " + std::to_string(h)); }
};

}  // namespace

BOOST_AUTO_TEST_CASE(gradient_buckets_start_while_the_backward_of_earlier_layers_runs) {
  const ScenarioSpec s = load_live_scenario(paratwin_test::source_dir() + "/scenarios/live-cpu-tiny.yaml",
                                            {parse_override("plan.bucket_size=200KB")}, 2);
  const Program p = lower(complete_plan(s), s.model, s.cluster, s.training);
  RecordingRunner runner;
  const std::vector<TaskSpan> spans = run_iteration(p.roles.front(), runner);
  const auto at = [&](const std::string& e) {
    return std::find(runner.events.begin(), runner.events.end(), e) - runner.events.begin();
  };
  // Each bucket starts right after the segment that finalizes it, before the next segment runs.
  BOOST_TEST(at("start AR dp bucket0") == at("run B mb0 c0 L3-4") + 1);
  BOOST_TEST(at("start AR dp bucket1") == at("run B mb0 c0 L2-3") + 1);
  BOOST_TEST(at("start AR dp bucket2") < at("run B mb0 c0 L0-1"));
  // The forward waits for its micro-batch, loaded on the copy stream before anything else.
  BOOST_TEST(runner.events.front() == "start copy h2d batch mb0 c0");
  BOOST_TEST(at("finish 0") < at("run F mb0 c0"));
  // The gradient norm's all-reduce waits for all four buckets, the optimizer for it, and runs last.
  BOOST_TEST(runner.events.back() == "run optimizer step");
  const auto finishes = [&](auto end) {
    return std::count_if(runner.events.begin(), end,
                         [](const std::string& e) { return e.rfind("finish", 0) == 0; });
  };
  BOOST_TEST(finishes(runner.events.end()) == 6);
  BOOST_TEST(finishes(runner.events.begin() + at("start AR world gradient norm")) == 5);
  BOOST_TEST(spans.size() == p.roles.front().tasks.size());
}

BOOST_AUTO_TEST_CASE(without_a_step_interval_checkpoints_follow_the_plans_checkpoint_interval) {
  // A 1 ms interval: every step is past it, so every step writes one (the last as the final one).
  const ScenarioSpec s = load_live_scenario(
      paratwin_test::source_dir() + "/scenarios/live-cpu-tiny.yaml",
      {parse_override("training.global_batch=2"), parse_override("training.seq_len=16"),
       parse_override("plan.micro_batch=2"), parse_override("plan.checkpoint_interval=1ms")},
      1);
  LocalCommunicator comm;
  TempDir dir("paratwin-ckpt-interval");
  Trainer trainer(s, complete_plan(s), comm, options(3, dir.path.string()));
  const RunResult r = trainer.run();
  BOOST_TEST(r.checkpoints_written == 3);
  BOOST_TEST(fs::exists(dir.path / "step-00000001" / "MANIFEST.json"));
  BOOST_TEST(fs::exists(dir.path / "step-00000003" / "MANIFEST.json"));
  BOOST_TEST(r.checkpoint_seconds > 0);
}
