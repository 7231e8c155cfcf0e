// `paratwin plan --emit chakra DIR`, end to end: the files read back with libprotobuf and checked
// against the Program they came from. Every dependency resolves inside its file, every send has its
// receive in the peer's file, every collective's group is the same in the files of all its members
// (who run the same collectives on it in the same order), and the FLOPs and bytes add up to the
// Program's. Replayed with `simulate --chakra`, they give the simulated iteration time of their plan;
// a hand-written trace of another producer replays, and what cannot be replayed is refused.
#define BOOST_TEST_MODULE chakra
#include <google/protobuf/util/delimited_message_util.h>
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "paratwin_process.hpp"
#include "plan/chakra/chakra_reader.hpp"
#include "plan/chakra/chakra_writer.hpp"
#include "plan/ir/program.hpp"
#include "plan/spec/doc.hpp"
#include "plan/spec/scenario.hpp"
#include "source_tree.hpp"

namespace fs = std::filesystem;
namespace et = ChakraProtoMsg;
using namespace paratwin;
using paratwin::chakra::int_attr;
using paratwin_test::Output;
using paratwin_test::run_paratwin;

namespace {

const std::string kQuickstart = paratwin_test::source_dir() + "/scenarios/quickstart.yaml";

// The traces this process wrote go when it ends.
struct RemoveTraces {
  ~RemoveTraces() { fs::remove_all(paratwin_test::test_dir("paratwin_chakra_")); }
};

struct Case {
  std::string name;
  std::vector<std::string> sets;
};

// Small plans of every communication kind: TP and DP collectives with pipeline transfers; interleaved
// stages with ZeRO 3's gathers; context parallelism.
const std::vector<Case> kCases = {
    {"tp2-pp2-dp2", {"plan.tp=2", "plan.pp=2", "plan.dp=2", "cluster.nodes=1", "training.global_batch=32"}},
    {"pp2x2-dp4-zero3",
     {"plan.tp=1", "plan.pp=2", "plan.dp=4", "plan.schedule=interleaved", "plan.virtual_stages=2",
      "plan.zero=3", "plan.sequence_parallel=false", "cluster.nodes=1", "training.global_batch=32"}},
    {"tp2-cp2-dp2", {"plan.tp=2", "plan.cp=2", "plan.dp=2", "cluster.nodes=1", "training.global_batch=16"}},
};

std::string set_args(const Case& c) {
  std::string out;
  for (const std::string& s : c.sets) out += " --set " + s;
  return out;
}

Program lowered(const Case& c) {
  std::vector<Override> overrides;
  for (const std::string& s : c.sets) overrides.push_back(parse_override(s));
  const ScenarioSpec scenario = load_scenario(kQuickstart, overrides);
  return lower(complete_plan(scenario), scenario.model, scenario.cluster, scenario.training);
}

std::vector<chakra::RankTrace> emitted(const Case& c) {
  const fs::path dir = paratwin_test::test_dir("paratwin_chakra_") / c.name;
  fs::remove_all(dir);
  // A larger plan's file left in the directory goes: the reader would take it for rank 99.
  fs::create_directories(dir);
  { std::ofstream(dir / "quickstart.99.et") << "stale"; }
  const Output r = run_paratwin("plan " + kQuickstart + set_args(c) + " --emit chakra " + dir.string());
  BOOST_TEST_INFO(r.text);
  BOOST_REQUIRE(r.status == 0);
  return chakra::read_trace_directory(dir.string());
}

// A rank's process groups as its metadata node lists them: id -> members.
std::map<std::string, std::vector<int>> listed_groups(const chakra::RankTrace& t) {
  BOOST_REQUIRE(!t.nodes.empty());
  const et::Node& meta = t.nodes.front();
  BOOST_REQUIRE(meta.type() == et::METADATA_NODE);
  const std::string& values = meta.inputs().values();
  BOOST_REQUIRE(values.size() >= 4);
  std::map<std::string, std::vector<int>> out;
  for (const auto& g : nlohmann::json::parse(values.substr(2, values.size() - 4)))
    out[g.at("pg_name").get<std::string>()] = g.at("ranks").get<std::vector<int>>();
  return out;
}

struct Totals {
  double flops = 0, tensor_bytes = 0, collective_bytes = 0, p2p_bytes = 0, copy_bytes = 0;
};

Totals program_totals(const Program& p) {
  Totals t;
  for (const Role& role : p.roles)
    for (const Task& task : role.tasks) {
      const double n = role.instances;
      t.flops += n * task.work.gemm_flops.value();
      t.tensor_bytes += n * task.work.traffic().value();
      if (task.kind == TaskKind::Collective) t.collective_bytes += n * task.count * task.bytes.value();
      if (task.kind == TaskKind::Send) t.p2p_bytes += n * task.bytes.value();
      if (task.kind == TaskKind::Copy) t.copy_bytes += n * task.bytes.value();
    }
  return t;
}

void check_close(double got, double want, const std::string& what) {
  BOOST_TEST_INFO(what << ": " << got << " vs " << want);
  // Each node's value is rounded to a whole number: at most half a unit per node.
  BOOST_TEST(std::abs(got - want) <= 1e-9 * want + 1e4);
}

}  // namespace

BOOST_TEST_GLOBAL_FIXTURE(RemoveTraces);

BOOST_AUTO_TEST_CASE(one_file_per_rank_with_resolved_dependencies) {
  for (const Case& c : kCases) {
    BOOST_TEST_CONTEXT(c.name) {
      const Program program = lowered(c);
      const auto traces = emitted(c);
      BOOST_TEST(int(traces.size()) == program.world);
      long long nodes = 0;
      for (const auto& t : traces) {
        BOOST_TEST(t.metadata.version() == chakra::kSchemaVersion);
        std::set<std::uint64_t> seen;
        for (const et::Node& n : t.nodes) {
          // Dependencies point to nodes earlier in the same file: they resolve, and there is no cycle.
          for (std::uint64_t d : n.data_deps())
            BOOST_TEST(seen.count(d) == 1u, "rank " << t.rank << " node " << n.id());
          for (std::uint64_t d : n.ctrl_deps())
            BOOST_TEST(seen.count(d) == 1u, "rank " << t.rank << " node " << n.id());
          BOOST_TEST(seen.insert(n.id()).second);
          BOOST_TEST(n.type() != et::INVALID_NODE);
        }
        nodes += static_cast<long long>(t.nodes.size());
      }
      BOOST_TEST(nodes == chakra::chakra_nodes(program));
    }
  }
}

BOOST_AUTO_TEST_CASE(every_send_has_its_receive_and_every_group_agrees) {
  for (const Case& c : kCases) {
    BOOST_TEST_CONTEXT(c.name) {
      const auto traces = emitted(c);
      using Transfer = std::tuple<std::int64_t, std::int64_t, std::int64_t>;  // src, dst, tag
      std::map<Transfer, std::int64_t> sends, receives;                       // -> bytes
      std::map<std::string, std::vector<int>> groups;                         // over all ranks
      std::map<std::string, std::map<int, std::vector<std::pair<std::int64_t, std::int64_t>>>> calls;
      for (const auto& t : traces) {
        const auto mine = listed_groups(t);
        for (const auto& [id, members] : mine) {
          BOOST_TEST(std::count(members.begin(), members.end(), t.rank) == 1);
          const auto [it, added] = groups.try_emplace(id, members);
          BOOST_TEST(it->second == members, "group " << id << " differs at rank " << t.rank);
        }
        for (const et::Node& n : t.nodes) {
          if (n.type() == et::COMM_SEND_NODE || n.type() == et::COMM_RECV_NODE) {
            const Transfer key{*int_attr(n, "comm_src"), *int_attr(n, "comm_dst"), *int_attr(n, "comm_tag")};
            const bool send = n.type() == et::COMM_SEND_NODE;
            BOOST_TEST((send ? std::get<0>(key) : std::get<1>(key)) == t.rank);
            BOOST_TEST((send ? sends : receives).emplace(key, *int_attr(n, "comm_size")).second,
                       "a transfer's tag is used twice");
          }
          if (n.type() == et::COMM_COLL_NODE) {
            const auto* pg = chakra::find_attr(n, "pg_name");
            BOOST_REQUIRE(pg);
            BOOST_TEST(mine.count(pg->string_val()) == 1u, "rank " << t.rank << " uses an unlisted group");
            calls[pg->string_val()][t.rank].emplace_back(*int_attr(n, "comm_type"),
                                                         *int_attr(n, "comm_size"));
          }
        }
      }
      BOOST_TEST(sends.size() == receives.size());
      BOOST_TEST((sends == receives));
      // Every member of a group runs the same collectives on it in the same order, and only members do.
      for (const auto& [id, by_rank] : calls) {
        const std::vector<int>& members = groups.at(id);
        BOOST_TEST(by_rank.size() == members.size(), "group " << id);
        for (int m : members)
          BOOST_TEST((by_rank.at(m) == by_rank.begin()->second), "group " << id << " rank " << m);
      }
      // ASTRA-sim's comm group file lists the same groups.
      const fs::path dir = paratwin_test::test_dir("paratwin_chakra_") / c.name;
      const auto file = paratwin_test::read_json(dir / "quickstart.comm_groups.json");
      BOOST_TEST(file.size() == groups.size());
      for (const auto& [id, members] : groups) BOOST_TEST((file.at(id).get<std::vector<int>>() == members));
    }
  }
}

BOOST_AUTO_TEST_CASE(flops_and_bytes_add_up_to_the_programs) {
  for (const Case& c : kCases) {
    BOOST_TEST_CONTEXT(c.name) {
      const Totals want = program_totals(lowered(c));
      Totals got;
      for (const auto& t : emitted(c))
        for (const et::Node& n : t.nodes) {
          if (n.type() == et::COMP_NODE) {
            got.flops += double(*int_attr(n, "num_ops"));
            got.tensor_bytes += double(*int_attr(n, "tensor_size"));
          }
          if (n.type() == et::COMM_COLL_NODE) got.collective_bytes += double(*int_attr(n, "comm_size"));
          if (n.type() == et::COMM_SEND_NODE) got.p2p_bytes += double(*int_attr(n, "comm_size"));
          if (n.type() == et::MEM_LOAD_NODE || n.type() == et::MEM_STORE_NODE)
            got.copy_bytes += double(*int_attr(n, "tensor_size"));
        }
      BOOST_TEST(want.flops > 0);
      BOOST_TEST(want.collective_bytes > 0);
      check_close(got.flops, want.flops, "FLOPs");
      check_close(got.tensor_bytes, want.tensor_bytes, "tensor bytes");
      check_close(got.collective_bytes, want.collective_bytes, "collective bytes");
      check_close(got.p2p_bytes, want.p2p_bytes, "send bytes");
      check_close(got.copy_bytes, want.copy_bytes, "copy bytes");
    }
  }
}

BOOST_AUTO_TEST_CASE(bad_directories_and_arguments_exit_2) {
  const fs::path blocker = paratwin_test::test_dir("paratwin_chakra_") / "a-file";
  { std::ofstream(blocker) << "x"; }
  Output r = run_paratwin("plan " + kQuickstart + " --emit chakra " + (blocker / "traces").string());
  BOOST_TEST(r.status == 2);
  BOOST_TEST(r.text.find("cannot create the trace directory") != std::string::npos, r.text);
  r = run_paratwin("plan " + kQuickstart + " --emit chakra");
  BOOST_TEST(r.status == 2);
  BOOST_TEST(r.text.find("--emit chakra DIR") != std::string::npos, r.text);
  r = run_paratwin("plan " + kQuickstart + " --emit megatron somewhere");
  BOOST_TEST(r.status == 2);
  r = run_paratwin("plan " + kQuickstart + " --emit onnx");
  BOOST_TEST(r.status == 2);
  BOOST_TEST(r.text.find("chakra") != std::string::npos, r.text);
}

BOOST_AUTO_TEST_CASE(a_file_that_is_not_a_trace_is_an_input_error) {
  const fs::path dir = paratwin_test::test_dir("paratwin_chakra_") / "garbage";
  fs::create_directories(dir);
  { std::ofstream(dir / "x.0.et") << "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"; }
  BOOST_CHECK_THROW(chakra::read_trace_directory(dir.string()), InputError);
  fs::remove(dir / "x.0.et");
  BOOST_CHECK_THROW(chakra::read_trace_directory(dir.string()), InputError);
}

namespace {

double iteration_time(const std::string& args, const char* key_path) {
  const paratwin_test::Result r = paratwin_test::paratwin(args + " --json -");
  BOOST_TEST_INFO(r.err);
  BOOST_REQUIRE(r.status == 0);
  nlohmann::json j = nlohmann::json::parse(r.out);
  return std::string(key_path) == "metrics" ? j["metrics"]["iteration_time_s"].get<double>()
                                            : j["iteration_time_s"].get<double>();
}

}  // namespace

BOOST_AUTO_TEST_CASE(replaying_our_traces_gives_the_simulated_iteration_time) {
  std::vector<Case> cases = {kCases[0], kCases[1]};
  // Two nodes: collectives and transfers over the NICs too.
  cases.push_back({"tp2-pp2-dp4-2nodes",
                   {"plan.tp=2", "plan.pp=2", "plan.dp=4", "cluster.nodes=2", "training.global_batch=64"}});
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.name) {
      emitted(c);
      const fs::path dir = paratwin_test::test_dir("paratwin_chakra_") / c.name;
      const std::string scenario = "simulate " + kQuickstart + set_args(c);
      const double simulated = iteration_time(scenario, "metrics");
      const double replayed = iteration_time(scenario + " --chakra " + dir.string(), "top");
      // The same flows on the same platform; compute replays the analytic schedule's durations, which
      // differ from the simulator's only where compute overlaps communication kernels.
      BOOST_TEST(replayed == simulated, boost::test_tools::tolerance(0.01));
    }
  }
}

namespace {

// A two-rank trace as another producer might write it: a compute node, an all-reduce on the default
// group, a send from rank 0 to rank 1 (tag 7), all in microseconds, no process group node.
void write_foreign(const fs::path& dir, et::CollectiveCommType kind, bool with_receive) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (int rank = 0; rank < 2; ++rank) {
    std::ofstream out(dir / ("foreign." + std::to_string(rank) + ".et"), std::ios::binary);
    et::GlobalMetadata meta;
    meta.set_version("0.0.4");
    google::protobuf::util::SerializeDelimitedToOstream(meta, &out);
    const auto attr = [](et::Node& n, const char* name) {
      et::AttributeProto* a = n.add_attr();
      a->set_name(name);
      return a;
    };
    et::Node comp;
    comp.set_id(10);
    comp.set_name("matmul");
    comp.set_type(et::COMP_NODE);
    comp.set_duration_micros(1000);
    google::protobuf::util::SerializeDelimitedToOstream(comp, &out);
    et::Node coll;
    coll.set_id(11);
    coll.set_name("allreduce");
    coll.set_type(et::COMM_COLL_NODE);
    coll.add_data_deps(10);
    attr(coll, "comm_type")->set_int64_val(kind);
    attr(coll, "comm_size")->set_int64_val(1 << 20);
    google::protobuf::util::SerializeDelimitedToOstream(coll, &out);
    if (rank == 1 && !with_receive) continue;
    et::Node p2p;
    p2p.set_id(12);
    p2p.set_name(rank == 0 ? "send" : "recv");
    p2p.set_type(rank == 0 ? et::COMM_SEND_NODE : et::COMM_RECV_NODE);
    p2p.add_ctrl_deps(11);
    attr(p2p, "comm_src")->set_int32_val(0);
    attr(p2p, "comm_dst")->set_int32_val(1);
    attr(p2p, "comm_tag")->set_int32_val(7);
    attr(p2p, "comm_size")->set_int64_val(1 << 20);
    google::protobuf::util::SerializeDelimitedToOstream(p2p, &out);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_foreign_trace_replays_and_what_cannot_be_replayed_is_refused) {
  const fs::path dir = paratwin_test::test_dir("paratwin_chakra_") / "foreign";
  const std::string simulate = "simulate " + kQuickstart + " --chakra " + dir.string();
  write_foreign(dir, et::ALL_REDUCE, true);
  const double t = iteration_time(simulate, "top");
  // 1 ms of compute, then an all-reduce and a send of 1 MiB over NVLink: tens of microseconds more.
  BOOST_TEST(t > 1e-3);
  BOOST_TEST(t < 1.5e-3);

  write_foreign(dir, et::REDUCE, true);
  Output r = run_paratwin(simulate);
  BOOST_TEST(r.status == 2);
  BOOST_TEST(r.text.find("collective REDUCE is not replayed") != std::string::npos, r.text);

  write_foreign(dir, et::ALL_REDUCE, false);
  r = run_paratwin(simulate);
  BOOST_TEST(r.status == 2);
  BOOST_TEST(r.text.find("has no receive") != std::string::npos, r.text);

  r = run_paratwin(simulate + " --horizon 1d");
  BOOST_TEST(r.status == 2);
}

BOOST_AUTO_TEST_CASE(simulate_emits_the_traces_with_the_simulations_times) {
  const Case& c = kCases[0];
  const fs::path dir = paratwin_test::test_dir("paratwin_chakra_") / "simulated";
  const std::string simulate = "simulate " + kQuickstart + set_args(c);
  const Output r = run_paratwin(simulate + " --emit chakra " + dir.string());
  BOOST_TEST_INFO(r.text);
  BOOST_REQUIRE(r.status == 0);
  const auto traces = chakra::read_trace_directory(dir.string());
  BOOST_TEST(int(traces.size()) == lowered(c).world);
  double flops = 0;
  for (const auto& t : traces) {
    std::string durations;
    for (const auto& a : t.metadata.attr())
      if (a.name() == "durations") durations = a.string_val();
    BOOST_TEST(durations == "simulation");
    for (const et::Node& n : t.nodes)
      if (n.type() == et::COMP_NODE) flops += double(*int_attr(n, "num_ops"));
  }
  check_close(flops, program_totals(lowered(c)).flops, "FLOPs");
  const double simulated = iteration_time(simulate, "metrics");
  BOOST_TEST(iteration_time(simulate + " --chakra " + dir.string(), "top") == simulated,
             boost::test_tools::tolerance(0.01));
  BOOST_TEST(run_paratwin(simulate + " --emit megatron x").status == 2);
}
