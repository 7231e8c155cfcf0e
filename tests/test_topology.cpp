// The rank order parsed in one place (plan/topology): strides and coordinates under every order the
// scenario language accepts, the GPU and NIC sites of a cluster, fabric domains and link names.
#define BOOST_TEST_MODULE topology
#include <boost/test/unit_test.hpp>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "catalog_scenario.hpp"
#include "plan/spec/scenario.hpp"
#include "plan/topology/cluster_sites.hpp"
#include "plan/topology/link_names.hpp"
#include "plan/topology/rank_order.hpp"

using namespace paratwin;

namespace {

// A catalog cluster resized to `nodes`, as a scenario names it.
ClusterSpec cluster(const std::string& name, int nodes) {
  const std::string yaml = "model: tiny-gpt\ncluster: {from: " + name + ", nodes: " + std::to_string(nodes) +
                           "}\ntraining: {global_batch: 8}\n";
  return load_scenario(parse_yaml(yaml, "test.yaml"), {}, paratwin_test::catalog()).cluster;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_order_gives_each_rank_distinct_coordinates_fastest_dimension_first) {
  Plan p;
  p.tp = 2, p.cp = 3, p.dp = 4, p.pp = 5;
  for (const std::string& order : kRankOrders) {
    p.order = order;
    const RankStrides s = rank_strides(p);
    // The first dimension named varies fastest; the last has the largest stride.
    const auto first = order.substr(0, 2), last = order.substr(order.size() - 2);
    const std::map<std::string, long long> stride = {{"tp", s.tp}, {"cp", s.cp}, {"dp", s.dp}, {"pp", s.pp}};
    BOOST_TEST(stride.at(first) == 1);
    BOOST_TEST(stride.at(last) == p.gpus() / (last == "tp"   ? p.tp
                                              : last == "cp" ? p.cp
                                              : last == "dp" ? p.dp
                                                             : p.pp));
    std::set<std::tuple<int, int, int, int>> seen;
    for (int r = 0; r < p.gpus(); ++r) {
      const RankCoords c = rank_coords(p, r);
      BOOST_TEST(rank_of(s, c) == r);
      seen.insert({c.tp, c.cp, c.dp, c.pp});
    }
    BOOST_TEST(seen.size() == size_t(p.gpus()));
  }
}

BOOST_AUTO_TEST_CASE(an_order_naming_an_unknown_dimension_is_a_programming_error) {
  BOOST_CHECK_THROW(rank_strides("tp-xp-dp-pp", 1, 1, 1, 1), std::logic_error);
}

BOOST_AUTO_TEST_CASE(gpus_share_their_nodes_nics_evenly_and_nics_are_counted_over_the_cluster) {
  const ClusterSpec c = cluster("dgx-a100-80g", 2);  // 8 GPUs and 8 NICs a node
  const ClusterSites sites(c);
  BOOST_TEST(sites.gpus() == 16);
  BOOST_TEST(sites.nodes() == 2);
  BOOST_TEST(sites.nics() == 16);
  BOOST_TEST(sites.site(11).node == 1);
  BOOST_TEST(sites.site(11).local == 3);
  BOOST_TEST(sites.site(11).nic == 11);
  BOOST_TEST(sites.first_gpu_of_nic(11) == 11);
}

BOOST_AUTO_TEST_CASE(a_rail_optimized_fabric_groups_each_nodes_nic_k_on_rail_k) {
  const ClusterSpec c = cluster("dgx-h100", 4);
  BOOST_REQUIRE(c.network.topology == NetworkTopology::RailOptimized);
  const ClusterSites sites(c);
  for (int nic = 0; nic < sites.nics(); ++nic)
    BOOST_TEST(sites.fabric_domain(c, nic) == sites.site(sites.first_gpu_of_nic(nic)).local);
}

BOOST_AUTO_TEST_CASE(links_are_named_as_the_simulator_reports_them) {
  BOOST_TEST(gpu_link_name(3, 7) == "node3-gpu7-nvlink");
  BOOST_TEST(nic_link_name(12) == "nic12-link");
  BOOST_TEST(uplink_name(2) == "domain2-uplink");
}
