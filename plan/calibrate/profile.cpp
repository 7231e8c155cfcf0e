// Reading a live run's profile back and lowering the Program it measured.
#include "plan/calibrate/profile.hpp"
#include "plan/topology/rank_threads.hpp"

#include <cmath>
#include <sstream>

#include <nlohmann/json.hpp>

namespace paratwin {

std::string profile_inputs_yaml(const ScenarioSpec& s, const Plan& plan) {
  auto indent = [](const std::string& text) {
    std::istringstream in(text);
    std::string out, line;
    while (std::getline(in, line)) out += "  " + line + "\n";
    return out;
  };
  return "name: " + nlohmann::json(s.name).dump() + "\nmodel:\n" + indent(to_yaml(s.model)) +
         "training:\n  global_batch: " + std::to_string(s.training.global_batch) +
         "\n  seq_len: " + std::to_string(s.training.seq_len) +
         "\n  precision: " + enum_name(s.training.precision, kPrecisionNames) +
         "\n  optimizer: " + enum_name(s.training.optimizer, kOptimizerNames) +
         "\n  attention: " + enum_name(s.training.attention, kAttentionNames) + "\nplan:\n" +
         indent(to_yaml(plan));
}

Profile load_profile(const std::string& path) {
  // JSON is YAML: reading the profile as a document gives every field its line and column.
  return parse_profile(load_yaml_file(path), path);
}

namespace {

// "routing": {"experts": E, "layers": [{"layer": l, "tokens": [E numbers]}]} (exec/train/measurements.cpp).
void read_routed(const DocNode& node, Profile& p, Diagnostics& diag) {
  p.routed_location = node.location;
  MapReader rr(node, "routing", diag);
  rr.read("experts", p.routed_experts, 1, 1 << 16, true);
  if (const DocNode* layers = rr.require("layers")) {
    if (!layers->is_sequence())
      diag.error(layers->location, "expected a list of MoE layers, got " + describe(*layers));
    for (size_t i = 0; layers->is_sequence() && i < layers->items.size(); ++i) {
      MapReader lr(layers->items[i], "routing.layers[" + std::to_string(i) + "]", diag);
      int layer = 0;
      lr.read("layer", layer, 0, 1 << 20, true);
      std::vector<double> tokens;
      if (const DocNode* t = lr.require("tokens")) {
        for (size_t e = 0; t->is_sequence() && e < t->items.size(); ++e)
          tokens.push_back(read_number(t->items[e], lr.field("tokens"), diag, 0.0).value_or(0.0));
        if (!t->is_sequence() || int(tokens.size()) != p.routed_experts)
          diag.error(t->location, lr.field("tokens") + ": expected " + std::to_string(p.routed_experts) +
                                      " token counts, one per expert");
      }
      lr.finish();
      p.routed.emplace_back(layer, std::move(tokens));
    }
  }
  rr.finish();
}

}  // namespace

Profile parse_profile(const DocNode& document, const std::string& path) {
  Diagnostics diag;
  Profile p;
  p.path = path;
  MapReader r(document, "", diag);
  std::string format;
  if (!r.is_mapping() || !r.read("format", format) || format != kProfileFormat) {
    const DocNode* f = document.find("format");
    throw InputError(f ? f->location : document.location,
                     path + " is not a profile of a live run (expected \"format\": \"" + kProfileFormat +
                         "\"); write one with paratwin run SCENARIO --profile FILE");
  }
  r.read("version", p.version, 1, 1000, true);
  if (p.version > kProfileVersion)
    diag.error(document.find("version")->location, "profile version " + std::to_string(p.version) +
                                                       " is newer than this paratwin reads (" +
                                                       std::to_string(kProfileVersion) + ")");
  r.read("scenario", p.scenario, true);
  r.read("backend", p.backend, true);
  r.read("model", p.model, true);
  r.read("cluster", p.cluster, true);
  r.read("pool", p.pool, true);
  r.read("device", p.device, true);
  r.read("ranks", p.ranks, 1, 1 << 24, true);
  r.read("nodes", p.nodes, 1, 1 << 24);      // profiles before runs across hosts ran on one
  r.read("threads", p.threads, 1, 1 << 16);  // profiles before threads per rank ran one
  r.read("steps", p.steps, 1, 1 << 30, true);
  int warmup = 0;
  r.read("warmup_steps_excluded", warmup, 0, 1 << 30);
  p.measured_steps = p.steps - warmup;
  r.read("step_cpu_cv", p.step_cpu_cv, 0, 100);  // profiles before the step's common spread have none
  r.read("step_cpu_correlation", p.step_cpu_correlation, -1, 1);  // nor those before the ranks' share
  r.read("rank_cpu_cv", p.rank_cpu_cv, 0, 100);  // nor those before the ranks' persistent spread
  if (const DocNode* inputs = r.require("inputs")) {
    p.inputs_location = inputs->location;
    if (inputs->is_scalar())
      p.inputs = inputs->scalar;
    else
      diag.error(inputs->location, "expected the run's inputs as YAML text, got " + describe(*inputs));
  }
  if (const DocNode* tasks = r.require("tasks")) {
    if (!tasks->is_sequence() || tasks->items.empty())
      diag.error(tasks->location, "expected a non-empty list of measured tasks, got " + describe(*tasks));
    for (size_t i = 0; i < tasks->items.size(); ++i) {
      const DocNode& node = tasks->items[i];
      MapReader tr(node, "tasks[" + std::to_string(i) + "]", diag);
      ProfiledTask t;
      t.where = node.location;
      tr.read("task", t.name, true);
      tr.read("index", t.index, 0, 1 << 30, true);
      tr.read("count", t.count, 0, 1 << 30, true);
      tr.read("median_s", t.wall_s, 0, 1e9, true);
      tr.read("cpu_s", t.cpu_s, 0, 1e9);
      tr.read("gemm_s", t.gemm_s, 0, 1e9);
      tr.read("attention_s", t.attention_s, 0, 1e9);
      tr.read("scores_s", t.scores_s, 0, 1e9);  // profiles before it, and GPU ones, have none
      tr.read("cpu_cv", t.cpu_cv, 0, 100);      // profiles before the spread of kernel times have none
      tr.read("gemm_flops", t.gemm_flops, 0, 1e30);
      tr.read("bytes", t.bytes, 0, 1e18);
      tr.read("transfer_s", t.transfer_s, 0, 1e9);
      if (t.index != int(i))
        diag.error(node.location, "task '" + t.name + "' is listed at position " + std::to_string(i) +
                                      " but has index " + std::to_string(t.index));
      p.tasks.push_back(t);
    }
  }
  if (const DocNode* routing = r.get("routing")) read_routed(*routing, p, diag);
  diag.throw_if_errors();
  return p;
}

namespace {

// A one-node cluster of one pool stands for "this machine": it takes as many devices as the run had
// ranks (paratwin run --ranks does the same). A run across hosts sizes a one-pool cluster to its hosts
// and their ranks (paratwin run --hosts does the same).
std::vector<Override> sizing(const ClusterSpec& c, int ranks, int nodes, const Location& where) {
  const std::string pool = c.pools.empty() ? "" : "cluster.pools." + c.pools.front().name;
  if (nodes > 1) {
    if (c.pools.size() == 1 && c.pools.front().nodes == nodes && c.gpus() == ranks) return {};
    if (c.pools.size() != 1 || ranks % nodes != 0)
      throw InputError(where, "the profile ran " + std::to_string(ranks) + " ranks on " +
                                  std::to_string(nodes) + " hosts but cluster " + c.name +
                                  " has more than one pool; calibrate a cluster of that size");
    return {parse_override(pool + ".nodes=" + std::to_string(nodes)),
            parse_override(pool + ".gpus_per_node=" + std::to_string(ranks / nodes))};
  }
  if (c.gpus() == ranks) return {};
  if (c.pools.size() != 1 || c.pools.front().nodes != 1)
    throw InputError(where, "the profile ran on " + std::to_string(ranks) + " ranks but cluster " + c.name +
                                " has " + std::to_string(c.gpus()) +
                                " devices in more than one node or pool; calibrate a cluster of that size");
  return {parse_override(pool + ".gpus_per_node=" + std::to_string(ranks))};
}

bool same(double a, double b) {
  return std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b));
}

}  // namespace

ClusterSpec load_cluster_argument(const std::string& cluster) {
  Diagnostics diag;
  const Location argument = argument_location("--cluster", cluster);
  const auto resolved = resolve_reference(DocNode::scalar_node(cluster, argument), CatalogKind::Topology,
                                          Catalog::installed(), diag);
  diag.throw_if_errors();
  const ClusterSpec c = parse_cluster(*resolved, "cluster", diag);
  diag.throw_if_errors();
  return c;
}

ProfiledRun lower_profile(const Profile& profile, const std::string& cluster) {
  const Location argument = argument_location("--cluster", cluster);
  Diagnostics diag;
  const ClusterSpec base = load_cluster_argument(cluster);

  DocNode document = parse_yaml(profile.inputs, profile.path + " (inputs)");
  if (!document.is_mapping())
    throw InputError(profile.inputs_location, "the profile's inputs are not a mapping");
  document.set("cluster", DocNode::scalar_node(cluster, argument), argument);
  // The run's pool may be named otherwise in this cluster: with one pool, the stages take it.
  if (DocNode* plan = document.find("plan"); plan && base.pools.size() == 1)
    if (DocNode* stages = plan->find("stages"); stages && stages->is_sequence())
      for (DocNode& stage : stages->items)
        std::erase_if(stage.entries, [](const DocEntry& e) { return e.key == "pool"; });

  ProfiledRun run{profile, load_scenario(document, sizing(base, profile.ranks, profile.nodes, argument)), {}};
  scale_cpu_devices(run.scenario.cluster, profile.threads);  // as the run's twin sized its ranks
  if (profile.backend == "cpu" && run.scenario.training.precision != Precision::Fp32)
    throw InputError(
        profile.inputs_location,
        "the profile's run trained in " + enum_name(run.scenario.training.precision, kPrecisionNames) +
            " on the CPU backend, which computes in fp32: its times are no measure of that precision; "
            "profile a run with --set training.precision=fp32");
  const Plan plan = complete_plan(run.scenario);
  std::vector<std::string> problems =
      verify(plan, run.scenario.model, run.scenario.cluster, run.scenario.training);
  if (!problems.empty()) {
    std::vector<Diagnostic> errors;
    for (auto& p : problems)
      errors.push_back({Severity::Error, profile.inputs_location,
                        "the profile's plan does not run on " + cluster + ": " + p});
    throw InputError(std::move(errors));
  }
  run.program = lower(plan, run.scenario.model, run.scenario.cluster, run.scenario.training);

  // The profile must have measured this very Program: task by task, the same names and work.
  const Role& role = run.program.roles.front();
  // A profile before version 2 was recorded before the Program had the data loader's copies: they
  // stand unmeasured (count 0) in their places; calibration reads no copy.
  std::vector<ProfiledTask>& tasks = run.profile.tasks;
  if (profile.version < 2) {
    for (size_t i = 0; i < role.tasks.size() && i <= tasks.size(); ++i)
      if (role.tasks[i].purpose == Purpose::InputBatch)
        tasks.insert(tasks.begin() + std::ptrdiff_t(i),
                     ProfiledTask{role.tasks[i].name, int(i), {profile.path}});
    for (size_t i = 0; i < tasks.size(); ++i) tasks[i].index = int(i);
  }
  const std::string of = " (model " + profile.model + ", scenario " + profile.scenario + ")";
  for (size_t i = 0; i < std::max(role.tasks.size(), tasks.size()); ++i) {
    if (i >= tasks.size()) {
      diag.error(Location{profile.path}, "the profile has no measurement of task '" + role.tasks[i].name +
                                             "' (index " + std::to_string(i) + ") of the Program" + of);
      continue;
    }
    const ProfiledTask& measured = tasks[i];
    if (i >= role.tasks.size()) {
      diag.error(measured.where, "the profile measured task '" + measured.name + "', which the Program" + of +
                                     " does not have: a profile of another plan or paratwin version?");
      continue;
    }
    const Task& task = role.tasks[i];
    if (measured.name != task.name)
      diag.error(measured.where, "task " + std::to_string(i) + " of the profile is '" + measured.name +
                                     "' but the Program" + of + " has '" + task.name + "' there");
    else if (measured.count == 0 && !(profile.version < 2 && task.purpose == Purpose::InputBatch))
      diag.error(measured.where, "task '" + measured.name + "' was never measured (count 0)");
    else if (!same(measured.gemm_flops, task.work.gemm_flops.value()))
      diag.error(measured.where, "task '" + measured.name + "' did " + to_string(Flops(measured.gemm_flops)) +
                                     " of GEMMs but in the Program" + of + " it does " +
                                     to_string(task.work.gemm_flops) +
                                     ": a profile of another model or plan?");
    else if (task.kind == TaskKind::Collective && !same(measured.bytes, task.bytes.value() * task.count))
      diag.error(measured.where, "task '" + measured.name + "' moved " + std::to_string(measured.bytes) +
                                     " bytes but the Program" + of + " moves " +
                                     std::to_string(task.bytes.value() * task.count));
  }
  diag.throw_if_errors();
  return run;
}

}  // namespace paratwin
