// Collective model: closed forms, and collective_time on the catalog's clusters against their measured
// curves.
#define BOOST_TEST_MODULE cost_collectives
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "catalog_files.hpp"
#include "plan/cost/collectives.hpp"
#include "plan/cost/compute.hpp"
#include "plan/cost/fused_attention_rate.hpp"
#include "plan/cost/layer_collectives.hpp"
#include "plan/cost/memory.hpp"
#include "plan/cost/tp_overlap.hpp"
#include "plan/spec/model.hpp"
#include "plan/spec/scenario.hpp"

using namespace paratwin;
using namespace paratwin::cost;
using namespace paratwin::test;
namespace tt = boost::test_tools;

// ---- collectives: closed forms, n = 1 GB, p = 8, b = 100 GB/s, alpha = 10 us ----

static const Bytes kGB(1e9);
static const BytesPerSecond k100GBps(100e9);
static const Seconds k10us(10e-6);

BOOST_AUTO_TEST_CASE(ring_allreduce_moves_2_p_minus_1_over_p_of_the_buffer) {
  // 2 x 7 x 10 us + 2 x 7/8 x 1 GB / 100 GB/s = 140 us + 17.5 ms
  BOOST_TEST(ring_allreduce_time(kGB, 8, k100GBps, k10us).value() == 0.01764, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(tree_allreduce_pays_log_p_latency_and_2n_over_b) {
  // 2 x ceil(log2 8) x 10 us + 2 x 1 GB / 100 GB/s = 60 us + 20 ms; ceil(log2 5) = 3 as well.
  BOOST_TEST(tree_allreduce_time(kGB, 8, k100GBps, k10us).value() == 0.02006, tt::tolerance(1e-12));
  BOOST_TEST(tree_allreduce_time(kGB, 5, k100GBps, k10us).value() == 0.02006, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(all_gather_reduce_scatter_and_all_to_all_move_p_minus_1_over_p) {
  // 7 x 10 us + 7/8 x 1 GB / 100 GB/s = 70 us + 8.75 ms
  BOOST_TEST(ring_gather_time(kGB, 8, k100GBps, k10us).value() == 0.00882, tt::tolerance(1e-12));
  BOOST_TEST(alltoall_time(kGB, 8, k100GBps, k10us).value() == 0.00882, tt::tolerance(1e-12));
  // Chain broadcast: 70 us + 10 ms.
  BOOST_TEST(broadcast_time(kGB, 8, k100GBps, k10us).value() == 0.01007, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(one_rank_communicates_for_free) {
  const ClusterSpec dgx = cluster("dgx-a100-80g");
  BOOST_TEST(ring_allreduce_time(kGB, 1, k100GBps, k10us).value() == 0);
  BOOST_TEST(tree_allreduce_time(kGB, 1, k100GBps, k10us).value() == 0);
  BOOST_TEST(ring_gather_time(kGB, 1, k100GBps, k10us).value() == 0);
  BOOST_TEST(alltoall_time(kGB, 1, k100GBps, k10us).value() == 0);
  BOOST_TEST(broadcast_time(kGB, 1, k100GBps, k10us).value() == 0);
  BOOST_TEST(collective_time(CollectiveKind::AllReduce, kGB, {1, 1, false}, dgx.pools[0], dgx).time.value() ==
             0);
}

// ---- collective_time on the catalog's clusters ----

// The cluster without its measured busbw curves: the alpha-beta algorithms alone.
static ClusterSpec alpha_beta(const std::string& name) {
  ClusterSpec c = cluster(name);
  for (PoolSpec& p : c.pools)
    p.intra_node.all_reduce_curve = p.intra_node.all_gather_curve = p.intra_node.reduce_scatter_curve =
        std::nullopt;
  return c;
}

BOOST_AUTO_TEST_CASE(group_inside_a_node_follows_the_measured_curve_at_its_size) {
  const ClusterSpec dgx = cluster("dgx-a100-80g");
  auto time = [&](CollectiveKind k, double n, int p) {
    return collective_time(k, Bytes(n), {p, p, false}, dgx.pools[0], dgx).time.value();
  };
  // At a measured size: 1 GiB x 2 x 7/8 / 228.10 GB/s (Azure's 8x A100 nccl-tests curve).
  const double GiB = 1024.0 * 1024 * 1024;
  BOOST_TEST(time(CollectiveKind::AllReduce, GiB, 8) == GiB * 1.75 / 228.10e9, tt::tolerance(1e-12));
  // Between two sizes busbw moves on log-log axes: 48 MiB lies half-way (in log size) from 32 to 64 MiB
  // only as 1.585 of 2, so its busbw is 132.77 x (166.63 / 132.77)^0.585.
  const double MiB = 1024.0 * 1024, x = std::log(1.5) / std::log(2.0);
  const double busbw = 132.77e9 * std::pow(166.63 / 132.77, x);
  BOOST_TEST(time(CollectiveKind::AllReduce, 48 * MiB, 8) == 48 * MiB * 1.75 / busbw, tt::tolerance(1e-9));
  // Small messages are latency-bound: below 32 KiB the time stays the 32 KiB point's.
  BOOST_TEST(time(CollectiveKind::AllReduce, 1024, 8) == time(CollectiveKind::AllReduce, 32 * 1024, 8));
  // Mid-size messages reach well under the large-message busbw the alpha-beta form takes for all:
  // 109 GB/s at 16 MiB, 1.7x the alpha-beta time.
  BOOST_TEST(time(CollectiveKind::AllReduce, 16 * MiB, 8) > 1.6 * (28e-6 + 16 * MiB * 1.75 / 230e9));
  // An all-gather without a curve of its own takes the all-reduce curve's busbw at its size.
  BOOST_TEST(time(CollectiveKind::AllGather, GiB, 8) == GiB * 7 / 8 / 228.10e9, tt::tolerance(1e-12));
  // H100 has its own all-gather curve (ring: 344.57 GB/s at 1 GiB) beside NVLink SHARP's all-reduce.
  const ClusterSpec h100 = cluster("dgx-h100");
  BOOST_TEST(collective_time(CollectiveKind::AllGather, Bytes(GiB), {8, 8, false}, h100.pools[0], h100)
                     .time.value() == GiB * 7 / 8 / 344.57e9,
             tt::tolerance(1e-12));
  BOOST_TEST(collective_time(CollectiveKind::AllReduce, Bytes(GiB), {8, 8, false}, h100.pools[0], h100)
                     .time.value() == GiB * 1.75 / 466.91e9,
             tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(group_inside_a_node_uses_the_measured_intra_node_busbw) {
  // DGX A100 without curves: 8 GPUs, all-reduce busbw 230 GB/s, 2 us: 2 x 7 x 2 us + 1.75 x 1 GB / 230 GB/s.
  const ClusterSpec dgx = alpha_beta("dgx-a100-80g");
  const CollectiveCost c = collective_time(CollectiveKind::AllReduce, kGB, {8, 8, false}, dgx.pools[0], dgx);
  BOOST_TEST(c.time.value() == 28e-6 + 1.75 / 230, tt::tolerance(1e-12));
  BOOST_TEST((c.algorithm == Algorithm::Ring));
}

BOOST_AUTO_TEST_CASE(nvlink_sharp_reduces_in_the_switch_when_faster) {
  // H100 node: ring 28 us + 1.75 GB / 370 GB/s = 4.76 ms; SHARP 2 x 2 us + 1 GB / 370 GB/s = 2.71 ms.
  const ClusterSpec roce = alpha_beta("h100-roce");
  const CollectiveCost c =
      collective_time(CollectiveKind::AllReduce, kGB, {8, 8, false}, roce.pools[0], roce);
  BOOST_TEST(c.time.value() == 4e-6 + 1.0 / 370, tt::tolerance(1e-12));
  BOOST_TEST((c.algorithm == Algorithm::Sharp));
}

BOOST_AUTO_TEST_CASE(one_member_per_node_uses_a_gpus_share_of_the_nics) {
  // DGX A100: 8 NICs x 24 GB/s achievable / 8 GPUs = 24 GB/s; alpha = 2 us NIC + 2 x 1 us switch.
  // 16 nodes, 1 GB: ring 2 x 15 x 4 us + 2 x 15/16 GB / 24 GB/s = 78.245 ms beats tree 83.365 ms.
  const ClusterSpec dgx = cluster("dgx-a100-80g");
  const CollectiveCost big =
      collective_time(CollectiveKind::AllReduce, kGB, {16, 1, false}, dgx.pools[0], dgx);
  BOOST_TEST(big.time.value() == 0.078245, tt::tolerance(1e-12));
  BOOST_TEST((big.algorithm == Algorithm::Ring));
  // 1 kB: tree 2 x 4 x 4 us + 2 kB / 24 GB/s = 32.08 us beats ring's 120 us of latency.
  const CollectiveCost small =
      collective_time(CollectiveKind::AllReduce, Bytes(1e3), {16, 1, false}, dgx.pools[0], dgx);
  BOOST_TEST(small.time.value() == 32e-6 + 2e3 / 24e9, tt::tolerance(1e-12));
  BOOST_TEST((small.algorithm == Algorithm::Tree));
}

BOOST_AUTO_TEST_CASE(hierarchical_all_gather_wins_on_latency_and_flat_ring_on_bandwidth) {
  // 16 DGX A100 nodes x 8 members. Flat ring: 127 steps of 4 us, bandwidth min(230, 8 x 24) = 192 GB/s.
  // Hierarchical: across 16 nodes on n/8 at 24 GB/s, then inside the node at 230 GB/s, 2 us.
  const ClusterSpec dgx = alpha_beta("dgx-a100-80g");
  auto flat = [](double n) { return 127 * 4e-6 + 127.0 / 128 * n / 192e9; };
  auto hier = [](double n) { return 15 * 4e-6 + 15.0 / 16 * n / 8 / 24e9 + 7 * 2e-6 + 7.0 / 8 * n / 230e9; };
  const CollectiveCost mid =
      collective_time(CollectiveKind::AllGather, Bytes(64e6), {128, 8, false}, dgx.pools[0], dgx);
  BOOST_TEST(mid.time.value() == hier(64e6), tt::tolerance(1e-12));  // 0.630 ms against 0.839 ms
  BOOST_TEST((mid.algorithm == Algorithm::Hierarchical));
  const CollectiveCost big =
      collective_time(CollectiveKind::AllGather, Bytes(8e9), {128, 8, false}, dgx.pools[0], dgx);
  BOOST_TEST(big.time.value() == flat(8e9), tt::tolerance(1e-12));  // 41.8 ms against 69.6 ms
  BOOST_TEST((big.algorithm == Algorithm::Ring));
}

BOOST_AUTO_TEST_CASE(crossing_pods_divides_nic_bandwidth_by_the_oversubscription) {
  // h100-roce: 8 x 48 GB/s / 8 = 48 GB/s per GPU, 7:1 above the pods; alpha 3 us + 2 x 1 us.
  const ClusterSpec roce = cluster("h100-roce");
  const Seconds alpha(5e-6);
  const CollectiveCost inside =
      collective_time(CollectiveKind::AllReduce, kGB, {16, 1, false}, roce.pools[0], roce);
  const CollectiveCost across =
      collective_time(CollectiveKind::AllReduce, kGB, {16, 1, true}, roce.pools[0], roce);
  BOOST_TEST(inside.time.value() == ring_allreduce_time(kGB, 16, BytesPerSecond(48e9), alpha).value(),
             tt::tolerance(1e-12));
  BOOST_TEST(across.time.value() == ring_allreduce_time(kGB, 16, BytesPerSecond(48e9 / 7), alpha).value(),
             tt::tolerance(1e-12));
  BOOST_TEST(across.time.value() == 0.2735875, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(all_to_all_across_nodes_sends_only_the_remote_share_through_the_nics) {
  // 16 ranks on 2 DGX A100 nodes: 8/16 of n leaves through 24 GB/s while 7/16 crosses NVSwitch.
  const ClusterSpec dgx = cluster("dgx-a100-80g");
  const CollectiveCost c = collective_time(CollectiveKind::AllToAll, kGB, {16, 8, false}, dgx.pools[0], dgx);
  BOOST_TEST(c.time.value() == 15 * 4e-6 + 0.5 / 24, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(point_to_point_uses_the_fabric_inside_a_node_and_a_nic_share_across) {
  const ClusterSpec dgx = cluster("dgx-a100-80g");
  BOOST_TEST(p2p_time(kGB, true, dgx.pools[0], dgx).value() == 2e-6 + 1.0 / 300, tt::tolerance(1e-12));
  BOOST_TEST(p2p_time(kGB, false, dgx.pools[0], dgx).value() == 4e-6 + 1.0 / 24, tt::tolerance(1e-12));
}
