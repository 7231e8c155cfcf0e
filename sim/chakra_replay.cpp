// One actor per node, started when the node's last dependency ends; collectives driven by their last
// arriving member, receives waiting for their send's flows, as the Program interpreter does.
#include "sim/chakra_replay.hpp"

#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <simgrid/s4u.hpp>
#include <stdexcept>
#include <tuple>

#include "plan/spec/diagnostics.hpp"
#include "plan/util/child_process.hpp"
#include "sim/platform.hpp"

namespace sg4 = simgrid::s4u;

namespace paratwin::sim {
namespace {

using chakra::ReplayKind;
using chakra::ReplayNode;

struct Instance {
  size_t arrived = 0;
  bool done = false;
};

struct RankState {
  std::vector<int> waiting;                // per node: dependencies not ended yet
  std::vector<std::vector<int>> children;  // per node: the nodes that depend on it
  sg4::ConditionVariablePtr changed;       // a collective of the rank ended, or a send to it arrived
  double end_s = 0;
};

class Replayer {
 public:
  Replayer(const chakra::ReplayWorkload& w, const ClusterSpec& cluster, const RankLayout& layout,
           const Platform& platform)
      : w_(w), cluster_(cluster), layout_(layout), platform_(platform), all_gpus_(layout.gpus(), 1) {
    mutex_ = sg4::Mutex::create();
    ranks_.resize(w.ranks.size());
    for (size_t r = 0; r < w.ranks.size(); ++r) {
      RankState& rs = ranks_[r];
      const auto& nodes = w.ranks[r];
      rs.waiting.resize(nodes.size());
      rs.children.resize(nodes.size());
      rs.changed = sg4::ConditionVariable::create();
      for (size_t i = 0; i < nodes.size(); ++i) {
        rs.waiting[i] = static_cast<int>(nodes[i].deps.size());
        for (int d : nodes[i].deps) rs.children[static_cast<size_t>(d)].push_back(static_cast<int>(i));
      }
    }
  }

  void start() {
    for (size_t r = 0; r < ranks_.size(); ++r)
      for (size_t i = 0; i < ranks_[r].waiting.size(); ++i)
        if (ranks_[r].waiting[i] == 0) spawn(static_cast<int>(r), static_cast<int>(i));
  }

  ReplayResult result() const {
    ReplayResult out;
    for (const RankState& rs : ranks_) {
      out.rank_end_s.push_back(rs.end_s);
      out.end_s = std::max(out.end_s, rs.end_s);
    }
    out.nodes = replayed_;
    out.activities = activities_;
    return out;
  }

 private:
  int gpu(int rank) const { return layout_.gpu_of(rank); }
  const PoolSpec& pool_of(int gpu) const {
    return cluster_.pools[static_cast<size_t>(layout_.site(gpu).pool)];
  }

  void spawn(int rank, int node) {
    sg4::Actor::create("r" + std::to_string(rank) + "n" + std::to_string(node), platform_.gpus[gpu(rank)],
                       [this, rank, node] { run(rank, node); });
  }

  // Actors run one at a time and yield only inside simcalls, so the counters need no lock; waiting on a
  // condition variable does.
  template <class Ready>
  void wait_until(int rank, Ready ready) {
    if (ready()) return;
    std::unique_lock lock(*mutex_);
    while (!ready()) ranks_[static_cast<size_t>(rank)].changed->wait(lock);
  }

  void run(int rank, int index) {
    const ReplayNode& n = w_.ranks[static_cast<size_t>(rank)][static_cast<size_t>(index)];
    switch (n.kind) {
      case ReplayKind::Compute:
        if (n.duration_s > 0) {
          sg4::this_actor::execute(n.duration_s * kWorkPerSecond);
          ++activities_;
        }
        break;
      case ReplayKind::Memory:  // host copies ride PCIe, which nothing else uses here
        if (n.duration_s > 0) {
          sg4::this_actor::sleep_for(n.duration_s);
          ++activities_;
        }
        break;
      case ReplayKind::Collective:
        collective(rank, n);
        break;
      case ReplayKind::Send:
        send(rank, n);
        break;
      case ReplayKind::Recv:
        wait_until(rank, [&] { return arrived_.count({n.peer, rank, n.tag, n.occurrence}) > 0; });
        break;
      case ReplayKind::Nothing:
        break;
    }
    RankState& rs = ranks_[static_cast<size_t>(rank)];
    rs.end_s = std::max(rs.end_s, sg4::Engine::get_clock());
    ++replayed_;
    for (int c : rs.children[static_cast<size_t>(index)])
      if (--rs.waiting[static_cast<size_t>(c)] == 0) spawn(rank, c);
  }

  void collective(int rank, const ReplayNode& n) {
    const std::vector<int>& members = w_.groups.at(n.group);
    const auto key = std::make_pair(n.group, n.sequence);
    auto& slot = instances_[key];
    if (!slot) slot = std::make_shared<Instance>();
    const std::shared_ptr<Instance> c = slot;
    const size_t arrival = ++c->arrived;
    if (arrival == members.size()) instances_.erase(key);
    if (arrival < members.size()) {
      wait_until(rank, [&] { return c->done; });
      return;
    }
    // The last member to arrive drives the collective's flows for the whole group.
    std::vector<int> gpus;
    for (int m : members) gpus.push_back(gpu(m));
    Task t;
    t.kind = TaskKind::Collective;
    t.collective = n.collective;
    t.bytes = Bytes(n.bytes);
    t.placement = layout_.placement_of(gpus, cluster_);
    for (const Phase& phase : collective_phases(t, gpus, layout_, pool_of(gpus.front()), cluster_))
      activities_ += run_phase(phase, platform_, layout_, all_gpus_);
    c->done = true;
    for (int m : members) ranks_[static_cast<size_t>(m)].changed->notify_all();
  }

  void send(int rank, const ReplayNode& n) {
    activities_ +=
        run_phase(p2p_phase(n.bytes, gpu(rank), gpu(n.peer), layout_, pool_of(gpu(rank)), cluster_),
                  platform_, layout_, all_gpus_);
    arrived_.insert({rank, n.peer, n.tag, n.occurrence});
    ranks_[static_cast<size_t>(n.peer)].changed->notify_all();
  }

  const chakra::ReplayWorkload& w_;
  const ClusterSpec& cluster_;
  const RankLayout& layout_;
  const Platform& platform_;
  const std::vector<char> all_gpus_;
  sg4::MutexPtr mutex_;
  std::vector<RankState> ranks_;
  std::map<std::pair<int, int>, std::shared_ptr<Instance>> instances_;  // (group, sequence)
  std::set<std::tuple<int, int, std::int64_t, int>> arrived_;           // src, dst, tag, occurrence
  long long replayed_ = 0, activities_ = 0;
};

// Every rank on its own GPU, in order, from the first pool: a plan of `world` data-parallel ranks.
Plan one_rank_per_gpu(int world, const ClusterSpec& cluster) {
  Plan plan;
  plan.dp = world;
  plan.stages = {StagePlan{0, 0, cluster.pools.front().name, Recompute::None}};
  return plan;
}

ReplayResult replay_here(const chakra::ReplayWorkload& w, const ClusterSpec& cluster) {
  const RankLayout layout(one_rank_per_gpu(static_cast<int>(w.ranks.size()), cluster), cluster);
  int argc = 1;
  char name[] = "paratwin-replay";
  char* argv[] = {name, nullptr};
  sg4::Engine engine(&argc, argv);
  configure_engine();
  const Platform platform = build_platform(cluster, layout, {});
  Replayer replayer(w, cluster, layout, platform);
  replayer.start();
  engine.run();
  ReplayResult out = replayer.result();
  long long nodes = 0;
  for (const auto& rank : w.ranks) nodes += static_cast<long long>(rank.size());
  if (out.nodes != nodes)
    throw std::runtime_error("the replay stopped with " + std::to_string(nodes - out.nodes) +
                             " nodes not run: a collective some member never reaches, or a receive whose "
                             "send never runs");
  return out;
}

}  // namespace

ReplayResult replay_chakra(const chakra::ReplayWorkload& workload, const ClusterSpec& cluster) {
  const int world = static_cast<int>(workload.ranks.size());
  const int gpus = cluster.pools.front().gpus();
  if (world > gpus)
    throw InputError(Location{"<--chakra>"}, "the traces have " + std::to_string(world) +
                                                 " ranks, more than the " + std::to_string(gpus) +
                                                 " GPUs of the cluster's first pool '" +
                                                 cluster.pools.front().name +
                                                 "' (rank r runs on GPU r); give the cluster more nodes "
                                                 "(--set cluster.nodes=N)");
  const auto [text, status] = run_forked([&]() -> std::pair<std::string, int> {
    try {
      const ReplayResult r = replay_here(workload, cluster);
      return {nlohmann::json{
                  {"end", r.end_s}, {"ranks", r.rank_end_s}, {"nodes", r.nodes}, {"activities", r.activities}}
                  .dump(),
              0};
    } catch (const std::exception& e) {
      return {nlohmann::json{{"error", e.what()}}.dump(), 1};
    }
  });
  const nlohmann::json j = nlohmann::json::parse(text.empty() ? "{}" : text, nullptr, false);
  if (j.is_object() && j.contains("error"))
    throw std::runtime_error("replay failed: " + j["error"].get<std::string>());
  if (status != 0 || !j.is_object() || !j.contains("end"))
    throw std::runtime_error("the replay process ended abnormally (status " + std::to_string(status) + ")");
  ReplayResult out;
  out.end_s = j["end"].get<double>();
  out.rank_end_s = j["ranks"].get<std::vector<double>>();
  out.nodes = j["nodes"].get<long long>();
  out.activities = j["activities"].get<long long>();
  return out;
}

}  // namespace paratwin::sim
