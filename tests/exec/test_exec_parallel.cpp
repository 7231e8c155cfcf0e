// Tensor, pipeline and context parallelism against one rank, run under mpirun: every layout of tp, pp
// (with each schedule), cp, dp, ZeRO and recomputation trains the same global batches from the same
// initial weights, so its loss trajectory must be the single rank's within float rounding. The default
// entry (4 ranks) runs a representative subset; `ctest -L long` runs the cross product on 8 ranks. A
// run checkpointed under tp x pp resumes under another layout; optimizer offload and top-k compression
// run under tp x pp too; ZeRO 3, recomputation and optimizer offload under cp (alone and with dp, tp, pp);
// HSDP's shard groups and replicas.
#define BOOST_TEST_MODULE exec_parallel
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "exec/comm/communicator.hpp"
#include "exec/gpt/context_parallel.hpp"
#include "exec/run/live_run.hpp"
#include "exec/train/trainer.hpp"
#include "mpi_fixture.hpp"
#include "source_tree.hpp"

using namespace paratwin;
using namespace paratwin::exec;
using paratwin::exec::test::mpi;
namespace fs = std::filesystem;

namespace {

struct Layout {
  int tp = 1, pp = 1, dp = 1, zero = 0;
  std::string schedule = "1f1b";
  bool sp = false;      // sequence parallelism
  bool overlap = true;  // plan.overlap.{dp,tp,pp}: off, sends and receives run on the compute stream
  int cp = 1;           // context parallelism
  std::string recompute = "none";
  std::vector<std::string> extra = {};  // further overrides (offload, compression)
  int world() const { return tp * pp * dp * cp; }
  std::string text() const {
    return "tp" + std::to_string(tp) + " pp" + std::to_string(pp) + " " + schedule + " dp" +
           std::to_string(dp) + " zero" + std::to_string(zero) + (sp ? " sp" : "") +
           (overlap ? "" : " no-overlap") + (cp > 1 ? " cp" + std::to_string(cp) : "") +
           (recompute == "none" ? "" : " recompute-" + recompute) + extra_text();
  }
  std::string extra_text() const {
    std::string out;
    for (const std::string& o : extra) out += " " + o.substr(o.find('.') + 1);  // "offload.activations=true"
    return out;
  }
};

// 8 sequences of 32 tokens per step in micro-batches of 2; 200 KB buckets (about one per layer).
ScenarioSpec scenario(const Layout& l) {
  std::vector<Override> sets = {
      parse_override("training.global_batch=8"),
      parse_override("training.seq_len=32"),
      parse_override("plan.micro_batch=2"),
      parse_override("plan.bucket_size=200KB"),
      parse_override("plan.zero=" + std::to_string(l.zero)),
      parse_override("plan.tp=" + std::to_string(l.tp)),
      parse_override("plan.pp=" + std::to_string(l.pp)),
      parse_override("plan.cp=" + std::to_string(l.cp)),
      parse_override("plan.schedule=" + l.schedule),
      parse_override("plan.virtual_stages=" + std::string(l.schedule == "interleaved" ? "2" : "1")),
      parse_override(std::string("plan.sequence_parallel=") + (l.sp ? "true" : "false")),
      parse_override("plan.recompute=" + l.recompute)};
  for (const std::string& o : l.extra) sets.push_back(parse_override(o));
  if (!l.overlap)
    for (const char* o : {"plan.overlap.dp=false", "plan.overlap.pp=false", "plan.overlap.tp=true"})
      sets.push_back(parse_override(o));
  return load_live_scenario(paratwin_test::source_dir() + "/scenarios/live-cpu-tiny.yaml", sets, l.dp);
}

TrainOptions options(int64_t steps) {
  TrainOptions o;
  o.steps = steps;
  o.data = paratwin_test::source_dir() + "/data/tiny-corpus.txt";
  return o;
}

// Trains the layout on the first ranks of the job; every rank of the job gets the loss trajectory
// (and, if asked, rank 0's DP bytes of each step).
std::vector<double> train(const Layout& l, TrainOptions o, int64_t* resumed_from = nullptr,
                          std::vector<double>* dp_bytes = nullptr) {
  std::vector<double> losses(size_t(o.steps), 0.0), bytes(size_t(o.steps), 0.0);
  double from = -1;
  auto group = mpi->world->split(mpi->world->rank() < l.world() ? 0 : -1);
  if (group) {
    const ScenarioSpec s = scenario(l);
    Trainer trainer(s, complete_plan(s), *group, o);
    const RunResult r = trainer.run();
    if (r.losses.size() == losses.size()) losses = r.losses;
    if (r.dp_bytes.size() == bytes.size()) bytes = r.dp_bytes;
    from = double(r.resumed_from);
  }
  mpi->world->broadcast(losses.data(), losses.size() * sizeof(double), 0);
  mpi->world->broadcast(bytes.data(), bytes.size() * sizeof(double), 0);
  mpi->world->broadcast(&from, sizeof from, 0);
  if (resumed_from) *resumed_from = int64_t(from);
  if (dp_bytes) *dp_bytes = bytes;
  return losses;
}

// One rank's trajectory over `steps` (the learning-rate schedule spans the run: each length its own).
const std::vector<double>& single_rank(int64_t steps = 10) {
  static std::map<int64_t, std::vector<double>> runs;
  auto it = runs.find(steps);
  if (it == runs.end()) it = runs.emplace(steps, train(Layout{}, options(steps))).first;
  return it->second;
}

double worst_relative_error(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double error = std::abs(a[i] - b[i]) / std::abs(a[i]);
    if (!(error <= worst)) worst = error;  // a NaN loss is the worst there is (std::max would drop it)
  }
  return worst;
}

// Runs each layout that fits in the job for `steps` and checks it against one rank; returns the
// worst error.
double check_layouts(const std::vector<Layout>& layouts, int64_t steps) {
  const std::vector<double>& one = single_rank(steps);
  BOOST_TEST_REQUIRE(one.back() < one.front());
  double worst = 0;
  for (const Layout& l : layouts) {
    if (l.world() > mpi->world->size()) continue;
    const std::vector<double> got = train(l, options(steps));
    const double error = worst_relative_error(one, got);
    worst = std::max(worst, error);
    if (mpi->world->rank() == 0) std::printf("%-34s worst relative error %.2e\n", l.text().c_str(), error);
    BOOST_TEST_INFO(l.text() << ": first loss " << got.front() << " vs " << one.front() << ", last "
                             << got.back() << " vs " << one.back());
    BOOST_TEST(error < 1e-5);
  }
  return worst;
}

}  // namespace

BOOST_AUTO_TEST_CASE(each_pipeline_rank_gets_its_own_role_with_sends_and_receives) {
  const ScenarioSpec s = scenario({2, 2, 1, 0, "1f1b"});
  const Program p = lower(complete_plan(s), s.model, s.cluster, s.training);
  BOOST_TEST_REQUIRE(p.roles.size() == 2u);
  int sends = 0, recvs = 0, tp = 0;
  for (const Task& t : p.roles[0].tasks) {
    sends += t.kind == TaskKind::Send;
    recvs += t.kind == TaskKind::Recv;
    tp += t.kind == TaskKind::Collective && t.group == GroupKind::Tp;
  }
  BOOST_TEST(sends == 4);  // the forward of each of 4 micro-batches
  BOOST_TEST(recvs == 4);  // and its gradient back
  BOOST_TEST(tp == 8);     // each pass's TP all-reduces, folded into one task
}

BOOST_AUTO_TEST_CASE(tensor_and_pipeline_parallel_layouts_follow_the_single_rank_trajectory) {
  // 5 steps each (the whole cross product runs 10); tp 2 x pp 2 under 1F1B trains in the resume test.
  check_layouts({{2, 1, 1, 0, "1f1b"},
                 {1, 2, 1, 0, "gpipe"},
                 {1, 2, 2, 1, "1f1b"},
                 {2, 1, 2, 2, "1f1b"},
                 {2, 2, 1, 0, "interleaved", true},
                 {1, 2, 2, 1, "interleaved", false, false},
                 {1, 1, 1, 0, "1f1b", false, true, 2},
                 {2, 1, 1, 0, "1f1b", false, true, 2}},
                5);
}

BOOST_AUTO_TEST_CASE(zero3_and_recomputation_under_tp_and_pp_follow_the_single_rank_trajectory) {
  check_layouts({{2, 1, 2, 3, "1f1b", true, true, 1, "selective"},
                 {1, 2, 2, 3, "interleaved", false, true, 1, "full"},
                 {1, 2, 2, 3, "gpipe", false, false},
                 {2, 2, 1, 0, "1f1b", false, true, 1, "full"}},
                5);
}

// HSDP: ZeRO 3 within shard groups, each reduced block summed over the replicas (2 replicas of a 2-way
// shard group; of a 1-way group, every rank whole; and under a pipeline with recomputation).
BOOST_AUTO_TEST_CASE(hsdp_replicas_of_zero3_shard_groups_follow_the_single_rank_trajectory) {
  check_layouts({{1, 1, 4, 3, "1f1b", false, true, 1, "none", {"plan.dp_replicate=2"}},
                 {1, 1, 2, 3, "1f1b", false, true, 1, "none", {"plan.dp_replicate=2"}},
                 {1, 2, 2, 3, "1f1b", false, true, 1, "full", {"plan.dp_replicate=2"}}},
                5);
  // Rank 0 sends the twin's DP bytes each step: its shard group's gathers and reduce-scatters and the
  // replicas' all-reduces. (ZeRO 3 gathers the tied embedding again with the head's layer, which the
  // twin does not count, as in test_exec_memory_modes.)
  const Layout hybrid{1, 1, 4, 3, "1f1b", false, true, 1, "none", {"plan.dp_replicate=2"}};
  if (hybrid.world() > mpi->world->size()) return;
  std::vector<double> sent;
  train(hybrid, options(2), nullptr, &sent);
  const ScenarioSpec s = scenario(hybrid);
  const Program program = lower(complete_plan(s), s.model, s.cluster, s.training);
  double twin = 0, replicas = 0;
  for (const Task& t : program.roles[0].tasks)
    if (t.kind == TaskKind::Collective && (t.group == GroupKind::Dp || t.group == GroupKind::DpReplicate)) {
      twin += t.bytes.value() * t.count;
      if (t.group == GroupKind::DpReplicate) replicas += t.bytes.value() * t.count;
    }
  BOOST_TEST(replicas > 0);
  if (mpi->world->rank() == 0)
    std::printf("%-34s DP bytes a step %.0f, twin %.0f (replicas' all-reduces %.0f)\n", hybrid.text().c_str(),
                sent.back(), twin, replicas);
  BOOST_TEST(std::abs(sent.back() - twin) < 0.05 * twin);
}

BOOST_AUTO_TEST_CASE(optimizer_offload_under_tp_and_pp_leaves_the_trajectory_unchanged) {
  Layout kept{1, 2, 2, 2, "1f1b"};
  Layout offloaded = kept;
  offloaded.extra = {"plan.offload.optimizer=true"};
  if (offloaded.world() > mpi->world->size()) return;
  const std::vector<double> a = train(kept, options(3)), b = train(offloaded, options(3));
  for (size_t i = 0; i < a.size(); ++i) BOOST_TEST(a[i] == b[i]);  // the same values, copied around
}

BOOST_AUTO_TEST_CASE(activation_offload_under_dp_tp_and_pp_follows_the_single_rank_trajectory) {
  // Alone under dp 2, tp 2 and pp 2 with each schedule; beside ZeRO, recomputation, sequence
  // parallelism and sends on the compute stream (no overlap).
  std::vector<Layout> layouts{{1, 1, 2, 0, "1f1b"},
                              {2, 1, 1, 0, "1f1b"},
                              {1, 2, 1, 0, "1f1b"},
                              {1, 2, 1, 0, "gpipe"},
                              {1, 2, 1, 0, "interleaved"},
                              {1, 2, 2, 3, "interleaved", false, true, 1, "full"},
                              {2, 1, 2, 2, "1f1b", true, true, 1, "selective"},
                              {2, 2, 1, 0, "1f1b", false, false},
                              {1, 2, 2, 1, "gpipe", false, true, 1, "none", {"plan.offload.optimizer=true"}},
                              {1, 1, 1, 0, "1f1b", false, true, 2},
                              {1, 2, 1, 0, "interleaved", false, true, 2, "selective"},
                              {1, 1, 2, 3, "1f1b", false, true, 2, "full"}};
  for (Layout& l : layouts) l.extra.push_back("plan.offload.activations=true");
  check_layouts(layouts, 10);
}

BOOST_AUTO_TEST_CASE(top_k_under_tp_and_pp_trains_and_sends_the_single_shard_bytes) {
  Layout dense{1, 2, 2, 0, "1f1b"};
  Layout sparse = dense;
  sparse.extra = {"plan.compression={kind: topk, ratio: 0.1, warmup_steps: 2}"};
  if (sparse.world() > mpi->world->size()) return;
  std::vector<double> dense_bytes, sparse_bytes;
  const std::vector<double> d = train(dense, options(6), nullptr, &dense_bytes);
  const std::vector<double> s = train(sparse, options(6), nullptr, &sparse_bytes);
  BOOST_TEST_MESSAGE("top-k 10% under pp 2 x dp 2: loss "
                     << s.front() << " -> " << s.back() << ", dense " << d.back() << "; DP bytes per step "
                     << sparse_bytes.back() << ", dense " << dense_bytes.back());
  BOOST_TEST(s.back() < s.front());
  BOOST_TEST(std::abs(s.back() - d.back()) < 0.05 * d.back());
  BOOST_TEST(sparse_bytes.front() == dense_bytes.front());  // the warm-up is dense
  // As on one shard: 2 ranks x 10% x (4 + 4) bytes a pair, 40% of the dense 4 bytes a gradient.
  BOOST_TEST(std::abs(sparse_bytes.back() / dense_bytes.back() - 0.4) < 0.01);
}

BOOST_AUTO_TEST_CASE(context_parallel_with_zero3_recompute_and_offload_follows_the_single_rank_trajectory) {
  // ZeRO shards and gathers over dp x cp ranks (the Program's DP group); selective recomputation
  // attends again over the keys and values the forward gathered, full recomputation gathers them again.
  const std::vector<std::string> offload = {"plan.offload.optimizer=true"};
  check_layouts({{1, 1, 1, 3, "1f1b", false, true, 2},
                 {1, 1, 1, 0, "1f1b", false, true, 2, "selective"},
                 {1, 1, 1, 1, "1f1b", false, true, 2, "full", offload},
                 {1, 1, 2, 3, "1f1b", false, true, 2, "selective", offload},
                 {1, 1, 2, 2, "1f1b", false, false, 2, "full"},
                 {2, 1, 1, 3, "1f1b", true, true, 2, "full"},
                 {1, 2, 1, 3, "interleaved", false, true, 2, "selective", offload},
                 {1, 2, 1, 3, "gpipe", false, false, 2, "full"}},
                10);
}

BOOST_AUTO_TEST_CASE(context_parallel_ranks_take_a_front_and_a_back_chunk_of_each_sequence) {
  BOOST_TEST(context_positions(8, 2, 0) == (std::vector<int>{0, 1, 6, 7}), boost::test_tools::per_element());
  BOOST_TEST(context_positions(8, 2, 1) == (std::vector<int>{2, 3, 4, 5}), boost::test_tools::per_element());
  BOOST_TEST(context_positions(8, 1, 0) == (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}),
             boost::test_tools::per_element());
  BOOST_CHECK_THROW(context_positions(6, 2, 0), std::invalid_argument);  // 4 chunks of 1.5 tokens
}

BOOST_AUTO_TEST_CASE(context_parallel_program_gathers_keys_and_values_and_reduces_gradients_over_dp_x_cp) {
  Layout l;
  l.cp = 2;
  const ScenarioSpec s = scenario(l);
  const Program p = lower(complete_plan(s), s.model, s.cluster, s.training);
  int gathers = 0, scatters = 0, buckets = 0, backwards = 0;
  for (const Task& t : p.roles.at(0).tasks) {
    backwards += t.kind == TaskKind::Backward;
    gathers += t.group == GroupKind::Cp && t.collective == cost::CollectiveKind::AllGather;
    scatters += t.group == GroupKind::Cp && t.collective == cost::CollectiveKind::ReduceScatter;
    if (t.group == GroupKind::Dp) {
      ++buckets;
      BOOST_TEST(t.placement.size == 2);  // dp 1 x cp 2: the CP ranks' gradients are summed
    }
  }
  BOOST_TEST(gathers == 4);           // the forward of each of 4 micro-batches
  BOOST_TEST(scatters == backwards);  // each backward pass (the last one cut in bucket segments)
  BOOST_TEST(buckets > 0);
}

BOOST_AUTO_TEST_CASE(a_run_checkpointed_under_tp_and_pp_resumes_on_data_parallel_ranks) {
  if (mpi->world->size() < 4) return;
  double pid = mpi->world->rank() == 0 ? double(::getpid()) : 0;
  mpi->world->broadcast(&pid, sizeof pid, 0);
  const fs::path dir = fs::temp_directory_path() / ("paratwin-tp-resume-" + std::to_string(long(pid)));
  TrainOptions o = options(10);
  o.checkpoint_dir = dir.string();
  o.checkpoint_every = 4;
  o.stop_after = 5;  // stops after step 5; the newest checkpoint is step 4
  train({2, 2, 1, 0, "1f1b"}, o);
  o.stop_after = -1;
  o.resume = true;
  int64_t from = -1;
  const std::vector<double> resumed = train({1, 1, 2, 1, "1f1b"}, o, &from);
  BOOST_TEST(from == 4);
  BOOST_TEST(worst_relative_error(single_rank(), resumed) < 1e-5);
  mpi->world->barrier();
  if (mpi->world->rank() == 0) fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_zero3_run_with_offload_under_pp_resumes_from_its_checkpoint) {
  Layout l{1, 2, 2, 3, "1f1b"};
  l.extra = {"plan.offload.optimizer=true"};
  if (l.world() > mpi->world->size()) return;
  double pid = mpi->world->rank() == 0 ? double(::getpid()) : 0;
  mpi->world->broadcast(&pid, sizeof pid, 0);
  const fs::path dir = fs::temp_directory_path() / ("paratwin-zero3-resume-" + std::to_string(long(pid)));
  TrainOptions o = options(10);
  o.checkpoint_dir = dir.string();
  o.checkpoint_every = 4;
  o.stop_after = 5;  // the gathered shard and the offloaded moments go into the step-4 checkpoint
  train(l, o);
  o.stop_after = -1;
  o.resume = true;
  int64_t from = -1;
  const std::vector<double> resumed = train(l, o, &from);
  BOOST_TEST(from == 4);
  BOOST_TEST(worst_relative_error(single_rank(), resumed) < 1e-5);
  mpi->world->barrier();
  if (mpi->world->rank() == 0) fs::remove_all(dir);
}

// `ctest -L long`: every combination of tp {1,2} (with and without sequence parallelism), pp {1,2}
// with each schedule, dp {1,2}, ZeRO 0-3 and recompute none/selective/full; tp 2 x pp 2 x dp 2
// without overlap under each schedule and ZeRO stage; context parallelism 2 on a sample of layouts,
// with and without the memory modes.
BOOST_AUTO_TEST_CASE(the_whole_cross_product_follows_the_single_rank_trajectory) {
  std::vector<Layout> all;
  for (int tp : {1, 2})
    for (int pp : {1, 2})
      for (const char* schedule : {"gpipe", "1f1b", "interleaved"})
        for (int dp : {1, 2})
          for (int zero : {0, 1, 2, 3})
            for (bool sp : {false, true})
              for (const char* recompute : {"none", "selective", "full"}) {
                if (pp == 1 && std::string(schedule) == "interleaved") continue;  // needs two stages
                if (dp == 1 && zero > 0) continue;                                // nothing to shard
                if (sp && tp == 1) continue;                                      // nothing to split
                Layout l{tp, pp, dp, zero, schedule, sp};
                l.recompute = recompute;
                all.push_back(l);
              }
  // Without DP and PP overlap (one bucket after the backward, transfers in line) and with TP overlap.
  for (const char* schedule : {"gpipe", "1f1b", "interleaved"})
    for (int zero : {0, 1, 2, 3}) all.push_back({2, 2, 2, zero, schedule, false, false});
  // Context parallelism 2: alone, with tp 2 (and sequence parallelism), with pp 2 (each schedule), with
  // dp 2 under ZeRO 1, and tp 2 x pp 2 x cp 2.
  all.push_back({1, 1, 1, 0, "1f1b", false, true, 2});
  all.push_back({2, 1, 1, 0, "1f1b", false, true, 2});
  all.push_back({2, 1, 1, 0, "1f1b", true, true, 2});
  for (const char* schedule : {"gpipe", "1f1b", "interleaved"})
    all.push_back({1, 2, 1, 0, schedule, false, true, 2});
  all.push_back({1, 1, 2, 1, "1f1b", false, true, 2});
  all.push_back({1, 1, 2, 0, "1f1b", false, false, 2});
  all.push_back({2, 2, 1, 0, "1f1b", false, true, 2});
  // ... and with the memory modes: ZeRO 3, recomputation and optimizer offload over tp x pp x cp and
  // dp x pp x cp.
  const std::vector<std::string> offload = {"plan.offload.optimizer=true"};
  all.push_back({2, 2, 1, 3, "1f1b", false, true, 2, "selective"});
  all.push_back({2, 2, 1, 0, "interleaved", true, true, 2, "full", offload});
  all.push_back({1, 2, 2, 3, "gpipe", false, false, 2, "full"});
  all.push_back({1, 2, 2, 2, "interleaved", false, true, 2, "selective", offload});
  const double worst = check_layouts(all, 10);
  if (mpi->world->rank() == 0)
    std::printf("cross product: %zu layouts, worst relative error %.2e\n", all.size(), worst);
}
