// Platform construction.
//
//                         fabric (star zone: one non-blocking switch)
//        +------------------+----------+-------------------+
//        |  uplink (only when oversubscribed: domain NICs' bandwidth / oversubscription)
//   [domain 0: pod, leaf or rail]   [domain 1]  ...          (star zone per domain)
//     |      |      |      |
//    nic0   nic1   nic2   nic3 ...                         (one endpoint per NIC, its own link)
//
//   node zones (star zone per node), not routed to the fabric:
//     gpu0 --nvlink--+
//     gpu1 --nvlink--+-- NVSwitch                           (one link per GPU)
//     ...
//
// A GPU's inter-node traffic leaves from its NIC's endpoint (GPUDirect RDMA does not cross NVLink),
// so NVLink and NIC traffic never share a link. Below the oversubscribed level the fabric has full
// bisection, which a link could never limit beyond the NICs, so it is not modelled.
#include "sim/platform.hpp"

#include <map>
#include <stdexcept>

#include <xbt/log.h>

#include "plan/topology/link_names.hpp"

namespace sg4 = simgrid::s4u;

namespace paratwin::sim {
namespace {

sg4::Link* duplex_link(sg4::NetZone* zone, const std::string& name, double bandwidth_Bps) {
  return zone->create_split_duplex_link(name, bandwidth_Bps)->set_latency(0)->seal();
}

// A host reached without a link of its own: flows to it load only the sender's side of the route.
sg4::Host* endpoint_without_link(sg4::NetZone* zone, const std::string& name) {
  sg4::Host* host = zone->create_host(name, kWorkPerSecond)->seal();
  zone->add_route(host->get_netpoint(), nullptr, nullptr, nullptr, std::vector<sg4::LinkInRoute>{}, true);
  return host;
}

// The GPUs that simulated ranks of any of the layouts run on; `all_used`: no layout folds ranks.
std::vector<char> simulated_gpus(const std::vector<const RankLayout*>& layouts, bool& all_used) {
  std::vector<char> used(size_t(layouts.front()->gpus()), 0);
  all_used = true;
  for (const RankLayout* l : layouts) {
    for (int rank = 0; rank < l->world(); ++rank)
      if (l->simulated(rank)) used[size_t(l->gpu_of(rank))] = 1;
    all_used = all_used && l->simulated_ranks() == l->world();
  }
  return used;
}

// Per fabric domain: the plan ranks of all layouts in it, and how many of them are simulated.
std::map<int, std::pair<int, int>> ranks_in_domains(const std::vector<const RankLayout*>& layouts,
                                                    const std::vector<int>& nic_domain) {
  std::map<int, std::pair<int, int>> ranks_in;
  for (const RankLayout* l : layouts)
    for (int rank = 0; rank < l->world(); ++rank) {
      auto& [planned, simulated] = ranks_in[nic_domain[size_t(l->site(l->gpu_of(rank)).nic)]];
      ++planned;
      simulated += l->simulated(rank) ? 1 : 0;
    }
  return ranks_in;
}

}  // namespace

Platform build_platform(const ClusterSpec& cluster, const RankLayout& layout,
                        const std::vector<double>& gpu_slowdown) {
  return build_platform(cluster, std::vector<const RankLayout*>{&layout}, gpu_slowdown);
}

Platform build_platform(const ClusterSpec& cluster, const std::vector<const RankLayout*>& layouts,
                        const std::vector<double>& gpu_slowdown) {
  Platform pf;
  auto* root = sg4::create_star_zone("cluster");
  const RankLayout& layout = *layouts.front();  // sites, NICs and domains: the whole cluster's

  // SimGrid 3.32 checks each new host's and link's name against the whole platform (a walk over
  // every zone), so building is quadratic in their number: only GPUs of simulated ranks and the NICs
  // they use are created. A flow to a folded rank's GPU goes to the node's NVSwitch instead, and one to
  // its NIC to its fabric domain's sink: the sender's ports carry it as in the full simulation, and the
  // folded rank's own ports carry what its symmetric twin sends and receives.
  bool all_used = true;
  const std::vector<char> used = simulated_gpus(layouts, all_used);

  // Nodes: GPUs on their NVLink/NVSwitch.
  pf.gpus.resize(layout.gpus());
  int gpu = 0;
  for (int node = 0; node < layout.nodes(); ++node) {
    const PoolSpec& pool = cluster.pools[layout.site(gpu).pool];
    auto* zone = sg4::create_star_zone("node" + std::to_string(node));
    zone->set_parent(root);
    sg4::Host* nvswitch = nullptr;
    if (!all_used) {
      nvswitch = zone->create_host("node" + std::to_string(node) + "-nvswitch", kWorkPerSecond)->seal();
      zone->add_route(nvswitch->get_netpoint(), nullptr, nullptr, nullptr, std::vector<sg4::LinkInRoute>{},
                      true);
    }
    for (int g = 0; g < pool.gpus_per_node; ++g, ++gpu) {
      if (!all_used && !used[gpu]) {
        pf.gpus[gpu] = nvswitch;
        continue;
      }
      const double slowdown = gpu_slowdown.empty() ? 1.0 : gpu_slowdown[gpu];
      sg4::Host* host = zone->create_host(gpu_host_name(node, g), kWorkPerSecond / slowdown)->seal();
      sg4::Link* nvlink = duplex_link(zone, gpu_link_name(node, g), pool.intra_node.bandwidth.value());
      zone->add_route(host->get_netpoint(), nullptr, nullptr, nullptr,
                      {{nvlink, sg4::LinkInRoute::Direction::UP}}, true);
      pf.gpus[gpu] = host;
      if (node == 0) pf.watched.push_back(nvlink);
    }
    zone->seal();
  }

  // The fabric: NIC endpoints, grouped in domains when the level above them is oversubscribed.
  auto* fabric = sg4::create_star_zone("fabric");
  fabric->set_parent(root);
  const bool oversubscribed = layout.sites().oversubscribed(cluster);
  std::vector<char> nic_used(layout.nics(), 0);
  for (int g = 0; g < layout.gpus(); ++g)
    if (used[g]) nic_used[layout.site(g).nic] = 1;
  const auto first_gpu = [&layout](int nic) { return layout.sites().first_gpu_of_nic(nic); };

  std::map<int, std::vector<int>> domains;  // domain -> NICs
  std::vector<int> nic_domain(layout.nics());
  for (int nic = 0; nic < layout.nics(); ++nic) {
    if (first_gpu(nic) < 0) continue;  // more NICs than GPUs on a node: no GPU's traffic uses it
    nic_domain[nic] = oversubscribed ? layout.sites().fabric_domain(cluster, nic) : 0;
    domains[nic_domain[nic]].push_back(nic);
  }
  // A domain's uplink is shared by the ranks in it; each simulated rank there stands for
  // plan ranks / simulated ranks of them (with folded TP lanes on a leaf: tp; on a rail: 1).
  const std::map<int, std::pair<int, int>> ranks_in = ranks_in_domains(layouts, nic_domain);

  pf.nics.resize(layout.nics());
  std::vector<sg4::Link*> uplinks;
  std::vector<sg4::Link*> first_node_nics;
  for (const auto& [domain, nics] : domains) {
    sg4::NetZone* zone = fabric;
    if (oversubscribed) {
      zone = sg4::create_star_zone(domain_name(domain));
      zone->set_parent(fabric);
    }
    double total_Bps = 0;
    sg4::Host* sink = nullptr;
    for (int nic : nics) {
      const PoolSpec& pool = cluster.pools[layout.site(first_gpu(nic)).pool];
      const double bw = pool.nic.achievable.value_or(pool.nic.bandwidth).value();
      total_Bps += bw;
      if (!all_used && !nic_used[nic]) {
        if (!sink) sink = endpoint_without_link(zone, domain_name(domain) + "-sink");
        pf.nics[nic] = sink;
        continue;
      }
      sg4::Host* host = zone->create_host(nic_host_name(nic), kWorkPerSecond)->seal();
      sg4::Link* link = duplex_link(zone, nic_link_name(nic), bw);
      zone->add_route(host->get_netpoint(), nullptr, nullptr, nullptr,
                      {{link, sg4::LinkInRoute::Direction::UP}}, true);
      pf.nics[nic] = host;
      if (layout.site(first_gpu(nic)).node == 0) first_node_nics.push_back(link);
    }
    if (oversubscribed) {
      auto* gateway = zone->create_router(domain_name(domain) + "-gw");
      zone->add_route(gateway, nullptr, nullptr, nullptr, std::vector<sg4::LinkInRoute>{}, true);
      zone->seal();
      const auto found = ranks_in.find(domain);  // a domain no rank uses: its full capacity
      const auto [planned, simulated] = found == ranks_in.end() ? std::pair{0, 0} : found->second;
      const double represented = simulated > 0 ? double(planned) / simulated : 1.0;
      sg4::Link* up = duplex_link(fabric, uplink_name(domain),
                                  total_Bps / cluster.network.oversubscription / represented);
      fabric->add_route(zone->get_netpoint(), nullptr, gateway, nullptr,
                        {{up, sg4::LinkInRoute::Direction::UP}}, true);
      uplinks.push_back(up);
    }
  }
  fabric->seal();
  root->seal();

  // Watched: up to 16 uplinks, then node 0's NICs and NVLinks (already in `watched`).
  std::vector<sg4::Link*> watched(uplinks.begin(), uplinks.begin() + std::min<size_t>(uplinks.size(), 16));
  watched.insert(watched.end(), first_node_nics.begin(), first_node_nics.end());
  watched.insert(watched.end(), pf.watched.begin(), pf.watched.end());
  // A split-duplex link has no usage of its own: watch its outgoing (UP) half.
  pf.watched.clear();
  for (sg4::Link* l : watched) pf.watched.push_back(sg4::Link::by_name(l->get_name() + "_UP"));
  return pf;
}

void configure_engine() {
  xbt_log_control_set("root.thresh:critical");
  // No correction factors and no TCP window bound: a lone flow gets its links' bandwidth exactly.
  sg4::Engine::set_config("network/model:CM02");
  sg4::Engine::set_config("network/crosstraffic:0");
  sg4::Engine::set_config("contexts/stack-size:128");
  // No guard page per actor stack: each is a memory mapping of its own, and Linux allows 65,536 of them
  // by default, which 16K simulated ranks of 4 streams would pass.
  sg4::Engine::set_config("contexts/guard-size:0");
}

void LinkTally::add(sg4::Host* src, sg4::Host* dst, double bytes, int job) {
  auto [route, fresh] = routes_.try_emplace({src, dst});
  if (fresh) {
    std::vector<sg4::Link*> links;
    src->route_to(dst, links, nullptr);
    for (sg4::Link* l : links) {
      std::string name = l->get_name();
      for (const std::string half : {"_UP", "_DOWN"})
        if (name.ends_with(half)) name.resize(name.size() - half.size());
      auto [at, added] = index_.try_emplace(name, links_.size());
      if (added) links_.push_back({name, l->get_bandwidth(), std::vector<double>(size_t(jobs_), 0.0)});
      route->second.push_back(at->second);
    }
  }
  for (size_t l : route->second) links_[l].bytes[size_t(job)] += bytes;
}

std::vector<LinkBytes> LinkTally::links() const {
  std::vector<LinkBytes> out;
  for (const auto& [name, l] : index_) out.push_back(links_[l]);
  return out;
}

long long run_phase(const Phase& phase, const Platform& platform, const RankLayout& layout,
                    const std::vector<char>& gpu_simulated, LinkTally* tally, int job) {
  long long activities = 0;
  if (phase.latency_s > 0) {
    sg4::this_actor::sleep_for(phase.latency_s);
    ++activities;
  }
  std::vector<sg4::CommPtr> comms;
  comms.reserve(phase.flows.size());
  for (const Flow& f : phase.flows) {
    if (f.bytes <= 0 || !gpu_simulated[f.src_gpu]) continue;  // folded lanes send nothing
    sg4::Host* src =
        f.path == Path::Nic ? platform.nics[layout.site(f.src_gpu).nic] : platform.gpus[f.src_gpu];
    sg4::Host* dst =
        f.path == Path::Nic ? platform.nics[layout.site(f.dst_gpu).nic] : platform.gpus[f.dst_gpu];
    if (src == nullptr || dst == nullptr)
      throw std::logic_error("a flow reaches a NIC that no simulated rank uses");
    if (src == dst) continue;  // two members behind one NIC: no wire between them
    if (tally) tally->add(src, dst, f.bytes, job);
    comms.push_back(sg4::Comm::sendto_async(src, dst, static_cast<uint64_t>(f.bytes)));
  }
  activities += static_cast<long long>(comms.size());
  if (!comms.empty()) sg4::Comm::wait_all(comms);
  return activities;
}

}  // namespace paratwin::sim
