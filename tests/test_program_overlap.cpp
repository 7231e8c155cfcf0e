// The Program's overlaps: TP overlap's pieces beside their collectives (AsyncTP, Transformer Engine's
// userbuffers), ZeRO 1's parameter gathers during the next forward, Megatron-Core's first-stage DP
// buckets, windowed attention's layers.
#define BOOST_TEST_MODULE program_overlap
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fast_cluster.hpp"
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

namespace {

// A cluster where communication is nearly free.
const std::string kFastCluster = paratwin_test::fast_cluster();

}  // namespace

// ---- TP overlap (AsyncTP, Transformer Engine userbuffers): plan/cost/tp_overlap.hpp ----

namespace {

std::string tp_overlap_plan(int tp) {
  return std::string(
             "model: {name: wide, layers: 4, hidden: 4096, heads: 32, vocab: 512, seq_len: 4096}\n"
             "cluster: {from: dgx-h100, nodes: 1}\n"
             "training: {global_batch: 16, seq_len: 4096}\n"
             "plan: {pp: 1, micro_batch: 2, sequence_parallel: true, tp: ") +
         std::to_string(tp) + ", dp: " + std::to_string(8 / tp) + "}\n";
}

}  // namespace

BOOST_AUTO_TEST_CASE(tp_overlap_runs_each_pairs_collectives_beside_its_own_gemm_pieces) {
  for (int tp : {2, 4, 8}) {
    BOOST_TEST_CONTEXT("tp " << tp) {
      const Run r = run(tp_overlap_plan(tp), {"plan.overlap.tp=true"});
      const auto& tasks = r.program.roles[0].tasks;
      const auto& timing = r.eval.roles[0].tasks;
      int forwards = 0, backwards = 0;
      for (size_t i = 0; i < tasks.size(); ++i) {
        if (tasks[i].purpose != Purpose::TpGemmPieces ||
            tasks[size_t(tasks[i].deps.front())].purpose == Purpose::TpGemmPieces)
          continue;
        // The lead pieces (one in tp of each decomposed GEMM), after the pass's task that holds the rest
        // of its work; then pair by pair the other tp - 1 pieces beside that pair's collective.
        const Task& lead = tasks[i];
        BOOST_TEST(lead.deps.size() == 1u);
        std::vector<int> segment{int(i)};
        double lead_flops = 0, rest_flops = 0, segment_end = timing[i].end_s;
        int pairs = 0;
        for (size_t j = i + 1; j + 1 < tasks.size() && tasks[j].purpose == Purpose::TpGemmPieces; j += 2) {
          const Task &rest = tasks[j], &comm = tasks[j + 1];
          BOOST_REQUIRE(comm.kind == TaskKind::Collective);
          BOOST_TEST((comm.group == GroupKind::Tp));
          BOOST_TEST((comm.collective == cost::CollectiveKind::AllGather ||
                      comm.collective == cost::CollectiveKind::ReduceScatter));
          BOOST_TEST(comm.count == lead.layer_end - lead.layer_begin);  // one a layer of the pass
          for (int d : segment) {
            BOOST_TEST(rest.deps.contains(d));
            BOOST_TEST(comm.deps.contains(d));
          }
          // A pair starts when the one before it has ended, pieces and transfer: its slack hides no
          // other pair's transfer.
          BOOST_TEST(timing[j].start_s >= segment_end * (1 - 1e-12));
          BOOST_TEST(timing[j + 1].start_s >= segment_end * (1 - 1e-12));
          segment_end = std::max(timing[j].end_s, timing[j + 1].end_s);
          segment = {int(j), int(j + 1)};
          rest_flops += rest.work.gemm_flops.value();
          ++pairs;
        }
        lead_flops = lead.work.gemm_flops.value();
        BOOST_TEST(rest_flops == (tp - 1) * lead_flops, tt::tolerance(1e-9));
        // Forward (and recomputed forward): QKV and up gathered, output and down scattered; backward the
        // output and down projections' input gradients gathered.
        BOOST_TEST((pairs == 4 || pairs == 2));
        (pairs == 4 ? forwards : backwards) += 1;
      }
      BOOST_TEST(forwards >= r.plan.num_microbatches);
      BOOST_TEST(backwards >= r.plan.num_microbatches - 1);  // the last backward is cut where DP buckets end
    }
  }
}

BOOST_AUTO_TEST_CASE(tp_overlap_transfers_hold_the_sms_their_framework_gives_them) {
  // AsyncTP copies the pieces with copy engines: no SMs. Transformer Engine's ring exchange too, its
  // reduce-scatters (pipelined, and the backward's bulk ones) in a comm kernel of 16 SMs. TP collectives
  // that no overlap decomposes are NCCL's: 24 SMs in a node.
  for (const std::string how : {"async_tp", "userbuffers"}) {
    BOOST_TEST_CONTEXT(how) {
      const Run r = run(tp_overlap_plan(8), {"plan.overlap.tp=true", "training.tp_overlap=" + how});
      const auto& tasks = r.program.roles[0].tasks;
      const PoolSpec& pool = r.s.cluster.pools.front();
      const DeviceSpec& h100 = r.s.cluster.device_of(pool);
      int transfers = 0, bulk = 0, whole = 0;
      for (size_t i = 1; i < tasks.size(); ++i) {
        const Task& t = tasks[i];
        if (t.kind != TaskKind::Collective || t.group != GroupKind::Tp) continue;
        const bool scatters = t.collective == cost::CollectiveKind::ReduceScatter;
        const double share = comm_sm_share(t, pool, h100);
        if (tasks[i - 1].purpose == Purpose::TpGemmPieces) {  // a pair's transfer, beside its pieces
          ++transfers;
          BOOST_TEST(share == (how == "userbuffers" && scatters ? 16.0 / 132 : 0.0), tt::tolerance(1e-12));
        } else if (t.name.find("bulk") != std::string::npos) {
          ++bulk;
          BOOST_TEST(share == 16.0 / 132, tt::tolerance(1e-12));
        } else {
          ++whole;
          BOOST_TEST(share == 24.0 / 132, tt::tolerance(1e-12));
        }
      }
      BOOST_TEST(transfers > 0);
      BOOST_TEST((how == "userbuffers" ? bulk > 0 : bulk == 0));
      BOOST_TEST((how == "userbuffers" ? true : whole > 0));  // AsyncTP's backward reduce-scatters
    }
  }
}

BOOST_AUTO_TEST_CASE(async_tp_reduce_scatters_the_backward_s_summed_input_gradients_after_the_pass) {
  // The QKV and up projections' input gradients are sums of matmuls: AsyncTP fuses neither reduce-scatter,
  // which follow the backward's pieces (Transformer Engine runs them beside the pass: bulk).
  const Run r = run(tp_overlap_plan(8), {"plan.overlap.tp=true"});
  const auto& tasks = r.program.roles[0].tasks;
  const auto& timing = r.eval.roles[0].tasks;
  int checked = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const Task& t = tasks[i];
    if (t.kind != TaskKind::Collective || t.group != GroupKind::Tp ||
        t.collective != cost::CollectiveKind::ReduceScatter || t.name.find(" B ") == std::string::npos ||
        t.name.find("tp down") != std::string::npos || t.name.find("tp out") != std::string::npos)
      continue;
    BOOST_TEST_CONTEXT(t.name) {
      BOOST_TEST(t.count >= 2 * 4);  // two a layer (the embedding's with them)
      // After the last pieces of its pass.
      size_t j = i;
      while (j > 0 && tasks[j - 1].purpose != Purpose::TpGemmPieces) --j;
      BOOST_REQUIRE(j > 0);
      BOOST_TEST((tasks[j - 1].kind == TaskKind::Backward));
      BOOST_TEST(timing[i].start_s >= timing[j - 1].end_s * (1 - 1e-12));
    }
    ++checked;
  }
  BOOST_TEST(checked >= r.plan.num_microbatches);
}

BOOST_AUTO_TEST_CASE(userbuffers_bulk_reduce_scatters_run_beside_the_backward_not_after_its_pairs) {
  // The regather and the bulk reduce-scatters are issued before the pairs' collectives on the TP stream,
  // so they start with the backward's task, not after its pieces.
  const Run r = run(tp_overlap_plan(8), {"plan.overlap.tp=true", "training.tp_overlap=userbuffers"});
  const auto& tasks = r.program.roles[0].tasks;
  const auto& timing = r.eval.roles[0].tasks;
  int checked = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i].name.rfind("RS tp bulk B ", 0) != 0) continue;
    size_t pass = i;
    while (pass > 0 &&
           !(tasks[pass - 1].kind == TaskKind::Backward && tasks[pass - 1].purpose == Purpose::None))
      --pass;
    BOOST_REQUIRE(pass > 0);
    BOOST_TEST(timing[i].start_s < timing[pass - 1].end_s);
    for (size_t j = pass; j < i; ++j) BOOST_TEST((tasks[j].purpose != Purpose::TpGemmPieces));
    ++checked;
  }
  BOOST_TEST(checked >= r.plan.num_microbatches - 1);
}

BOOST_AUTO_TEST_CASE(torchtitan_float8_tp_all_gathers_move_half_the_reduce_scatters_bytes) {
  const std::vector<std::string> fp8 = {"training.precision=fp8", "training.fp8_recipe=torchao_tensorwise",
                                        "training.tensor_parallel=dtensor"};
  for (const char* overlap : {"plan.overlap.tp=false", "plan.overlap.tp=true"}) {
    std::vector<std::string> sets = fp8;
    sets.push_back(overlap);
    const Run r = run(tp_overlap_plan(8), sets);
    double gathers = 0, scatters = 0;
    for (const Task& t : r.program.roles[0].tasks) {
      if (t.kind != TaskKind::Collective || t.group != GroupKind::Tp) continue;
      if (t.collective == cost::CollectiveKind::AllGather) gathers = t.bytes.value();
      if (t.collective == cost::CollectiveKind::ReduceScatter) scatters = t.bytes.value();
    }
    BOOST_TEST(gathers > 0);
    BOOST_TEST(gathers == scatters / 2);
  }
}

BOOST_AUTO_TEST_CASE(dtensor_gathers_no_linear_input_again_in_the_backward) {
  // Megatron's column-parallel linears keep their input's sequence shard and all-gather it again in the
  // backward; DTensor's autograd keeps the gathered input: two fewer TP all-gathers a layer's backward.
  // The TP collectives of `kind` a run issues (folded ones counted each).
  auto tp = [](const Run& r, cost::CollectiveKind kind) {
    double n = 0;
    for (const Task& t : r.program.roles[0].tasks)
      if (t.kind == TaskKind::Collective && t.group == GroupKind::Tp && t.collective == kind) n += t.count;
    return n;
  };
  using cost::CollectiveKind;
  const Run megatron = run(tp_overlap_plan(8), {});
  const Run dtensor = run(tp_overlap_plan(8), {"training.tensor_parallel=dtensor"});
  const double layers = 4, backwards = megatron.plan.num_microbatches;
  BOOST_TEST(tp(megatron, CollectiveKind::AllGather) - tp(dtensor, CollectiveKind::AllGather) ==
             2 * layers * backwards);
  // The reduce-scatters stay, userbuffers' bulk ones beside the pass included.
  BOOST_TEST(tp(dtensor, CollectiveKind::ReduceScatter) == tp(megatron, CollectiveKind::ReduceScatter));
  const std::vector<std::string> bulk = {"plan.overlap.tp=true", "training.tp_overlap=userbuffers"};
  std::vector<std::string> bulk_dtensor = bulk;
  bulk_dtensor.push_back("training.tensor_parallel=dtensor");
  BOOST_TEST(tp(run(tp_overlap_plan(8), bulk_dtensor), CollectiveKind::ReduceScatter) ==
             tp(run(tp_overlap_plan(8), bulk), CollectiveKind::ReduceScatter));
  // Its copies around the collectives cost more than the regathers it saves, which ran beside compute.
  BOOST_TEST(dtensor.eval.iteration_time_s > megatron.eval.iteration_time_s);
}

BOOST_AUTO_TEST_CASE(tp_overlap_hides_part_of_the_tp_collectives_not_all) {
  const Run serial = run(tp_overlap_plan(8), {"plan.overlap.tp=false"});
  const Run overlapped = run(tp_overlap_plan(8), {"plan.overlap.tp=true"});
  const double tp_comm = serial.eval.roles[0].breakdown.tp_comm_s;
  BOOST_TEST(tp_comm > 0);
  BOOST_TEST(overlapped.eval.iteration_time_s < serial.eval.iteration_time_s);
  // Not all of it: the lead pieces, the staging kernels, the pieces' wave quantization and what the rest
  // pieces cannot cover stay on the critical path (the old model hid it all behind the whole pass).
  BOOST_TEST(overlapped.eval.iteration_time_s > serial.eval.iteration_time_s - tp_comm);
}

BOOST_AUTO_TEST_CASE(megatron_linears_reduce_their_input_gradients_beside_the_backward) {
  // Megatron-LM's and Transformer Engine's column-parallel linears start the input gradient's
  // reduce-scatter (all-reduce without sequence parallelism) before the weight-gradient GEMM: it runs
  // beside the backward pass, not after it; DTensor's stays after the pass.
  using cost::CollectiveKind;
  for (const bool sp : {true, false}) {
    BOOST_TEST_CONTEXT("sequence parallel " << sp) {
      const std::string sp_set = sp ? "plan.sequence_parallel=true" : "plan.sequence_parallel=false";
      const CollectiveKind kind = sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
      for (const bool megatron : {true, false}) {
        const Run r = run(tp_overlap_plan(4), {sp_set, megatron ? "training.tensor_parallel=megatron"
                                                                : "training.tensor_parallel=dtensor"});
        const auto& tasks = r.program.roles[0].tasks;
        const auto& timing = r.eval.roles[0].tasks;
        // Each backward pass's collectives of `kind` follow it in the task list: do they start before it
        // ends?
        int beside = 0, after = 0, pass = -1;
        for (size_t i = 0; i < tasks.size(); ++i) {
          const Task& t = tasks[i];
          if (t.kind == TaskKind::Forward || t.kind == TaskKind::Backward)
            pass = t.kind == TaskKind::Backward ? int(i) : -1;
          if (pass < 0 || t.kind != TaskKind::Collective || t.group != GroupKind::Tp || t.collective != kind)
            continue;
          (timing[i].start_s < timing[size_t(pass)].end_s ? beside : after) += 1;
        }
        BOOST_TEST(beside + after >= r.plan.num_microbatches);
        BOOST_TEST((megatron ? after : beside) == 0);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(current_scaling_reduces_each_gathered_tensors_amax_before_the_next_pass) {
  // Transformer Engine's current scaling under sequence parallelism: one 4-byte all-reduce over the TP
  // group per fp8 all-gather (the column-parallel inputs forward, the row-parallel output gradients
  // backward), with or without TP overlap; delayed scaling has none.
  for (const std::string overlap : {"plan.overlap.tp=false", "plan.overlap.tp=true"}) {
    BOOST_TEST_CONTEXT(overlap) {
      auto amax = [&](const std::string& recipe) {
        const Run r =
            run(tp_overlap_plan(4), {overlap, "training.precision=fp8", "training.fp8_recipe=" + recipe,
                                     "training.tp_overlap=userbuffers"});
        double n = 0, gathers = 0;
        for (const Task& t : r.program.roles[0].tasks) {
          if (t.kind != TaskKind::Collective || t.group != GroupKind::Tp) continue;
          if (t.collective == cost::CollectiveKind::AllReduce) {
            BOOST_TEST(t.bytes.value() == 4.0);
            n += t.count;
          }
        }
        // Two gathered tensors a layer and pass: 4 layers, a forward and a backward per micro-batch.
        gathers = 2.0 * 4 * 2 * r.plan.num_microbatches;
        return std::pair{n, gathers};
      };
      const auto [current, gathers] = amax("te_current");
      BOOST_TEST(current == gathers);
      BOOST_TEST(amax("te_delayed").first == 0.0);
    }
  }
}

BOOST_AUTO_TEST_CASE(tp_overlap_leaves_plain_tp_all_reduces_after_their_gemms) {
  // Neither AsyncTP nor Transformer Engine decomposes an all-reduce: without sequence parallelism
  // overlap.tp changes nothing.
  const Run serial = run(tp_overlap_plan(4), {"plan.overlap.tp=false", "plan.sequence_parallel=false"});
  const Run overlapped = run(tp_overlap_plan(4), {"plan.overlap.tp=true", "plan.sequence_parallel=false"});
  BOOST_TEST(overlapped.eval.iteration_time_s == serial.eval.iteration_time_s, tt::tolerance(1e-12));
}

// Megatron-LM's --overlap-param-gather (plan.overlap.param_gather): ZeRO 1's gather of the updated
// parameters leaves the end of the step for the start of the next one's first forward, bucket by bucket.
BOOST_AUTO_TEST_CASE(overlapped_parameter_gathers_come_bucket_by_bucket_before_the_first_forward_needs_them) {
  const std::string base = std::string(kTinyOnTwoNodes) +
                           "plan: {tp: 1, pp: 2, dp: 8, micro_batch: 2, schedule: interleaved, "
                           "virtual_stages: 2, zero: 1, bucket_size: 200KB}\n";
  const Run after_step = run(base);
  const Run overlapped = run(base, {"plan.overlap.param_gather=true"});
  BOOST_TEST(joined(verify(overlapped.program)) == "");
  for (size_t r = 0; r < overlapped.program.roles.size(); ++r) {
    const Role& role = overlapped.program.roles[r];
    const Role& whole = after_step.program.roles[r];
    const std::vector<size_t> gathers = tasks_for(role, Purpose::ParameterGather);
    // One gather per gradient bucket, the same parameters in all as the step's one gather.
    BOOST_TEST(gathers.size() == tasks_for(role, Purpose::GradientReduce).size());
    double bytes = 0;
    for (size_t g : gathers) bytes += role.tasks[g].bytes.value();
    BOOST_TEST(bytes == whole.tasks[tasks_for(whole, Purpose::ParameterGather).front()].bytes.value(),
               tt::tolerance(1e-12));
    // Each gather after the one before it (one in flight at a time), all before the step's forwards
    // finish; the first forward of each chunk's layers waits for the gather of its bucket.
    size_t step = 0;
    for (size_t i = 0; i < role.tasks.size(); ++i)
      if (role.tasks[i].kind == TaskKind::Optimizer) step = i;
    for (size_t k = 0; k < gathers.size(); ++k) {
      const Task& g = role.tasks[gathers[k]];
      BOOST_TEST(gathers[k] < step);
      if (k > 0) BOOST_TEST(g.deps.contains(int(gathers[k - 1])));
      // (The chunk's last bucket's task spans the chunk: the live engines run the pass there.)
      bool waited_for = false;
      for (const Task& t : role.tasks)
        waited_for =
            waited_for || (t.kind == TaskKind::Forward && t.microbatch == 0 && t.chunk == g.chunk &&
                           (t.layer_begin == g.layer_begin || t.purpose != Purpose::GatheredForwardPart) &&
                           t.layer_end == g.layer_end && t.deps.contains(int(gathers[k])));
      BOOST_TEST(waited_for, "no forward of micro-batch 0 waits for '" << g.name << "'");
    }
    // The later micro-batches' forwards stay whole.
    for (const Task& t : role.tasks)
      if (t.kind == TaskKind::Forward && t.microbatch == 1)
        BOOST_TEST((t.layer_begin == overlapped.plan.stages[size_t(t.chunk)].layer_begin &&
                    t.layer_end == overlapped.plan.stages[size_t(t.chunk)].layer_end));
  }
}

BOOST_AUTO_TEST_CASE(overlapped_parameter_gather_hides_all_but_the_first_bucket_behind_the_forward) {
  // Inter-node DP with one rank a node (tp 8 fills the node): the gather is a large part of the step.
  const std::string base =
      std::string("model: gpt3-1.7b\ncluster: {from: dgx-h100, nodes: 8}\n") +
      "training: {global_batch: 32}\nplan: {tp: 8, pp: 1, dp: 8, micro_batch: 1, zero: 1, "
      "sequence_parallel: true}\n";
  const Run after_step = run(base);
  const Run overlapped = run(base, {"plan.overlap.param_gather=true"});
  const Role& role = overlapped.program.roles[0];
  const std::vector<size_t> gathers = tasks_for(role, Purpose::ParameterGather);
  BOOST_REQUIRE(gathers.size() > 2u);
  const auto durations = task_durations(overlapped.program, overlapped.s.cluster, overlapped.s.training);
  double all = 0;
  for (size_t g : gathers) all += durations[0][g];
  const double saved = after_step.eval.iteration_time_s - overlapped.eval.iteration_time_s;
  BOOST_TEST_MESSAGE("gathers " << all << " s, the first " << durations[0][gathers[0]] << " s; saved "
                                << saved << " s");
  // The first bucket's gather is exposed, the others run beside the forward: nearly all of the time
  // the exposed gather took comes off the step.
  BOOST_TEST(saved > 0.5 * (all - durations[0][gathers[0]]));
  BOOST_TEST(saved <= all * (1 + 1e-9));
  const TaskTiming& first = overlapped.eval.roles[0].tasks[gathers[0]];
  BOOST_TEST(first.start_s == 0.0);
}

BOOST_AUTO_TEST_CASE(overlapped_parameter_gather_needs_the_distributed_optimizer_and_grad_overlap) {
  ScenarioSpec s = scenario(std::string(kTinyOnTwoNodes) +
                            "plan: {tp: 1, pp: 1, dp: 16, micro_batch: 2, overlap: {param_gather: true}}\n");
  for (const auto& [zero, overlap_dp, ok] : {std::tuple{0, true, false}, std::tuple{3, true, false},
                                             std::tuple{1, false, false}, std::tuple{1, true, true}}) {
    Plan p = complete_plan(s);
    p.zero = zero;
    p.overlap_dp = overlap_dp;
    const std::string problems = joined(verify(p, s.model, s.cluster, s.training));
    BOOST_TEST((problems.find("overlap.param_gather needs zero 1 and overlap.dp") == std::string::npos) == ok,
               problems);
  }
  // The plan file says it when it is on, and reads it back.
  Plan p = complete_plan(s);
  p.zero = 1;
  BOOST_TEST(to_yaml(p).find("overlap: {dp: true, tp: false, pp: true, param_gather: true}") !=
             std::string::npos);
  const std::string path = (std::filesystem::temp_directory_path() / "paratwin_param_gather.yaml").string();
  std::ofstream(path) << to_yaml(p);
  BOOST_TEST(load_plan_file(path, s).overlap_param_gather);
}

BOOST_AUTO_TEST_CASE(megatron_core_ddp_buckets_the_first_pipeline_rank_only) {
  // training.dp_buckets first_stage: the later pipeline ranks reduce each model chunk in one bucket,
  // and under overlap.param_gather gather it in one piece from the step's start.
  const std::string base = std::string(kTinyOnTwoNodes) +
                           "plan: {tp: 1, pp: 2, dp: 8, micro_batch: 2, zero: 1, bucket_size: 200KB, "
                           "overlap: {param_gather: true}}\n";
  const Run every = run(base);
  BOOST_REQUIRE(tasks_for(every.program.roles[1], Purpose::GradientReduce).size() > 1u);
  const Run first = run(base, {"training.dp_buckets=first_stage"});
  BOOST_TEST(joined(verify(first.program)) == "");
  for (size_t r = 0; r < 2; ++r) {
    const size_t buckets = tasks_for(first.program.roles[r], Purpose::GradientReduce).size();
    const size_t gathers = tasks_for(first.program.roles[r], Purpose::ParameterGather).size();
    BOOST_TEST(buckets == (r == 0 ? tasks_for(every.program.roles[r], Purpose::GradientReduce).size() : 1u));
    BOOST_TEST(gathers == buckets);
  }
  const Role& later = first.program.roles[1];
  BOOST_TEST(first.eval.roles[1].tasks[tasks_for(later, Purpose::ParameterGather).front()].start_s == 0.0);
}

BOOST_AUTO_TEST_CASE(lowering_costs_windowed_layers_at_their_band_and_full_ones_in_full) {
  // Four layers, 1-based 1 and 3 in a 128-key window, 2 and 4 in full (Megatron-Core's
  // window_attn_skip_freq 2, GPT-OSS's pattern): the forward, the backward and the selective
  // recompute of the chunk execute two full layers' attention and two bands'.
  const std::string model =
      "model: {name: banded, layers: 4, hidden: 1024, heads: 8, vocab: 512, seq_len: 1024, "
      "position: rope, mlp: swiglu";
  const std::string rest = std::string(kFastCluster) +
                           "training: {global_batch: 4, seq_len: 1024}\n"
                           "plan: {tp: 1, pp: 1, dp: 4, micro_batch: 1, recompute: selective}\n";
  const Run full = run(model + "}\n" + rest);
  const Run banded = run(model + ", sliding_window: 128, full_attention_every: 2}\n" + rest);
  auto flash = [](const Run& r, TaskKind kind) {
    double f = 0;
    for (const Task& t : r.program.roles[0].tasks)
      if (t.kind == kind) f += t.work.flash_forward_flops.value() + t.work.flash_backward_flops.value();
    return f;
  };
  const double s = 1024, W = 128, heads = 8, d = 128;
  const double causal = 2 * heads * s * s * d, band = 4 * heads * (W * (W + 1) / 2 + (s - W) * W) * d;
  BOOST_TEST(flash(full, TaskKind::Forward) == 4 * causal, tt::tolerance(1e-12));
  BOOST_TEST(flash(banded, TaskKind::Forward) == 2 * causal + 2 * band, tt::tolerance(1e-12));
  BOOST_TEST(flash(banded, TaskKind::Backward) == 2.5 * (2 * causal + 2 * band), tt::tolerance(1e-12));
  BOOST_TEST(flash(banded, TaskKind::Recompute) == 2 * causal + 2 * band, tt::tolerance(1e-12));
  BOOST_TEST(banded.eval.iteration_time_s < full.eval.iteration_time_s);
  // The model FLOPs keep the full square.
  double model_full = 0, model_banded = 0;
  for (const Task& t : full.program.roles[0].tasks) model_full += t.work.attention_flops.value();
  for (const Task& t : banded.program.roles[0].tasks) model_banded += t.work.attention_flops.value();
  BOOST_TEST(model_banded == model_full, tt::tolerance(1e-12));
}
