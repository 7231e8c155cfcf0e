// Context parallelism's ring attention (training.cp_attention: torch_ring with either rotate method,
// te_p2p): the blocks add up to the causal square, the Program carries the ring's tasks and bytes as
// PyTorch's context_parallel and Transformer Engine's p2p ring move them, and attention costs more per
// (query, key) pair as the ring's blocks shrink. Counts and ratios only, no wall clock.
#define BOOST_TEST_MODULE ring_attention
#include <boost/test/unit_test.hpp>

#include "catalog_scenario.hpp"
#include "fast_cluster.hpp"
#include "plan/analytic/evaluate.hpp"
#include "plan/cost/ring_attention.hpp"
#include "plan/ir/program.hpp"
#include "plan/spec/cluster.hpp"
#include "source_tree.hpp"

using namespace paratwin;
namespace tt = boost::test_tools;

namespace {

using paratwin_test::scenario;

// Grouped-query attention (4 query heads per key head), 2 layers, cp 4 over one sequence.
const char* kRingScenario =
    "model: {name: gqa, layers: 2, hidden: 1024, heads: 16, kv_heads: 4, vocab: 512, seq_len: 8192}\n"
    "training: {global_batch: 1, seq_len: 8192, precision: bf16, attention: flash2, cp_attention: "
    "torch_ring}\n"
    "plan: {tp: 1, pp: 1, cp: 4, dp: 1, micro_batch: 1, recompute: none, zero: 0}\n";

cost::LayerWork work(int cp, CpAttention ring = CpAttention::TorchRing) {
  cost::LayerWork w;
  w.seq_len = 8192;
  w.cp = cp;
  w.attention = AttentionKind::Flash2;
  w.cp_attention = ring;
  return w;
}

const ModelSpec& gqa() {
  static const ModelSpec m = scenario(std::string(kRingScenario) + paratwin_test::fast_cluster(2)).model;
  return m;
}

}  // namespace

BOOST_AUTO_TEST_CASE(ring_blocks_add_up_to_the_causal_square_of_the_rank) {
  for (const CpAttention ring : {CpAttention::TorchRing, CpAttention::TeP2p})
    for (int cp : {2, 4, 8}) {
      const cost::LayerWork w = work(cp, ring);
      const auto f = cost::ring_attention(gqa(), w, true), b = cost::ring_attention(gqa(), w, false);
      const double n = 8192.0 / cp, h = gqa().heads, d = gqa().head_dim;
      // One causal n x n block, cp - 1 non-causal half blocks (n x n/2): s^2 / (2 cp) pairs in all.
      BOOST_TEST(f.diagonal.flash_forward_flops.value() == 2 * h * n * n * d, tt::tolerance(1e-12));
      BOOST_TEST(f.off_diagonal.flash_full_forward_flops.value() == (cp - 1) * 2 * h * n * n * d,
                 tt::tolerance(1e-12));
      BOOST_TEST(f.diagonal.flash_forward_flops.value() + f.off_diagonal.flash_full_forward_flops.value() ==
                     2 * h * n * 8192 * d,
                 tt::tolerance(1e-12));
      BOOST_TEST(b.off_diagonal.flash_full_backward_flops.value() ==
                     2.5 * f.off_diagonal.flash_full_forward_flops.value(),
                 tt::tolerance(1e-12));
      // The kernels' rates go by key length: n for the diagonal block, n/2 for the half blocks.
      for (const auto* pass : {&f, &b}) {
        BOOST_TEST(pass->diagonal.fused_key_length == n);
        BOOST_TEST(pass->off_diagonal.fused_key_length == n / 2);
      }
      // The model FLOPs stay the gather form's: the full square of this rank's queries.
      cost::LayerWork gather = w;
      gather.cp_attention = CpAttention::Gather;
      BOOST_TEST(cost::attention_core_forward(gqa(), w).attention_flops.value() ==
                     cost::attention_core_forward(gqa(), gather).attention_flops.value(),
                 tt::tolerance(1e-12));
      // cp SDPA calls a pass, and the merges only past the first step.
      BOOST_TEST(f.off_diagonal.launches > cp - 1);
      if (ring == CpAttention::TorchRing) {
        // Forward moves nothing but the gather; backward sends the fp32 dK/dV every step, the last exposed.
        BOOST_TEST(f.shifts == 0);
        BOOST_TEST(b.shifts == cp);
        BOOST_TEST(b.tail_shifts == 1);
      } else {
        // TE: no gather; the keys and values one step a time, cp - 1 shifts forward, cp backward (with
        // the gradients), each beside its own block.
        BOOST_TEST(f.kv_gather.value() == 0);
        BOOST_TEST(b.kv_gather.value() == 0);
        BOOST_TEST(f.shifts == cp - 1);
        BOOST_TEST(b.shifts == cp);
        BOOST_TEST(f.tail_shifts + b.tail_shifts == 0);
      }
    }
}

BOOST_AUTO_TEST_CASE(ring_program_has_the_gather_the_blocks_and_the_gradient_sends) {
  for (bool repeat : {false, true}) {
    const ScenarioSpec s = scenario(std::string(kRingScenario) + paratwin_test::fast_cluster(2),
                                    {"training.repeat_kv=" + std::string(repeat ? "true" : "false")});
    const Plan plan = complete_plan(s);
    const Program program = lower(plan, s.model, s.cluster, s.training);
    BOOST_TEST(verify(program).empty());
    const Role& role = program.roles.front();
    int blocks = 0, gathers = 0, sends = 0;
    double gathered = 0, sent = 0;
    for (const Task& t : role.tasks) {
      if (t.purpose == Purpose::AttentionBlocks) ++blocks;
      if (t.kind != TaskKind::Collective || t.group != GroupKind::Cp) continue;
      if (t.collective == cost::CollectiveKind::AllGather) ++gathers, gathered += t.bytes.value() * t.count;
      if (t.collective == cost::CollectiveKind::AllToAll) sends += t.count, sent += t.bytes.value() * t.count;
    }
    // One micro-batch, one forward and one backward pass: diagonal and other blocks each.
    BOOST_TEST(blocks == 4);
    BOOST_TEST(gathers == 2);  // forward, and again backward
    const double layers = 2, cp = 4, n = 8192 / cp, d = 64, k_heads = repeat ? 16 : 4;
    // The whole sequence's keys and values, 2 bytes each, per layer and pass.
    BOOST_TEST(gathered == 2 * layers * 2 * k_heads * 8192 * d * 2, tt::tolerance(1e-12));
    // cp fp32 gradient sends a layer, each to the next rank: all-to-alls whose one-peer share is it.
    BOOST_TEST(sends == layers * cp);
    BOOST_TEST(sent * (cp - 1) / cp == layers * cp * 2 * k_heads * n * d * 4, tt::tolerance(1e-12));
  }
}

BOOST_AUTO_TEST_CASE(ring_buffers_are_held_while_the_ring_runs_and_given_back) {
  // Forward: the gathered keys and values, fp32 running output and logsumexp, a block's output and its
  // upcast; backward: the gathered keys and values, fp32 dQ, dK, dV, the dK/dV in flight, a block's
  // gradients. Elements for cp 4 of gqa(): n = 2048 queries, 16 query and 4 key heads of 64.
  const double n = 2048, O = 16 * n * 64, K = 4 * n * 64, gathered = 2 * 4 * 8192.0 * 64 * 2;
  const auto f = cost::ring_attention(gqa(), work(4), true), b = cost::ring_attention(gqa(), work(4), false);
  BOOST_TEST(f.working.value() == gathered + 4 * O + 4 * 16 * n + 2 * O + 4 * O, tt::tolerance(1e-12));
  BOOST_TEST(b.working.value() == gathered + 4 * (O + 2 * K) + 2 * 2 * K * 4 + 2 * (O + 2 * K),
             tt::tolerance(1e-12));
  // In the Program each pass's ring takes its buffers once and gives them back: the peak grows by the
  // larger of the two, not by one per layer.
  const ScenarioSpec s = scenario(std::string(kRingScenario) + paratwin_test::fast_cluster(2));
  const Program program = lower(complete_plan(s), s.model, s.cluster, s.training);
  double taken = 0, given = 0;
  int takers = 0;
  for (const Task& t : program.roles.front().tasks)
    if (t.kind == TaskKind::Collective && t.group == GroupKind::Cp) {
      taken += t.alloc.value(), given += t.free.value();
      if (t.alloc.value() > 0) ++takers;
    }
  for (const Task& t : program.roles.front().tasks)
    if (t.purpose == Purpose::AttentionBlocks) given += t.free.value();
  BOOST_TEST(takers == 2);
  BOOST_TEST(taken == f.working.value() + b.working.value(), tt::tolerance(1e-12));
  BOOST_TEST(given == taken, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(ring_keeps_the_pass_work_whole) {
  // Lowering takes the blocks out of the pass's task: the role's attention FLOPs stay the model's.
  const ScenarioSpec ring = scenario(std::string(kRingScenario) + paratwin_test::fast_cluster(2));
  const ScenarioSpec gather =
      scenario(std::string(kRingScenario) + paratwin_test::fast_cluster(2), {"training.cp_attention=gather"});
  auto flops = [](const ScenarioSpec& s) {
    const Program p = lower(complete_plan(s), s.model, s.cluster, s.training);
    double sum = 0;
    for (const Task& t : p.roles.front().tasks) sum += t.work.gemm_flops.value();
    return sum;
  };
  BOOST_TEST(flops(ring) == flops(gather), tt::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(attention_costs_more_per_pair_as_the_blocks_shrink) {
  // The same sequence over more CP ranks: smaller blocks, more of them, a merge each; the merges and
  // launches do not shrink with the block, so each (query, key) pair costs more.
  const ClusterSpec dgx = load_cluster_file(paratwin_test::source_dir() + "/topologies/dgx-h100.yaml");
  const DeviceSpec& h100 = dgx.device_of(dgx.pools.front());
  double previous = 0;
  for (int cp : {2, 4, 8, 16, 32}) {
    const cost::LayerWork w = work(cp);
    cost::KernelCost k = cost::attention_core_forward(gqa(), w);
    const auto b = cost::ring_attention(gqa(), w, false);
    k += b.diagonal;
    k += b.off_diagonal;
    const double pairs = 8192.0 * 8192 / 2 / cp;  // this rank's share of the causal square
    const double per_pair = cost::compute_time(k, h100, Precision::Bf16).value() / pairs;
    BOOST_TEST(per_pair > previous);
    previous = per_pair;
  }
}

BOOST_AUTO_TEST_CASE(te_p2p_program_shifts_the_keys_and_values_a_step_at_a_time_in_16_bits) {
  // Megatron-Core does not repeat the kv heads: TE's ring moves them at the kv heads, 2 bytes each, and
  // no all-gather. Forward: cp - 1 shifts of a rank's keys and values a layer; backward: cp shifts
  // carrying the keys and values and their 16-bit gradients, (cp - 1) x 4 K e in all.
  const ScenarioSpec s =
      scenario(std::string(kRingScenario) + paratwin_test::fast_cluster(2), {"training.cp_attention=te_p2p"});
  const Program program = lower(complete_plan(s), s.model, s.cluster, s.training);
  BOOST_TEST(verify(program).empty());
  int blocks = 0, gathers = 0, sends = 0;
  double sent = 0, taken = 0, given = 0;
  for (const Task& t : program.roles.front().tasks) {
    if (t.purpose == Purpose::AttentionBlocks) ++blocks, given += t.free.value();
    if (t.kind != TaskKind::Collective || t.group != GroupKind::Cp) continue;
    taken += t.alloc.value(), given += t.free.value();
    if (t.collective == cost::CollectiveKind::AllGather) ++gathers;
    if (t.collective == cost::CollectiveKind::AllToAll) sends += t.count, sent += t.bytes.value() * t.count;
  }
  BOOST_TEST(blocks == 4);
  BOOST_TEST(gathers == 0);
  const double layers = 2, cp = 4, n = 8192 / cp, d = 64, K = 4 * n * d, e = 2;
  BOOST_TEST(sends == layers * ((cp - 1) + cp));
  BOOST_TEST(sent * (cp - 1) / cp == layers * ((cp - 1) * 2 * K * e + (cp - 1) * 4 * K * e),
             tt::tolerance(1e-12));
  // Each pass's ring takes its buffers once and gives them back.
  const auto f = cost::ring_attention(gqa(), work(4, CpAttention::TeP2p), true);
  const auto b = cost::ring_attention(gqa(), work(4, CpAttention::TeP2p), false);
  BOOST_TEST(taken == f.working.value() + b.working.value(), tt::tolerance(1e-12));
  BOOST_TEST(given == taken, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(te_p2p_merges_in_16_bits_move_less_than_torch_fp32_merges) {
  // Same blocks, same FLOPs; TE keeps every step's output and corrects a 16-bit output once a step,
  // where torch upcasts each step's output and merges it in three fp32 passes, and accumulates the
  // gradients in fp32 (and sends them so: 4 bytes against 2).
  for (int cp : {2, 4, 8}) {
    for (bool forward : {true, false}) {
      const auto torch = cost::ring_attention(gqa(), work(cp), forward);
      const auto te = cost::ring_attention(gqa(), work(cp, CpAttention::TeP2p), forward);
      BOOST_TEST(te.off_diagonal.attention_flops.value() == torch.off_diagonal.attention_flops.value());
      BOOST_TEST(te.off_diagonal.elementwise_bytes.value() < torch.off_diagonal.elementwise_bytes.value());
    }
    const auto torch = cost::ring_attention(gqa(), work(cp), false);
    const auto te = cost::ring_attention(gqa(), work(cp, CpAttention::TeP2p), false);
    BOOST_TEST(te.shift.value() * te.shifts < torch.shift.value() * torch.shifts);
  }
}

BOOST_AUTO_TEST_CASE(torch_alltoall_rotation_sends_the_keys_and_values_a_step_at_a_time) {
  // _AllToAllRotater: no gather; each step before the last sends the keys and values it holds (16 bits,
  // at the heads SDPA sees) to the next rank, forward and backward, where the fp32 gradients ride the
  // same group every step. The blocks and the merges do not change.
  const double e = 2, d = 64, k_heads = 4;
  for (int cp : {2, 4, 8}) {
    cost::LayerWork w = work(cp);
    w.cp_rotate = CpRotate::AllToAll;
    const double n = 8192.0 / cp, K = k_heads * n * d;
    const auto f = cost::ring_attention(gqa(), w, true), b = cost::ring_attention(gqa(), w, false);
    const auto gf = cost::ring_attention(gqa(), work(cp), true),
               gb = cost::ring_attention(gqa(), work(cp), false);
    BOOST_TEST(f.kv_gather.value() == 0);
    BOOST_TEST(b.kv_gather.value() == 0);
    BOOST_TEST(f.shifts == cp - 1);
    BOOST_TEST(f.shift.value() == 2 * K * e, tt::tolerance(1e-12));
    BOOST_TEST(f.tail_shifts == 0);
    BOOST_TEST(b.shifts == 2 * cp - 1);
    BOOST_TEST(b.tail_shifts == 1);
    BOOST_TEST(b.shift.value() * b.shifts == (cp - 1) * 2 * K * e + cp * 2 * K * 4, tt::tolerance(1e-12));
    for (const auto& [rotated, gathered] : {std::pair{&f, &gf}, std::pair{&b, &gb}}) {
      BOOST_TEST(rotated->off_diagonal.elementwise_bytes.value() ==
                 gathered->off_diagonal.elementwise_bytes.value());
      BOOST_TEST(rotated->off_diagonal.attention_flops.value() ==
                 gathered->off_diagonal.attention_flops.value());
      // Three steps' keys and values held instead of the whole sequence's: less from cp 4 up.
      BOOST_TEST(gathered->working.value() - rotated->working.value() == (cp - 3) * 2 * K * e,
                 tt::tolerance(1e-9));
    }
  }
}

BOOST_AUTO_TEST_CASE(torch_alltoall_program_has_no_gather_and_a_shift_per_step) {
  const ScenarioSpec s =
      scenario(std::string(kRingScenario) + paratwin_test::fast_cluster(2), {"training.cp_rotate=alltoall"});
  BOOST_TEST((s.training.cp_rotate == CpRotate::AllToAll));
  const Program program = lower(complete_plan(s), s.model, s.cluster, s.training);
  BOOST_TEST(verify(program).empty());
  int gathers = 0, sends = 0;
  double sent = 0, taken = 0, given = 0;
  for (const Task& t : program.roles.front().tasks) {
    if (t.purpose == Purpose::AttentionBlocks) given += t.free.value();
    if (t.kind != TaskKind::Collective || t.group != GroupKind::Cp) continue;
    taken += t.alloc.value(), given += t.free.value();
    if (t.collective == cost::CollectiveKind::AllGather) ++gathers;
    if (t.collective == cost::CollectiveKind::AllToAll) sends += t.count, sent += t.bytes.value() * t.count;
  }
  BOOST_TEST(gathers == 0);
  const double layers = 2, cp = 4, n = 8192 / cp, K = 4 * n * 64, e = 2;
  // Forward cp - 1 key and value shifts a layer; backward cp - 1 more and cp fp32 gradient shifts.
  BOOST_TEST(sends == layers * ((cp - 1) + (cp - 1) + cp));
  BOOST_TEST(sent * (cp - 1) / cp == layers * (2 * (cp - 1) * 2 * K * e + cp * 2 * K * 4),
             tt::tolerance(1e-12));
  BOOST_TEST(given == taken, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(cp_rotate_needs_the_torch_ring_and_a_known_method) {
  const std::string base = std::string(kRingScenario) + paratwin_test::fast_cluster(2);
  BOOST_CHECK_THROW(scenario(base, {"training.cp_rotate=alltoall", "training.cp_attention=te_p2p"}),
                    InputError);
  BOOST_CHECK_THROW(scenario(base, {"training.cp_rotate=all_to_all"}), InputError);
  BOOST_CHECK_NO_THROW(scenario(base, {"training.cp_rotate=allgather", "training.cp_attention=te_p2p"}));
}

BOOST_AUTO_TEST_CASE(a_misspelt_cp_attention_is_an_input_error) {
  BOOST_CHECK_THROW(scenario(std::string(kRingScenario) + paratwin_test::fast_cluster(2),
                             {"training.cp_attention=torch_rng"}),
                    InputError);
}
