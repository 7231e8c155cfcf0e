// Chakra traces from a Program: every world rank gets its role's tasks, with the rank's own process
// groups and pipeline peers filled in.
#include "plan/chakra/chakra_writer.hpp"

#include <google/protobuf/util/delimited_message_util.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <system_error>

#include "plan/analytic/evaluate.hpp"
#include "plan/chakra/et_def.pb.h"
#include "plan/chakra/process_groups.hpp"
#include "plan/io/atomic_file.hpp"
#include "plan/ir/transfer_key.hpp"
#include "plan/spec/diagnostics.hpp"
#include "plan/spec/limits.hpp"
#include "plan/spec/reader.hpp"
#include "plan/topology/rank_layout.hpp"

namespace paratwin::chakra {
namespace {

namespace et = ChakraProtoMsg;
using TaskTimings = std::vector<TaskTiming>;

et::AttributeProto* add_attr(et::Node& node, const char* name) {
  et::AttributeProto* a = node.add_attr();
  a->set_name(name);
  return a;
}

std::uint64_t whole(double v) {
  return v <= 0 ? 0 : static_cast<std::uint64_t>(std::llround(v));
}

et::CollectiveCommType comm_type(cost::CollectiveKind k) {
  switch (k) {
    case cost::CollectiveKind::AllReduce:
      return et::ALL_REDUCE;
    case cost::CollectiveKind::AllGather:
      return et::ALL_GATHER;
    case cost::CollectiveKind::ReduceScatter:
      return et::REDUCE_SCATTER;
    case cost::CollectiveKind::AllToAll:
      return et::ALL_TO_ALL;
    case cost::CollectiveKind::Broadcast:
      return et::BROADCAST;
  }
  return et::ALL_REDUCE;
}

et::NodeType node_type(const Task& t) {
  switch (t.kind) {
    case TaskKind::Forward:
    case TaskKind::Backward:
    case TaskKind::Recompute:
    case TaskKind::Optimizer:
      return et::COMP_NODE;
    case TaskKind::Collective:
      return et::COMM_COLL_NODE;
    case TaskKind::Send:
      return et::COMM_SEND_NODE;
    case TaskKind::Recv:
      return et::COMM_RECV_NODE;
    case TaskKind::Copy:
      return t.to_host ? et::MEM_STORE_NODE : et::MEM_LOAD_NODE;
  }
  return et::INVALID_NODE;
}

int nodes_of(const Task& t) {
  return t.kind == TaskKind::Collective ? std::max(1, t.count) : 1;
}

// What a role's tasks look like in every file of its ranks: node ids (id 0 is the process group node;
// task i is nodes first[i] .. first[i] + nodes_of(task) - 1), the task before each on its stream, and
// the start and duration of each node: from the simulation's timings when given (`simulated`, the
// role's slowest observed rank), else from the analytic schedule.
struct RoleNodes {
  std::vector<std::uint64_t> first;
  std::vector<int> before_on_stream;  // -1: first of its stream
  std::vector<double> start_s, duration_s;
};

RoleNodes role_nodes(const Role& role, const std::vector<double>& alone,
                     const std::vector<TaskTiming>& analytic, const std::vector<TaskTiming>& simulated) {
  const std::vector<TaskTiming>& timing = simulated.size() == role.tasks.size() ? simulated : analytic;
  RoleNodes out;
  std::map<StreamKind, int> last;
  std::uint64_t next = 1;
  for (size_t i = 0; i < role.tasks.size(); ++i) {
    const Task& t = role.tasks[i];
    out.first.push_back(next);
    next += static_cast<std::uint64_t>(nodes_of(t));
    const auto it = last.find(t.stream);
    out.before_on_stream.push_back(it == last.end() ? -1 : it->second);
    last[t.stream] = static_cast<int>(i);
    out.start_s.push_back(timing[i].start_s);
    // Compute and copies: the time they were given (compute slowed beside communication kernels
    // included); a send: its cost alone, or what it took in the simulation (contention included); a
    // collective: its cost alone, one node's share of a folded task (a simulated one includes waiting
    // for the group's last member); a receive takes no time of its own.
    double d = timing[i].end_s - timing[i].start_s;
    if (t.kind == TaskKind::Collective || (t.kind == TaskKind::Send && &timing == &analytic))
      d = alone[i] / nodes_of(t);
    if (t.kind == TaskKind::Recv) d = 0;
    out.duration_s.push_back(d);
  }
  return out;
}

// Everything the files of all ranks share.
struct Shared {
  const Program& program;
  const RankLayout& layout;
  const ProcessGroups& groups;
  std::vector<RoleNodes> roles;
  std::string durations;  // where the times come from, for the metadata
};

void fill_task(et::Node& node, const Shared& s, int rank, const Task& t) {
  add_attr(node, "is_cpu_op")->set_bool_val(false);
  switch (t.kind) {
    case TaskKind::Forward:
    case TaskKind::Backward:
    case TaskKind::Recompute:
    case TaskKind::Optimizer:
      add_attr(node, "num_ops")->set_int64_val(static_cast<std::int64_t>(whole(t.work.gemm_flops.value())));
      add_attr(node, "tensor_size")->set_uint64_val(whole(t.work.traffic().value()));
      break;
    case TaskKind::Collective:
      add_attr(node, "comm_type")->set_int64_val(comm_type(t.collective));
      add_attr(node, "comm_size")->set_int64_val(static_cast<std::int64_t>(whole(t.bytes.value())));
      add_attr(node, "pg_name")->set_string_val(std::to_string(s.groups.id(rank, t.group)));
      break;
    case TaskKind::Send:
    case TaskKind::Recv: {
      const int peer = s.layout.pipeline_peer(rank, t.peer);
      const bool send = t.kind == TaskKind::Send;
      add_attr(node, "comm_src")->set_int32_val(send ? rank : peer);
      add_attr(node, "comm_dst")->set_int32_val(send ? peer : rank);
      add_attr(node, "comm_tag")->set_int32_val(static_cast<std::int32_t>(transfer_index(t, s.program.plan)));
      add_attr(node, "comm_size")->set_int64_val(static_cast<std::int64_t>(whole(t.bytes.value())));
      break;
    }
    case TaskKind::Copy:
      add_attr(node, "tensor_size")->set_uint64_val(whole(t.bytes.value()));
      break;
  }
}

et::Node process_group_node(const ProcessGroups& groups, int rank) {
  // PyTorch's execution trace lists process groups as JSON in the node's input values, inside a
  // Python list literal; ASTRA-sim strips the two characters either side and parses the JSON.
  nlohmann::json list = nlohmann::json::array();
  for (const ProcessGroup* g : groups.of_rank(rank))
    list.push_back({{"pg_name", std::to_string(g->id)},
                    {"pg_desc", enum_name(g->kind, kGroupKindNames)},
                    {"backend_config", ""},
                    {"pg_size", g->ranks.size()},
                    {"ranks", g->ranks}});
  et::Node node;
  node.set_id(0);
  node.set_name(kProcessGroupNode);
  node.set_type(et::METADATA_NODE);
  node.mutable_inputs()->set_values("['" + list.dump() + "']");
  node.mutable_inputs()->set_types("['String']");
  return node;
}

et::GlobalMetadata metadata(const Program& program, const std::string& scenario, const std::string& durations,
                            int rank) {
  et::GlobalMetadata meta;
  meta.set_version(kSchemaVersion);
  const auto text = [&](const char* name, const std::string& value) {
    et::AttributeProto* a = meta.add_attr();
    a->set_name(name);
    a->set_string_val(value);
  };
  const auto number = [&](const char* name, std::int64_t value) {
    et::AttributeProto* a = meta.add_attr();
    a->set_name(name);
    a->set_int64_val(value);
  };
  text("producer", "ParaTwin");
  text("scenario", scenario);
  text("model", program.model);
  text("cluster", program.cluster);
  text("durations", durations);
  number("rank", rank);
  number("world", program.world);
  return meta;
}

void put(const google::protobuf::MessageLite& message, std::ostream& out) {
  if (!google::protobuf::util::SerializeDelimitedToOstream(message, &out))
    throw std::runtime_error("could not serialize a Chakra message");
}

long long write_rank(const Shared& s, const std::string& path, const std::string& scenario, int rank) {
  AtomicFileWriter file(path);
  std::ostream& out = file.stream();
  put(metadata(s.program, scenario, s.durations, rank), out);
  put(process_group_node(s.groups, rank), out);
  long long nodes = 1;
  const int r = role_of_rank(s.program, s.layout, rank);
  const Role& role = s.program.roles[static_cast<size_t>(r)];
  const RoleNodes& rn = s.roles[static_cast<size_t>(r)];
  et::Node node;
  for (size_t i = 0; i < role.tasks.size(); ++i) {
    const Task& t = role.tasks[i];
    const auto last_of = [&](int task) {
      return rn.first[static_cast<size_t>(task)] +
             static_cast<std::uint64_t>(nodes_of(role.tasks[static_cast<size_t>(task)])) - 1;
    };
    for (int k = 0; k < nodes_of(t); ++k) {
      node.Clear();
      node.set_id(rn.first[i] + static_cast<std::uint64_t>(k));
      node.set_name(k == 0 ? t.name : t.name + "#" + std::to_string(k));
      node.set_type(node_type(t));
      if (k > 0) {
        node.add_ctrl_deps(node.id() - 1);  // the folded collectives run one after another
      } else {
        for (int d : t.deps) node.add_data_deps(last_of(d));
        const int before = rn.before_on_stream[i];
        if (before >= 0 && !t.deps.contains(before)) node.add_ctrl_deps(last_of(before));
        if (node.data_deps_size() == 0 && node.ctrl_deps_size() == 0) node.add_ctrl_deps(0);
      }
      const double duration = rn.duration_s[i];
      node.set_start_time_micros(whole((rn.start_s[i] + k * duration) * 1e6));
      node.set_duration_micros(whole(duration * 1e6));
      add_attr(node, kDurationAttr)->set_uint64_val(whole(duration * 1e9));
      fill_task(node, s, rank, t);
      put(node, out);
      ++nodes;
    }
  }
  file.commit(/*sync=*/false);  // thousands of files: whole or absent is enough, as for progress files
  return nodes;
}

Location at_option(const std::string& dir) {
  return Location{"<--emit chakra " + dir + ">"};
}

void make_directory(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::error_code is_dir_error;
  if (ec || !std::filesystem::is_directory(dir, is_dir_error))
    throw InputError(at_option(dir),
                     "cannot create the trace directory " + dir + ": " +
                         (ec ? ec.message() : std::string("a file of that name is in the way")) +
                         "; name a directory that can be created");
}

// Files of the same prefix for ranks this world does not have, left by an earlier emit of a larger
// plan: a reader would take them for part of this trace.
void remove_stale_ranks(const std::filesystem::path& dir, const std::string& prefix, int world) {
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= prefix.size() + 4 || name.compare(0, prefix.size() + 1, prefix + ".") != 0 ||
        name.compare(name.size() - 3, 3, ".et") != 0)
      continue;
    const std::string rank = name.substr(prefix.size() + 1, name.size() - prefix.size() - 4);
    if (!rank.empty() && rank.size() < 10 && std::all_of(rank.begin(), rank.end(), ::isdigit) &&
        std::stoll(rank) >= world)
      std::filesystem::remove(entry.path());
  }
}

}  // namespace

std::string trace_prefix(const std::string& scenario_name) {
  std::string out = scenario_name;
  for (char& c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  return out.empty() ? "paratwin" : out;
}

std::int64_t chakra_nodes(const Program& program) {
  std::int64_t total = 0;
  for (const Role& role : program.roles) {
    std::int64_t per_rank = 1;  // the process group node
    for (const Task& t : role.tasks) per_rank += nodes_of(t);
    total += per_rank * role.instances;
  }
  return total;
}

ChakraSummary write_chakra_traces(const std::string& dir, const std::string& prefix, const Program& program,
                                  const ScenarioSpec& scenario,
                                  const std::vector<std::vector<TaskTiming>>& simulated) {
  if (const std::int64_t nodes = chakra_nodes(program); nodes > limit_value(kChakraNodesLimit))
    throw InputError(at_option(dir), "the traces would hold " + std::to_string(nodes) + " nodes (" +
                                         std::to_string(program.world) +
                                         " ranks, each with its role's tasks); fewer micro-batches per "
                                         "step or fewer ranks make them smaller" +
                                         limit_note(kChakraNodesLimit));
  make_directory(dir);
  const RankLayout layout(program.plan, scenario.cluster);
  const ProcessGroups groups(program, layout);
  Shared shared{program, layout, groups, {}, simulated.empty() ? "analytic" : "simulation"};
  const auto alone = task_durations(program, scenario.cluster, scenario.training);
  const auto timings = schedule_tasks(program, scenario.cluster, scenario.training);
  for (size_t r = 0; r < program.roles.size(); ++r)
    shared.roles.push_back(role_nodes(program.roles[r], alone[r], timings[r],
                                      r < simulated.size() ? simulated[r] : TaskTimings{}));

  ChakraSummary summary{prefix, layout.world(), 0, static_cast<int>(groups.all().size())};
  const std::filesystem::path base(dir);
  for (int rank = 0; rank < layout.world(); ++rank)
    summary.nodes += write_rank(shared, (base / (prefix + "." + std::to_string(rank) + ".et")).string(),
                                scenario.name, rank);
  remove_stale_ranks(base, prefix, layout.world());
  nlohmann::json members = nlohmann::json::object();
  for (const ProcessGroup& g : groups.all()) members[std::to_string(g.id)] = g.ranks;
  write_file_atomically((base / (prefix + ".comm_groups.json")).string(), members.dump(1) + "\n");
  return summary;
}

}  // namespace paratwin::chakra
