// Cluster files: devices, pools, network; resizing; derived totals.
#define BOOST_TEST_MODULE cluster
#include <boost/test/unit_test.hpp>

#include "plan/spec/catalog.hpp"
#include "plan/spec/cluster.hpp"
#include "plan/spec/scenario.hpp"
#include "source_tree.hpp"

using namespace paratwin;

static ClusterSpec catalog_cluster(const std::string& name) {
  auto path = Catalog(paratwin_test::source_dir()).find(CatalogKind::Topology, name);
  BOOST_REQUIRE_MESSAGE(path, "catalog topology " << name);
  return load_cluster_file(*path);
}

BOOST_AUTO_TEST_CASE(dgx_a100_figures_come_through_in_si_units) {
  const ClusterSpec c = catalog_cluster("dgx-a100-80g");
  BOOST_REQUIRE(c.pools.size() == 1u);
  const PoolSpec& p = c.pools.front();
  const DeviceSpec& d = c.device_of(p);
  BOOST_TEST(d.peak.at(Precision::Bf16).value() == 312e12);
  BOOST_TEST(d.memory.value() == 80.0 * (1ull << 30));
  BOOST_TEST(p.gpus_per_node == 8);
  BOOST_TEST(p.nic.count == 8);
  BOOST_TEST(p.nic.bandwidth.value() == 25e9);  // 200 Gb/s
  BOOST_TEST(p.nic.achievable->value() == 24e9);
  BOOST_TEST((p.intra_node.kind == FabricKind::NvSwitch));
  BOOST_TEST((c.network.topology == NetworkTopology::FatTree));
}

BOOST_AUTO_TEST_CASE(heterogeneous_clusters_keep_their_pools_in_file_order) {
  const ClusterSpec c = catalog_cluster("hetero-h100-a100");
  BOOST_REQUIRE(c.pools.size() == 2u);
  BOOST_TEST(c.pools[0].name == "h100");
  BOOST_TEST(c.pools[1].name == "a100");
  BOOST_TEST(c.devices.size() == 2u);
  BOOST_TEST(c.peak(Precision::Bf16).value() == c.pools[0].gpus() * 989e12 + c.pools[1].gpus() * 312e12,
             boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(v100_has_no_bf16_peak) {
  const ClusterSpec c = catalog_cluster("hetero-a100-v100");
  for (const auto& p : c.pools)
    if (p.name == "v100") BOOST_TEST(!c.device_of(p).peak.contains(Precision::Bf16));
}

BOOST_AUTO_TEST_CASE(oversubscription_reads_as_a_ratio) {
  const ClusterSpec c = catalog_cluster("h100-roce");
  BOOST_TEST(c.network.oversubscription == 7.0);
  BOOST_TEST(c.network.pod_gpus.value_or(0) == 3072);
  BOOST_TEST(c.gpus() == 16384);
}

BOOST_AUTO_TEST_CASE(nodes_at_the_top_resizes_a_one_pool_cluster) {
  DocNode doc = load_yaml_file(*Catalog(paratwin_test::source_dir()).find(CatalogKind::Topology, "dgx-h100"));
  doc.set("nodes", DocNode::scalar_node("2", {"t", 1, 1}), {"t", 1, 1});
  Diagnostics diag;
  const ClusterSpec c = parse_cluster(doc, "cluster", diag);
  BOOST_TEST(!diag.has_errors());
  BOOST_TEST(c.gpus() == 16);
}

BOOST_AUTO_TEST_CASE(fused_attention_rates_by_key_length_survive_a_round_trip) {
  const ClusterSpec c = catalog_cluster("dgx-h100");
  const auto& flash2 = c.device_of(c.pools[0]).efficiency.flash2;
  BOOST_REQUIRE(flash2.has_value());
  BOOST_TEST(flash2->seq_len == 8192);
  BOOST_REQUIRE(flash2->by_seq_len.contains(2048));
  BOOST_TEST(flash2->by_seq_len.at(2048).forward == 0.257);
  BOOST_TEST(*flash2->by_seq_len.at(2048).forward_full == 0.366);
  Diagnostics diag;
  const ClusterSpec again = parse_cluster(parse_yaml(to_yaml(c), "round-trip"), "cluster", diag);
  BOOST_TEST(!diag.has_errors());
  const auto& back = again.device_of(again.pools[0]).efficiency.flash2;
  BOOST_REQUIRE(back.has_value());
  BOOST_TEST(back->seq_len == 8192);
  BOOST_TEST(back->by_seq_len.size() == flash2->by_seq_len.size());
  for (const auto& [length, rates] : flash2->by_seq_len) {
    BOOST_TEST(back->by_seq_len.at(length).backward == rates.backward);
    BOOST_TEST(*back->by_seq_len.at(length).backward_full == *rates.backward_full);
  }
  // The Triton kernel's figures (efficiency.triton) come through and back the same way.
  const auto& triton = c.device_of(c.pools[0]).efficiency.triton;
  const auto& triton_back = again.device_of(again.pools[0]).efficiency.triton;
  BOOST_REQUIRE(triton.has_value());
  BOOST_REQUIRE(triton_back.has_value());
  BOOST_TEST(triton->seq_len == 8192);
  BOOST_TEST(triton->forward == 0.133);
  BOOST_TEST(triton_back->by_seq_len.size() == triton->by_seq_len.size());
  BOOST_TEST(triton_back->by_seq_len.at(2048).forward == 0.118);
}
