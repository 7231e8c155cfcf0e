// Hostile and huge input, in process: YAML that expands past its limits, sweeps counted before they are
// made and streamed through their journal, the Pareto front and the goal in one pass, products of user
// numbers that would overflow, and Programs too large to lower. The end-to-end side (memory of whole
// commands) is test_hostile_cli.
#define BOOST_TEST_MODULE hostile
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "catalog_scenario.hpp"
#include "plan/ir/plan.hpp"
#include "plan/report/report.hpp"
#include "plan/spec/catalog.hpp"
#include "plan/spec/checked.hpp"
#include "plan/spec/limits.hpp"
#include "plan/spec/sweep_size.hpp"
#include "plan/sweep/journal.hpp"
#include "source_tree.hpp"

using namespace paratwin;
using paratwin_test::catalog;
namespace fs = std::filesystem;

namespace {

// The message of the InputError `f` throws (fails when it throws none).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  BOOST_FAIL("expected InputError");
  return "";
}

// `levels` levels of 10 references each to the level below: 10^levels leaves in 10 x levels lines.
std::string alias_bomb(int levels) {
  std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= levels; ++i) {
    text += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) text += (k ? ", *a" : "*a") + std::to_string(i - 1);
    text += "]\n";
  }
  return text;
}

// Sets an environment variable for the life of the object.
struct ScopedEnv {
  std::string name;
  ScopedEnv(std::string n, const std::string& value) : name(std::move(n)) {
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() { ::unsetenv(name.c_str()); }
};

size_t count_nodes(const DocNode& n) {
  size_t count = 1;
  for (const auto& i : n.items) count += count_nodes(i);
  for (const auto& e : n.entries) count += count_nodes(e.value.front());
  return count;
}

PointResult priced(int index, double time_s, double cost) {
  PointResult p;
  p.plan = plan_json(Plan{});  // what a finished point carries (and its reader checks)
  p.index = index;
  p.time_to_train_s = time_s;
  p.cost_usd = cost;
  return p;
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("paratwin-hostile-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

const std::string kQuickstart = paratwin_test::source_dir() + "/scenarios/quickstart.yaml";

}  // namespace

// ---- YAML ------------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(an_alias_bomb_is_refused_at_the_alias_that_passes_the_limit) {
  // 8 levels: 10^8 leaves. Level 5 (line 6) repeats 111,111 nodes ten times: the limit of 10^6 falls there.
  const std::string message = error_of([] { parse_yaml(alias_bomb(8), "bomb.yaml"); });
  BOOST_TEST(message.rfind("bomb.yaml:6:", 0) == 0, message);
  BOOST_TEST(message.find("this alias repeats a node of 111111 YAML nodes") != std::string::npos, message);
  BOOST_TEST(message.find("PARATWIN_MAX_YAML_NODES") != std::string::npos, message);
}

BOOST_AUTO_TEST_CASE(aliases_within_the_limit_expand_and_the_limit_can_be_raised_or_lowered) {
  const DocNode small = parse_yaml(alias_bomb(3), "ok.yaml");  // 10^3 leaves
  BOOST_TEST(count_nodes(*small.find("a3")) == 11111u);
  // The expansion keeps the anchor's locations: a message about a repeated value points at its source.
  BOOST_TEST(small.find("a3")->items[0].items[0].items[0].items[0].location.str() == "ok.yaml:1:10");
  ScopedEnv lower("PARATWIN_MAX_YAML_NODES", "500");
  const std::string lowered = error_of([] { parse_yaml(alias_bomb(3), "ok.yaml"); });
  BOOST_TEST(lowered.rfind("ok.yaml:3:", 0) == 0, lowered);  // a2's aliases of a1 (111 nodes each)
  BOOST_TEST(lowered.find("limit is 500 YAML nodes") != std::string::npos, lowered);
  ScopedEnv wrong("PARATWIN_MAX_YAML_NODES", "many");
  BOOST_TEST(error_of([] { parse_yaml("a: 1", "x.yaml"); })
                 .find("expected a whole number >= 1 for "
                       "PARATWIN_MAX_YAML_NODES") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(nesting_past_the_depth_limit_and_alias_cycles_are_refused_where_they_are) {
  const std::string deep = "a: " + std::string(100000, '[') + std::string(100000, ']') + "\n";
  const std::string message = error_of([&] { parse_yaml(deep, "deep.yaml"); });
  BOOST_TEST(message.rfind("deep.yaml:1:67: error: this value is nested too deep", 0) == 0, message);
  BOOST_TEST(error_of([] { parse_yaml("a: &a [1, *a]\n", "c.yaml"); })
                 .rfind("c.yaml:1:11: error: this alias "
                        "refers to a node that contains it",
                        0) == 0);
  // An alias that nests a deep node deeper still.
  std::string chain = "a: &a " + std::string(40, '[') + std::string(40, ']') +
                      "\nb: [[[[[[[[[[[[[[[[[[[[[[[[[*a]]]]]]]]]]]]]]]]]]]]]]]]]\n";
  BOOST_TEST(error_of([&] { parse_yaml(chain, "n.yaml"); }).find("this alias nests too deep") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(merge_keys_add_the_keys_a_mapping_does_not_set_and_refuse_anything_else) {
  const DocNode d = parse_yaml("base: &b {layers: 2, hidden: 64}\nm:\n  <<: *b\n  hidden: 128\n", "m.yaml");
  const DocNode& m = *d.find("m");
  BOOST_TEST(m.find("layers")->scalar == "2");
  BOOST_TEST(m.find("hidden")->scalar == "128");  // the mapping's own key wins
  BOOST_TEST(!m.find("<<"));
  BOOST_TEST(
      error_of([] { parse_yaml("m:\n  <<: 5\n", "m.yaml"); }) ==
      "m.yaml:2:7: error: a YAML merge key '<<' takes a mapping (such as *base) or a list of them, got '5'");
}

BOOST_AUTO_TEST_CASE(a_mapping_of_many_keys_is_read_in_one_pass_and_its_duplicates_found) {
  std::string text;
  for (int i = 0; i < 50000; ++i) text += "k" + std::to_string(i) + ": " + std::to_string(i) + "\n";
  BOOST_TEST(parse_yaml(text, "k.yaml").entries.size() == 50000u);
  text += "k123: again\n";
  BOOST_TEST(error_of([&] { parse_yaml(text, "k.yaml"); }) ==
             "k.yaml:50001:1: error: duplicate key 'k123' (first defined at line 124)");
}

BOOST_AUTO_TEST_CASE(an_input_file_past_the_size_limit_is_refused_without_reading_it_all) {
  // /dev/zero never ends: the read stops at the limit.
  ScopedEnv limit("PARATWIN_MAX_INPUT_BYTES", "100000");
  const std::string message = error_of([] { load_yaml_file("/dev/zero"); });
  BOOST_TEST(message.find("/dev/zero: error: the file is too large; ParaTwin's limit is 100000 bytes") == 0u,
             message);
}

BOOST_AUTO_TEST_CASE(a_catalog_lists_an_alias_bomb_among_its_files_as_one_that_does_not_parse) {
  // A shared catalog (PARATWIN_HOME) is input too: listing it reads each file under the same limits.
  TempDir home;
  fs::create_directories(home.path / "models");
  std::ofstream(home.path / "models" / "bomb.yaml") << alias_bomb(8);
  std::ofstream(home.path / "models" / "fine.yaml") << "name: a fine model\n";
  const std::vector<CatalogEntry> entries = Catalog(home.path.string()).list(CatalogKind::Model);
  BOOST_TEST_REQUIRE(entries.size() == 2u);
  BOOST_TEST(entries[0].name == "bomb");
  BOOST_TEST(entries[0].description == "(does not parse; see paratwin validate)");
  BOOST_TEST(entries[1].description == "a fine model");
}

// ---- Sweeps -----------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(a_grid_of_a_hundred_million_points_is_counted_and_refused_before_any_point_is_made) {
  ScenarioSpec s = load_scenario(kQuickstart, {}, catalog());
  std::vector<std::string> values;
  std::string nodes = "cluster.nodes=", batch = "training.global_batch=";
  for (int i = 1; i <= 10000; ++i) {
    nodes += (i > 1 ? "," : "") + std::to_string(i);
    batch += (i > 1 ? "," : "") + std::to_string(i);
  }
  const std::vector<SweepAxis> axes = {parse_grid_argument(nodes), parse_grid_argument(batch)};
  BOOST_TEST(sweep_point_count(SweepSpec{axes, {}, false, {}}) == 100000000);
  const std::string message = error_of([&] { add_grid_axes(s, axes, catalog()); });
  BOOST_TEST(message.find("the sweep has 100000000 points (10000 values of cluster.nodes x 10000 values of "
                          "training.global_batch); narrow it: take fewer values of cluster.nodes") !=
                 std::string::npos,
             message);
  BOOST_TEST(message.find("ParaTwin's limit is 10000000 points in one sweep") != std::string::npos);
  // Refused before any value was checked: the count is the only error, the values are fine as they are.
  BOOST_TEST(std::count(message.begin(), message.end(), '\n') == 0);
  BOOST_TEST(s.sweep.empty());  // the scenario is left as it was
  // A product past 64 bits saturates instead of wrapping.
  SweepSpec huge;
  for (int a = 0; a < 10; ++a) huge.grid.push_back({"x", {}, std::vector<DocNode>(100000)});
  BOOST_TEST(sweep_point_count(huge) == std::numeric_limits<std::int64_t>::max());
}

BOOST_AUTO_TEST_CASE(points_made_from_their_index_are_those_of_the_nested_loops) {
  SweepSpec sweep;
  auto values = [](std::vector<std::string> v) {
    std::vector<DocNode> out;
    for (auto& s : v) out.push_back(DocNode::scalar_node(s, {}));
    return out;
  };
  sweep.grid = {{"a", {}, values({"1", "2", "3"})}, {"b", {}, values({"x", "y"})}};
  sweep.list = {{{"c", {}, DocNode::scalar_node("p", {})}}, {{"c", {}, DocNode::scalar_node("q", {})}}};
  const SweepPoints points(sweep);
  BOOST_REQUIRE(points.size() == 12);
  std::vector<std::string> seen;
  for (int i = 0; i < points.size(); ++i) seen.push_back(describe(points.at(i)));
  // List entries outermost, then a, then b fastest.
  BOOST_TEST(seen.front() == "c=p a=1 b=x");
  BOOST_TEST(seen[1] == "c=p a=1 b=y");
  BOOST_TEST(seen[2] == "c=p a=2 b=x");
  BOOST_TEST(seen[6] == "c=q a=1 b=x");
  BOOST_TEST(seen.back() == "c=q a=3 b=y");
  BOOST_CHECK_THROW(points.at(12), std::out_of_range);
}

BOOST_AUTO_TEST_CASE(the_front_and_the_goal_in_one_pass_equal_those_of_all_points_at_once) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(1, 40);  // few distinct values: many ties and equal points
  for (int round = 0; round < 50; ++round) {
    std::vector<PointResult> points;
    for (int i = 0; i < 300; ++i) {
      PointResult p = priced(i, small(rng), small(rng));
      if (i % 17 == 0) p.status = PointStatus::NoPlan;
      if (i % 23 == 0) p.cost_usd.reset();
      points.push_back(p);
    }
    // The front by definition: priced points no other priced point matches or beats, the first of equals.
    std::vector<int> expected;
    for (int i = 0; i < int(points.size()); ++i) {
      const PointResult& p = points[i];
      if (!p.ok() || !p.cost_usd) continue;
      bool beaten = false;
      for (int j = 0; j < int(points.size()) && !beaten; ++j) {
        const PointResult& q = points[j];
        if (j == i || !q.ok() || !q.cost_usd) continue;
        const bool as_good = q.time_to_train_s <= p.time_to_train_s && *q.cost_usd <= *p.cost_usd;
        const bool equal = q.time_to_train_s == p.time_to_train_s && *q.cost_usd == *p.cost_usd;
        beaten = as_good && (!equal || j < i);
      }
      if (!beaten) expected.push_back(i);
    }
    std::sort(expected.begin(), expected.end(),
              [&](int a, int b) { return points[a].time_to_train_s < points[b].time_to_train_s; });
    SweepSummary summary(GoalSpec{Seconds(20), Dollars(30)});
    for (const auto& p : points) summary.add(p);
    BOOST_TEST(summary.front() == expected, boost::test_tools::per_element());
    for (int i : expected) BOOST_TEST(summary.on_front(i));
    // The goal: the cheapest within both limits, ties to the faster then the earlier.
    std::optional<int> chosen;
    for (int i = 0; i < int(points.size()); ++i) {
      const PointResult& p = points[i];
      if (!p.ok() || !p.cost_usd || p.time_to_train_s > 20 || *p.cost_usd > 30) continue;
      if (!chosen || *p.cost_usd < *points[*chosen].cost_usd ||
          (*p.cost_usd == *points[*chosen].cost_usd && p.time_to_train_s < points[*chosen].time_to_train_s))
        chosen = i;
    }
    BOOST_TEST(summary.answer().chosen.value_or(-1) == chosen.value_or(-1));
  }
}

BOOST_AUTO_TEST_CASE(the_journal_keeps_points_as_they_finish_and_gives_them_back_in_order) {
  TempDir dir;
  const std::string path = (dir.path / "r.json.partial").string();
  SweepHeader header;
  header.scenario = "s";
  header.fingerprint = "0123456789abcdef";
  header.total = 10;
  {
    SweepJournal j = SweepJournal::create(path, header);
    j.start_run();
    for (int i : {0, 1, 2, 5}) {
      PointResult p = priced(i, 10 - i, i);
      if (i == 2) p.status = PointStatus::Failed, p.message = "worker died";
      j.append(p);
    }
    BOOST_CHECK_THROW(j.append(priced(4, 1, 1)), std::logic_error);  // a run's points rise
  }
  // A kill mid-line leaves half a point: a resume drops it.
  std::ofstream(path, std::ios::app) << "{\"index\":7,\"sett";
  SweepJournal j = SweepJournal::resume(path, header, "");
  std::vector<int> before;
  for (JournalReader r = j.reader(); auto p = r.next();) before.push_back(p->index);
  BOOST_TEST(before == (std::vector<int>{0, 1, 2, 5}), boost::test_tools::per_element());
  j.start_run();
  j.append(priced(2, 3, 3));  // the failed point again, now done
  j.append(priced(3, 4, 4));
  j.append(priced(9, 5, 5));
  std::vector<std::pair<int, bool>> merged;
  j.points()([&](const PointResult& p) { merged.push_back({p.index, p.ok()}); });
  BOOST_TEST(merged.size() == 6u);
  BOOST_TEST(merged[2].first == 2);
  BOOST_TEST(merged[2].second);  // the later run wins
  BOOST_TEST(merged[3].first == 3);
  BOOST_TEST(merged.back().first == 9);
  // Another sweep's journal is not continued.
  SweepHeader other = header;
  other.fingerprint = "ffffffffffffffff";
  BOOST_TEST(error_of([&] { SweepJournal::resume(path, other, ""); }).find("another sweep") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_results_file_is_read_a_point_at_a_time) {
  SweepResults r;
  r.scenario = "s";
  r.fingerprint = "f";
  r.total = 3;
  add_point(r, priced(0, 5, 5));
  add_point(r, priced(2, 4, 6));
  std::ostringstream out;
  write_json(out, r, r.source());
  std::istringstream in(out.str());
  int headers = 0;
  std::vector<int> seen;
  read_results(
      in, [&](const SweepHeader& h) { headers += h.total == 3; },
      [&](const PointResult& p) { seen.push_back(p.index); });
  BOOST_TEST(headers == 1);
  BOOST_TEST(seen == (std::vector<int>{0, 2}), boost::test_tools::per_element());
  std::istringstream broken(out.str().substr(0, out.str().size() / 2));
  BOOST_CHECK_THROW(read_results(
                        broken, [](const SweepHeader&) {}, [](const PointResult&) {}),
                    std::runtime_error);
}

// ---- Arithmetic and budgets -------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(products_of_user_numbers_are_exact_or_refused_never_wrapped) {
  BOOST_TEST(checked_product({16, 4, 8}).value_or(0) == 512);
  BOOST_TEST(!checked_product({std::int64_t(1) << 40, std::int64_t(1) << 30}).has_value());
  // The input: a global batch of 10^12 is refused at its value, not wrapped into a negative count.
  const std::string message = error_of(
      [] { load_scenario(kQuickstart, {parse_override("training.global_batch=1000000000000")}, catalog()); });
  BOOST_TEST(message ==
             "<--set training.global_batch=1000000000000>:1:23: error: training.global_batch must be "
             "between 1 and 2147483647, got 1000000000000");
  BOOST_TEST(message.find('-') == message.find("--set"));  // no negative number anywhere
  // A token budget whose steps would pass 64 bits (--emit megatron printed a negative --train-iters).
  BOOST_TEST(
      error_of([] { load_scenario(kQuickstart, {parse_override("training.tokens=1e30")}, catalog()); }) ==
      "<--set training.tokens=1e30>:1:17: error: training.tokens must be at most 1e18 tokens, got 1e30");
  // A plan file's degrees whose product passes 64 bits: verify says so in words.
  const ScenarioSpec s = load_scenario(kQuickstart, {}, catalog());
  Plan plan = complete_plan(s);
  plan.dp = 1 << 24;
  plan.micro_batch = 1 << 20;
  plan.num_microbatches = 1 << 24;
  bool said = false;
  for (const auto& problem : verify(plan, s.model, s.cluster, s.training))
    said |= problem.find("= more than 9.2e18 sequences") != std::string::npos;
  BOOST_TEST(said);
}

BOOST_AUTO_TEST_CASE(a_program_too_large_to_lower_is_refused_before_it_is_made_naming_the_knobs) {
  // 2^31 - 1 sequences in micro-batches of one over 16 replicas: ~134M micro-batches per step.
  const std::string message = error_of([] {
    load_scenario(kQuickstart,
                  {parse_override("training.global_batch=2147483632"), parse_override("plan.micro_batch=1")},
                  catalog());
  });
  BOOST_TEST(
      message.find("134217727 micro-batches per step: the Program would hold about") != std::string::npos,
      message);
  BOOST_TEST(message.find("raise plan.micro_batch or plan.dp, or lower training.global_batch") !=
             std::string::npos);
  BOOST_TEST(message.find("PARATWIN_MAX_PROGRAM_TASKS") != std::string::npos);
  // The estimate bounds what lowering makes.
  const ScenarioSpec s =
      load_scenario(paratwin_test::source_dir() + "/scenarios/gpt3-175b-1024-a100.yaml", {}, catalog());
  const Plan p = complete_plan(s);
  const Program program = lower(p, s.model, s.cluster, s.training);
  BOOST_TEST(program.task_count() <=
             size_t(estimated_program_tasks(p.pp, p.virtual_stages, p.num_microbatches, s.model.layers)));
}
