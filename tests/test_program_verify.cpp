// Lowered Programs hold their invariants: every layout verifies and its buckets cover each layer once,
// verify_program reports each broken invariant, the step waits for the gradient norm over every rank,
// collectives hold their own SMs.
#define BOOST_TEST_MODULE program_verify
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <set>
#include <string>
#include <vector>

#include "plan/cost/compute.hpp"
#include "plan/ir/buckets.hpp"
#include "program_run.hpp"

using namespace paratwin;
using paratwin_test::joined;
using paratwin_test::kTinyOnTwoNodes;
using paratwin_test::run;
using paratwin_test::Run;
using paratwin_test::scenario;
using paratwin_test::tasks_for;
namespace tt = boost::test_tools;

BOOST_AUTO_TEST_CASE(every_lowered_layout_verifies_and_its_buckets_cover_each_layer_once) {
  for (const std::string plan :
       {"{tp: 2, pp: 2, dp: 4, micro_batch: 4, schedule: 1f1b, bucket_size: 200KB}",
        "{tp: 1, pp: 2, dp: 8, micro_batch: 2, schedule: interleaved, virtual_stages: 2, zero: 1}",
        "{tp: 2, pp: 1, dp: 8, micro_batch: 4, zero: 2, offload: {optimizer: true}}",
        "{tp: 1, pp: 2, dp: 8, micro_batch: 2, zero: 3, recompute: full, offload: {activations: true}}",
        "{tp: 1, pp: 1, dp: 16, micro_batch: 2, zero: 1, compression: {kind: topk, ratio: 0.01}}",
        "{tp: 1, pp: 1, dp: 16, micro_batch: 2, bucket_size: 200KB, overlap: {dp: false}}"}) {
    const Run r = run(std::string(kTinyOnTwoNodes) + "plan: " + plan + "\n");
    BOOST_TEST_CONTEXT(plan) {
      BOOST_TEST(joined(verify(r.program)) == "");
      for (const Role& role : r.program.roles) {
        // The buckets' spans, laid side by side, are the role's layers, each once a step, or once a
        // micro-batch where ZeRO 2 and 3 reduce-scatter every micro-batch's gradients.
        const bool every =
            (r.plan.zero == 2 || r.plan.zero == 3) && r.plan.compression.kind == CompressionKind::None;
        std::vector<int> reduced;
        for (Purpose p : {Purpose::GradientReduce, Purpose::GradientTopK})
          for (size_t i : tasks_for(role, p))
            for (int l = role.tasks[i].layer_begin; l < role.tasks[i].layer_end; ++l) reduced.push_back(l);
        std::sort(reduced.begin(), reduced.end());
        std::vector<int> layers;
        for (int mb = 0; mb < (every ? r.plan.num_microbatches : 1); ++mb)
          for (int c = role.pipeline_rank; c < r.plan.chunks(); c += r.plan.pp)
            for (int l = r.plan.stages[size_t(c)].layer_begin; l < r.plan.stages[size_t(c)].layer_end; ++l)
              layers.push_back(l);
        std::sort(layers.begin(), layers.end());
        BOOST_TEST(reduced == layers);
        BOOST_TEST(tasks_for(role, Purpose::ParameterGather).size() ==
                   (r.plan.zero == 1 || r.plan.zero == 2 ? 1u : 0u));
        // ZeRO 3: one gather of each layer before each forward and each backward of every micro-batch.
        BOOST_TEST(tasks_for(role, Purpose::PassGather).size() ==
                   (r.plan.zero == 3
                        ? size_t(2 * r.plan.num_microbatches) * layers.size() / r.plan.num_microbatches
                        : 0u));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(verify_program_reports_every_broken_invariant_at_once) {
  Run r = run(std::string(kTinyOnTwoNodes) +
              "plan: {tp: 1, pp: 1, dp: 16, micro_batch: 2, zero: 1, bucket_size: 200KB}\n");
  Program& p = r.program;
  Role& role = p.roles.front();
  const std::vector<size_t> buckets = tasks_for(role, Purpose::GradientReduce);
  const std::vector<size_t> gathers = tasks_for(role, Purpose::ParameterGather);
  BOOST_REQUIRE(buckets.size() == 4u);  // one per layer
  BOOST_REQUIRE(gathers.size() == 1u);
  role.tasks[buckets[0]].purpose = Purpose::None;                           // a bucket without a purpose
  role.tasks[buckets[1]].layer_begin = role.tasks[buckets[2]].layer_begin;  // two buckets reduce a layer
  role.tasks[buckets[2]].collective = cost::CollectiveKind::AllReduce;      // ZeRO 1 reduce-scatters
  role.tasks[gathers[0]].deps = {};                                         // a gather before the step
  role.tasks[5].deps.push_back(7);                                          // waits for a later task
  role.tasks[tasks_for(role, Purpose::InputBatch).front()].to_host = true;  // the loader's copy, backwards
  const std::string all = joined(verify(p));
  BOOST_TEST_MESSAGE(all);
  BOOST_TEST(all.find("'RS dp bucket0': has no purpose") != std::string::npos);
  BOOST_TEST(all.find("reduces layer 3 of chunk 0 in no gradient bucket") != std::string::npos);
  BOOST_TEST(all.find("reduces layer 1, which task") != std::string::npos);
  BOOST_TEST(all.find("'RS dp bucket2': gradient-reduce must be a DP reduce-scatter (ZeRO 1-3)") !=
             std::string::npos);
  BOOST_TEST(all.find("'AG dp params': parameter-gather must wait for the optimizer step") !=
             std::string::npos);
  BOOST_TEST(all.find("'copy h2d batch mb0 c0': input-batch must be a copy to the device") !=
             std::string::npos);
  BOOST_TEST(all.find("task 5 '" + role.tasks[5].name +
                      "': waits for task 7, which is not an earlier task") != std::string::npos);

  // ZeRO 3: a pass whose gather lost its purpose runs layers nobody gathered for it.
  Run z = run(std::string(kTinyOnTwoNodes) + "plan: {tp: 1, pp: 1, dp: 16, micro_batch: 2, zero: 3}\n");
  Role& z0 = z.program.roles.front();
  const size_t first_gather = tasks_for(z0, Purpose::PassGather).front();
  z0.tasks[first_gather].purpose = Purpose::None;
  const std::string zero3 = joined(verify(z.program));
  BOOST_TEST_MESSAGE(zero3);
  BOOST_TEST(zero3.find("has no purpose") != std::string::npos);
  BOOST_TEST(zero3.find("'F mb0 c0 L0': runs layer 0 without a ZeRO-3 gather of it before") !=
             std::string::npos);
}

// The data loader's copies: each micro-batch's token ids before chunk 0's forward and its labels before
// the last chunk's (both on a stage that holds the whole model), this rank's seq_len / cp of each
// sequence as int64, and the forward that reads them waits for them.
BOOST_AUTO_TEST_CASE(each_micro_batch_reaches_the_device_before_the_forward_that_reads_it) {
  for (const std::string plan :
       {"{tp: 1, pp: 1, cp: 2, dp: 8, micro_batch: 2}",
        "{tp: 1, pp: 2, dp: 8, micro_batch: 2, schedule: interleaved, virtual_stages: 2}",
        "{tp: 1, pp: 2, dp: 8, micro_batch: 2, zero: 3}",
        "{tp: 1, pp: 1, dp: 16, micro_batch: 2, zero: 1, overlap: {param_gather: true}}",
        "{tp: 1, pp: 1, dp: 16, micro_batch: 1, offload: {activations: true}}"}) {
    const Run r = run(std::string(kTinyOnTwoNodes) + "plan: " + plan + "\n");
    BOOST_TEST_CONTEXT(plan) {
      BOOST_TEST(joined(verify(r.program)) == "");
      const int last = r.plan.chunks() - 1;
      for (const Role& role : r.program.roles) {
        const std::vector<size_t> copies = tasks_for(role, Purpose::InputBatch);
        const int loads = (role.pipeline_rank == 0 ? 1 : 0) + (role.pipeline_rank == r.plan.pp - 1 ? 1 : 0);
        // One copy a micro-batch on each end of the model (one in all where one stage holds it).
        BOOST_TEST(copies.size() == size_t(r.plan.num_microbatches * std::min(loads, r.plan.pp)));
        for (size_t i : copies) {
          const Task& copy = role.tasks[i];
          // Ahead of every offload copy on the copy stream: none delays a forward's batch.
          BOOST_TEST(std::none_of(role.tasks.begin(), role.tasks.begin() + std::ptrdiff_t(i),
                                  [](const Task& t) { return t.purpose == Purpose::ActivationOffload; }));
          BOOST_TEST((copy.chunk == 0 || copy.chunk == last));
          const int ids = (copy.chunk == 0 ? 1 : 0) + (copy.chunk == last ? 1 : 0);
          BOOST_TEST(copy.bytes.value() == 8.0 * ids * r.plan.micro_batch * 128 / r.plan.cp);
          const auto forward =
              std::find_if(role.tasks.begin() + std::ptrdiff_t(i), role.tasks.end(), [&](const Task& t) {
                return t.kind == TaskKind::Forward && t.microbatch == copy.microbatch &&
                       t.chunk == copy.chunk;
              });
          BOOST_REQUIRE(forward != role.tasks.end());
          BOOST_TEST(forward->deps.contains(int(i)), forward->name);
        }
      }
    }
  }
}

// The step's gradient norm, and under fp16 the overflow flag before it: one all-reduce each over every
// rank, after every gradient reduction of the role, before its optimizer step.
BOOST_AUTO_TEST_CASE(the_step_waits_for_the_gradient_norm_over_every_rank) {
  for (const std::string precision : {"bf16", "fp16"}) {
    const Run r = run(std::string("model: tiny-gpt\ncluster: {from: dgx-a100-80g, nodes: 2}\n") +
                      "training: {global_batch: 32, seq_len: 128, precision: " + precision +
                      "}\nplan: {tp: 2, pp: 2, dp: 4, micro_batch: 2, zero: 1}\n");
    for (const Role& role : r.program.roles) {
      const std::vector<size_t> norm = tasks_for(role, Purpose::GradientNorm);
      const std::vector<size_t> flag = tasks_for(role, Purpose::OverflowCheck);
      BOOST_REQUIRE(norm.size() == 1u);
      BOOST_REQUIRE(flag.size() == (precision == "fp16" ? 1u : 0u));
      const Task& t = role.tasks[norm[0]];
      BOOST_TEST((t.kind == TaskKind::Collective && t.collective == cost::CollectiveKind::AllReduce &&
                  t.group == GroupKind::World));
      BOOST_TEST(t.placement.size == 16);
      BOOST_TEST(t.bytes.value() == 4);
      if (!flag.empty()) BOOST_TEST(t.deps.contains(int(flag[0])));
      const std::vector<size_t> reduces = tasks_for(role, Purpose::GradientReduce);
      BOOST_REQUIRE(!reduces.empty());
      const Task& first = role.tasks[flag.empty() ? norm[0] : flag[0]];
      for (size_t b : reduces) BOOST_TEST(first.deps.contains(int(b)));
      for (size_t i = 0; i < role.tasks.size(); ++i)
        if (role.tasks[i].kind == TaskKind::Optimizer) BOOST_TEST(role.tasks[i].deps.contains(int(norm[0])));
      // A collective's latency over two nodes: microseconds.
      const double s = task_duration_s(t, r.s.cluster.pools.front(), r.s.cluster, r.s.training.precision);
      BOOST_TEST(s > 1e-6);
      BOOST_TEST(s < 1e-3);
    }
  }
  // verify(Program) asks for it.
  Run r = run(std::string(kTinyOnTwoNodes) + "plan: {tp: 1, pp: 1, dp: 16, micro_batch: 2, zero: 1}\n");
  Role& role = r.program.roles.front();
  role.tasks[tasks_for(role, Purpose::GradientNorm).front()].purpose = Purpose::None;
  const std::string all = joined(verify(r.program));
  BOOST_TEST(all.find("'AR world gradient norm': has no purpose") != std::string::npos);
  BOOST_TEST(all.find("has 0 gradient-norm all-reduces; one is expected") != std::string::npos);
}

// Communication kernels take SMs (PoolSpec::comm_sms, comm_sms_in_node): NCCL runs 24 channels in one
// node and 16 across nodes on the DGX H100, one SM each; kernels that run at once each hold their own.
// A compute task beside collectives that outlast it progresses at 1 - the sum of their shares.
BOOST_AUTO_TEST_CASE(collectives_hold_their_own_sms_and_one_node_ones_hold_more) {
  const ScenarioSpec s = scenario(
      "model: tiny-gpt\ncluster: {from: dgx-h100, nodes: 2}\ntraining: {global_batch: 32, seq_len: 128}\n"
      "plan: {tp: 4, dp: 4, micro_batch: 2}\n");
  Task forward;
  forward.name = "F";
  forward.work.gemms.add(cost::Gemm{8192, 8192, 8192});
  forward.work.launches = 1;
  auto collective = [](const std::string& name, StreamKind stream, int size) {
    Task t;
    t.kind = TaskKind::Collective;
    t.stream = stream;
    t.name = name;
    t.placement = {size, 8, false};
    t.bytes = Bytes(20e9);  // long enough to cover the forward
    return t;
  };
  const Task in_node = collective("AR tp", StreamKind::Tp, 8),
             across = collective("AR dp", StreamKind::Dp, 16);
  const PoolSpec& pool = s.cluster.pools.front();
  const DeviceSpec& h100 = s.cluster.device_of(pool);
  BOOST_TEST(comm_sm_share(in_node, pool, h100) == 24.0 / 132, tt::tolerance(1e-12));
  BOOST_TEST(comm_sm_share(across, pool, h100) == 16.0 / 132, tt::tolerance(1e-12));
  BOOST_TEST(comm_sm_share(forward, pool, h100) == 0);
  auto forward_time = [&](const std::vector<Task>& beside) {
    Program p;
    p.world = 16;
    Role role;
    role.pool = pool.name;
    role.instances = 16;
    role.tasks = {forward};
    for (const Task& t : beside) role.tasks.push_back(t);
    p.roles = {role};
    const TaskTiming t = schedule_tasks(p, s.cluster, s.training)[0][0];
    return t.end_s - t.start_s;
  };
  const double alone = forward_time({});
  BOOST_TEST(forward_time({in_node}) == alone / (1 - 24.0 / 132), tt::tolerance(1e-3));
  BOOST_TEST(forward_time({across}) == alone / (1 - 16.0 / 132), tt::tolerance(1e-3));
  BOOST_TEST(forward_time({in_node, across}) == alone / (1 - 40.0 / 132), tt::tolerance(1e-3));
}
