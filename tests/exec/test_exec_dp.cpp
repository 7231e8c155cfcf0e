// Data parallelism over MPI, run under `mpirun -np 4`: 1, 2 and 4 ranks (sub-communicators of the
// job) train the same global batch to the same loss trajectory, with gradients reduced in buckets
// that overlap the backward; every rank ends with the same weights; a run checkpointed on 4 ranks
// resumes on 2 and continues the same trajectory. ZeRO 1 and 2 (reduce-scatter buckets, sharded
// AdamW, parameter all-gather) follow it too, and ZeRO 2's partitioned gradients add up every
// micro-batch's reduce-scatter.
#define BOOST_TEST_MODULE exec_dp
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "exec/comm/communicator.hpp"
#include "exec/run/live_run.hpp"
#include "exec/train/sharded_gradients.hpp"
#include "exec/train/trainer.hpp"
#include "mpi_fixture.hpp"
#include "source_tree.hpp"

using namespace paratwin;
using namespace paratwin::exec;
using paratwin::exec::test::mpi;
namespace fs = std::filesystem;

namespace {

// 8 sequences of 32 tokens per step: 4 micro-batches of 2 on one rank, 2 on each of two, 1 on each
// of four. 12 KB buckets: one per layer, each all-reduced as soon as its layer's backward ends.
ScenarioSpec scenario(int ranks, int zero = 0) {
  return load_live_scenario(paratwin_test::source_dir() + "/scenarios/live-cpu-tiny.yaml",
                            {parse_override("training.global_batch=8"), parse_override("training.seq_len=32"),
                             parse_override("plan.micro_batch=2"), parse_override("plan.bucket_size=200KB"),
                             parse_override("plan.zero=" + std::to_string(zero))},
                            ranks);
}

TrainOptions options(int64_t steps) {
  TrainOptions o;
  o.steps = steps;
  o.data = paratwin_test::source_dir() + "/data/tiny-corpus.txt";
  return o;
}

// Runs `steps` on the first `ranks` ranks of the job; returns their loss trajectory on every rank
// of the job (broadcast from rank 0) and checks the weights agree on the ranks that trained.
std::vector<double> train_on(int ranks, int64_t steps, TrainOptions o, int zero = 0) {
  std::vector<double> losses(size_t(steps), 0.0);
  auto group = mpi->world->split(mpi->world->rank() < ranks ? 0 : -1);
  if (group) {
    const ScenarioSpec s = scenario(ranks, zero);
    Trainer trainer(s, complete_plan(s), *group, o);
    const RunResult r = trainer.run();
    BOOST_TEST_REQUIRE(r.losses.size() == size_t(steps));
    losses = r.losses;
    // The same weights on every rank: their checksum's max and min over the group agree.
    double sum = 0;
    for (float w : trainer.weights()) sum = sum * 1.000001 + w;
    BOOST_TEST(group->allreduce_max(sum) == -group->allreduce_max(-sum));
  }
  mpi->world->broadcast(losses.data(), losses.size() * sizeof(double), 0);
  return losses;
}

void check_close(const std::vector<double>& a, const std::vector<double>& b, const char* what) {
  BOOST_TEST_REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    BOOST_TEST_INFO(what << ", step " << i + 1 << ": " << a[i] << " vs " << b[i]);
    BOOST_TEST(std::abs(a[i] - b[i]) < 1e-5 * std::abs(a[i]));
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_program_reduces_gradients_in_overlapped_buckets) {
  const ScenarioSpec s = scenario(mpi->world->size());
  const Program p = lower(complete_plan(s), s.model, s.cluster, s.training);
  int buckets = 0;
  for (const Task& t : p.roles.front().tasks) buckets += t.purpose == Purpose::GradientReduce ? 1 : 0;
  BOOST_TEST(buckets == (mpi->world->size() > 1 ? 4 : 0));
}

BOOST_AUTO_TEST_CASE(one_two_and_four_ranks_follow_the_same_loss_trajectory) {
  const int world = mpi->world->size();
  const std::vector<double> one = train_on(1, 5, options(5));
  BOOST_TEST(one.back() < one.front());
  if (world >= 2) check_close(one, train_on(2, 5, options(5)), "2 ranks vs 1");
  if (world >= 4) check_close(one, train_on(4, 5, options(5)), "4 ranks vs 1");
}

BOOST_AUTO_TEST_CASE(zero_1_and_2_shard_the_optimizer_and_follow_the_same_trajectory) {
  const int world = mpi->world->size();
  if (world < 2) return;
  const std::vector<double> one = train_on(1, 5, options(5));
  check_close(one, train_on(2, 5, options(5), 1), "ZeRO 1 on 2 ranks vs 1 rank");
  if (world >= 4) check_close(one, train_on(4, 5, options(5), 2), "ZeRO 2 on 4 ranks vs 1 rank");
}

// ZeRO 2 and 3 hold gradients as each rank's partition: every micro-batch's unsharded gradients of a
// part, written through a window of the layout, are reduce-scattered over the job's ranks and add up
// in each rank's block; the window closes with its reduction, so a pass writing there, or a reduction
// no backward opened, fails loudly.
BOOST_AUTO_TEST_CASE(sharded_gradients_sum_every_micro_batch_into_each_ranks_block) {
  Communicator* world = mpi->world.get();
  const int n = world->size(), r = world->rank();
  const std::vector<ShardedRange> parts{{{0, 7}, world}, {{7, 10}, world}};  // 3 values over up to 4 ranks
  ShardedGradients g(parts, 10);
  g.zero();
  std::vector<std::pair<Communicator*, Communicator::Handle>> requests;
  for (int mb = 1; mb <= 2; ++mb) {
    std::vector<int> ids;
    for (const auto& [range, comm] : parts) {
      g.open(range);
      for (size_t i = range.first; i < range.second; ++i) *g.windows().at(i) += float((r + 1) * mb * (i + 1));
      ids.push_back(g.reduce(range, comm, requests));
    }
    for (auto [comm, h] : requests) comm->wait(h);
    requests.clear();
    for (int id : ids) g.reduced(id);
  }
  // Summed over the ranks (1 + ... + n) and the micro-batches (1 + 2).
  for (const auto& [range, comm] : parts) {
    const std::vector<size_t> counts = dp_blocks(range, n);
    size_t begin = range.first;
    for (int k = 0; k < r; ++k) begin += counts[size_t(k)];
    for (size_t i = begin; i < begin + counts[size_t(r)]; ++i)
      BOOST_TEST(*g.at(i) == float(3 * n * (n + 1) / 2 * (i + 1)));
  }
  BOOST_CHECK_THROW(g.windows().at(0), std::logic_error);
  BOOST_CHECK_THROW(g.reduce(parts[0].range, world, requests), std::logic_error);
  LayoutWindows w;
  float values[4] = {};
  w.open(2, 6, values);
  BOOST_TEST(w.at(5) == values + 3);
  BOOST_CHECK_THROW(w.open(0, 3, values), std::logic_error);  // overlaps [2, 6)
  BOOST_CHECK_THROW(w.at(6), std::logic_error);
}

BOOST_AUTO_TEST_CASE(a_run_checkpointed_on_four_ranks_resumes_on_two) {
  const int world = mpi->world->size();
  if (world < 4) return;
  // One directory for the job, named by rank 0.
  double pid = mpi->world->rank() == 0 ? double(::getpid()) : 0;
  mpi->world->broadcast(&pid, sizeof pid, 0);
  const fs::path dir = fs::temp_directory_path() / ("paratwin-dp-resume-" + std::to_string(long(pid)));
  const std::vector<double> expected = train_on(1, 6, options(6));

  TrainOptions o = options(6);
  o.checkpoint_dir = dir.string();
  o.checkpoint_every = 2;
  o.stop_after =
      3;  // four ranks (ZeRO 1: sharded moments) stop after step 3; the newest checkpoint is step 2
  train_on(4, 3, o, 1);
  o.stop_after = -1;
  o.resume = true;
  std::vector<double> resumed(6, 0.0);
  auto group = mpi->world->split(mpi->world->rank() < 2 ? 0 : -1);
  if (group) {
    const ScenarioSpec s = scenario(2);
    Trainer trainer(s, complete_plan(s), *group, o);
    const RunResult r = trainer.run();
    BOOST_TEST(r.resumed_from == 2);
    BOOST_TEST(trainer.program().plan.num_microbatches == 2);  // was 1 on four ranks: accumulation adjusted
    resumed = r.losses;
  }
  mpi->world->broadcast(resumed.data(), resumed.size() * sizeof(double), 0);
  check_close(expected, resumed, "4 ranks resumed on 2 vs 1 rank");
  mpi->world->barrier();
  if (mpi->world->rank() == 0) fs::remove_all(dir);
}
