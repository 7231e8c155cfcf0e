// Chakra nodes to replay nodes, with every cross-reference checked before a simulation starts.
#include "plan/chakra/replay_workload.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "plan/chakra/chakra_reader.hpp"
#include "plan/chakra/chakra_writer.hpp"
#include "plan/spec/diagnostics.hpp"

namespace paratwin::chakra {
namespace {

namespace et = ChakraProtoMsg;

Location at(const RankTrace& t, const et::Node& n) {
  return Location{t.path + " (node " + std::to_string(n.id()) + " '" + n.name() + "')"};
}

std::int64_t required(const RankTrace& t, const et::Node& n, const char* name) {
  const auto v = int_attr(n, name);
  if (!v)
    throw InputError(at(t, n), "a " + et::NodeType_Name(n.type()) + " needs the integer attribute " + name);
  return *v;
}

cost::CollectiveKind collective_kind(const RankTrace& t, const et::Node& n) {
  const std::int64_t kind = required(t, n, "comm_type");
  switch (kind) {
    case et::ALL_REDUCE:
      return cost::CollectiveKind::AllReduce;
    case et::ALL_GATHER:
      return cost::CollectiveKind::AllGather;
    case et::REDUCE_SCATTER:
      return cost::CollectiveKind::ReduceScatter;
    case et::ALL_TO_ALL:
      return cost::CollectiveKind::AllToAll;
    case et::BROADCAST:
      return cost::CollectiveKind::Broadcast;
    default:
      break;
  }
  const std::string name = et::CollectiveCommType_IsValid(static_cast<int>(kind))
                               ? et::CollectiveCommType_Name(static_cast<et::CollectiveCommType>(kind))
                               : std::to_string(kind);
  throw InputError(at(t, n), "collective " + name +
                                 " is not replayed; expected ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, "
                                 "ALL_TO_ALL or BROADCAST");
}

int group_id(const std::string& pg_name, const Location& where) {
  if (pg_name.empty()) return 0;
  try {
    size_t used = 0;
    const int id = std::stoi(pg_name, &used);
    if (used == pg_name.size() && id >= 0) return id;
  } catch (const std::exception&) {
  }
  throw InputError(where, "process group name '" + pg_name + "' is not a group id (a whole number)");
}

std::vector<int> rank_list(const nlohmann::json& ranks, const Location& where) {
  std::vector<int> out;
  if (ranks.is_array())
    for (const auto& r : ranks) {
      if (!r.is_number_integer()) break;
      out.push_back(r.get<int>());
    }
  if (!ranks.is_array() || out.size() != ranks.size())
    throw InputError(where, "a process group's ranks: expected a list of whole numbers");
  return out;
}

// Groups listed as PyTorch's process_group:init node lists them: JSON inside a Python list literal.
void listed_groups(const RankTrace& t, const et::Node& n, std::map<int, std::vector<int>>& groups) {
  const std::string& values = n.inputs().values();
  const auto json = values.size() >= 4
                        ? nlohmann::json::parse(values.substr(2, values.size() - 4), nullptr, false)
                        : nlohmann::json();
  if (!json.is_array()) throw InputError(at(t, n), "process groups are not a JSON list of groups");
  for (const auto& g : json) {
    if (!g.is_object() || !g.contains("pg_name") || !g.contains("ranks") || !g["pg_name"].is_string() ||
        !g["ranks"].is_array())
      throw InputError(at(t, n), "a process group without a pg_name string and a ranks list");
    groups[group_id(g["pg_name"].get<std::string>(), at(t, n))] = rank_list(g["ranks"], at(t, n));
  }
}

ReplayNode convert(const RankTrace& t, const et::Node& n, std::map<int, int>& collectives_on,
                   std::map<std::pair<int, std::int64_t>, int>& transfers) {
  ReplayNode r;
  r.name = n.name();
  const auto ns = int_attr(n, kDurationAttr);
  r.duration_s = ns ? double(*ns) * 1e-9 : double(n.duration_micros()) * 1e-6;
  switch (n.type()) {
    case et::COMP_NODE:
      r.kind = ReplayKind::Compute;
      break;
    case et::MEM_LOAD_NODE:
    case et::MEM_STORE_NODE:
      r.kind = ReplayKind::Memory;
      break;
    case et::COMM_COLL_NODE: {
      r.kind = ReplayKind::Collective;
      r.collective = collective_kind(t, n);
      r.bytes = double(required(t, n, "comm_size"));
      const auto* pg = find_attr(n, "pg_name");
      r.group = pg ? group_id(pg->string_val(), at(t, n)) : 0;
      r.sequence = collectives_on[r.group]++;
      break;
    }
    case et::COMM_SEND_NODE:
    case et::COMM_RECV_NODE: {
      const bool send = n.type() == et::COMM_SEND_NODE;
      r.kind = send ? ReplayKind::Send : ReplayKind::Recv;
      r.bytes = double(required(t, n, "comm_size"));
      const std::int64_t src = int_attr(n, "comm_src").value_or(t.rank);
      const std::int64_t dst = int_attr(n, "comm_dst").value_or(t.rank);
      if ((send ? src : dst) != t.rank)
        throw InputError(at(t, n), std::string(send ? "a send's comm_src" : "a receive's comm_dst") +
                                       " is not the file's rank " + std::to_string(t.rank));
      r.peer = static_cast<int>(send ? dst : src);
      r.tag = int_attr(n, "comm_tag").value_or(0);
      r.occurrence = transfers[{(send ? 1 : -1) * (r.peer + 1), r.tag}]++;
      break;
    }
    default:
      r.kind = ReplayKind::Nothing;
      break;
  }
  return r;
}

// Kahn's algorithm: a cycle would leave the replay waiting for ever.
void check_acyclic(const RankTrace& t, const std::vector<ReplayNode>& nodes) {
  std::vector<int> waiting(nodes.size());
  std::vector<std::vector<int>> children(nodes.size());
  std::vector<int> ready;
  for (size_t i = 0; i < nodes.size(); ++i) {
    waiting[i] = static_cast<int>(nodes[i].deps.size());
    for (int d : nodes[i].deps) children[static_cast<size_t>(d)].push_back(static_cast<int>(i));
    if (waiting[i] == 0) ready.push_back(static_cast<int>(i));
  }
  size_t done = 0;
  while (!ready.empty()) {
    const int i = ready.back();
    ready.pop_back();
    ++done;
    for (int c : children[static_cast<size_t>(i)])
      if (--waiting[static_cast<size_t>(c)] == 0) ready.push_back(c);
  }
  if (done != nodes.size()) throw InputError(Location{t.path}, "the nodes' dependencies form a cycle");
}

std::vector<ReplayNode> rank_nodes(const RankTrace& t, std::map<int, std::vector<int>>& listed) {
  std::map<std::uint64_t, int> index;
  for (const et::Node& n : t.nodes)
    if (!index.emplace(n.id(), static_cast<int>(index.size())).second)
      throw InputError(at(t, n), "two nodes have this id");
  std::map<int, int> collectives_on;
  std::map<std::pair<int, std::int64_t>, int> transfers;
  std::vector<ReplayNode> out;
  for (const et::Node& n : t.nodes) {
    if (n.type() == et::METADATA_NODE && n.name().find("process_group:init") != std::string::npos)
      listed_groups(t, n, listed);
    ReplayNode r = convert(t, n, collectives_on, transfers);
    for (const auto* deps : {&n.data_deps(), &n.ctrl_deps()})
      for (std::uint64_t d : *deps) {
        const auto it = index.find(d);
        if (it == index.end())
          throw InputError(at(t, n),
                           "depends on node " + std::to_string(d) + ", which the file does not hold");
        r.deps.push_back(it->second);
      }
    out.push_back(std::move(r));
  }
  check_acyclic(t, out);
  return out;
}

void check_groups_and_transfers(const ReplayWorkload& w, const std::vector<RankTrace>& traces) {
  const int world = static_cast<int>(w.ranks.size());
  std::set<std::tuple<int, int, std::int64_t, int>> sends, receives;  // src, dst, tag, occurrence
  for (int rank = 0; rank < world; ++rank)
    for (const ReplayNode& n : w.ranks[static_cast<size_t>(rank)]) {
      const Location where{traces[static_cast<size_t>(rank)].path + " (node '" + n.name + "')"};
      if (n.kind == ReplayKind::Collective) {
        const auto g = w.groups.find(n.group);
        if (g == w.groups.end())
          throw InputError(where, "process group " + std::to_string(n.group) + " is not listed");
        if (std::find(g->second.begin(), g->second.end(), rank) == g->second.end())
          throw InputError(where,
                           "the rank is not a member of its collective's group " + std::to_string(n.group));
        for (int m : g->second)
          if (m < 0 || m >= world)
            throw InputError(where, "group " + std::to_string(n.group) + " names rank " + std::to_string(m) +
                                        ", which has no trace");
      }
      if (n.kind == ReplayKind::Send || n.kind == ReplayKind::Recv) {
        if (n.peer < 0 || n.peer >= world)
          throw InputError(where, "the peer rank " + std::to_string(n.peer) + " has no trace");
        const bool send = n.kind == ReplayKind::Send;
        (send ? sends : receives).insert({send ? rank : n.peer, send ? n.peer : rank, n.tag, n.occurrence});
      }
    }
  for (const auto& s : sends)
    if (!receives.count(s))
      throw InputError(Location{traces[static_cast<size_t>(std::get<0>(s))].path},
                       "a send to rank " + std::to_string(std::get<1>(s)) + " with tag " +
                           std::to_string(std::get<2>(s)) + " has no receive in that rank's file");
  if (sends.size() != receives.size())
    throw InputError(Location{traces.front().path}, "some receives have no send");
}

}  // namespace

ReplayWorkload load_replay_workload(const std::string& dir) {
  const std::vector<RankTrace> traces = read_trace_directory(dir);
  ReplayWorkload w;
  std::map<int, std::vector<int>> listed;
  for (const RankTrace& t : traces) w.ranks.push_back(rank_nodes(t, listed));
  // ASTRA-sim's comm group file, when the producer wrote one beside the traces.
  const std::string prefix = traces.front().path.substr(0, traces.front().path.rfind(".0.et"));
  const std::filesystem::path file = prefix + ".comm_groups.json";
  if (std::filesystem::exists(file)) {
    std::ifstream in(file);
    const auto json = nlohmann::json::parse(in, nullptr, false);
    if (!json.is_object())
      throw InputError(Location{file.string()}, "expected a JSON object of group id: ranks");
    for (const auto& [id, ranks] : json.items())
      w.groups[group_id(id, Location{file.string()})] =
          rank_list(ranks, Location{file.string() + " (group " + id + ")"});
  } else {
    w.groups = std::move(listed);
  }
  std::vector<int>& world = w.groups[0];
  world.clear();
  for (int r = 0; r < static_cast<int>(traces.size()); ++r) world.push_back(r);
  check_groups_and_transfers(w, traces);
  return w;
}

}  // namespace paratwin::chakra
