// The validation set: reading the manifest, rebuilding each run from its sweep file, converting the
// published figure and evaluating the plan as `paratwin plan` does.
#include "bench/fidelity_set.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "plan/analytic/evaluate.hpp"
#include "plan/ir/program.hpp"
#include "plan/search/choose.hpp"
#include "plan/spec/model.hpp"
#include "plan/sweep/point.hpp"

namespace fs = std::filesystem;

namespace paratwin::fidelity {

const EnumNames<FigureKind> kFigureKindNames = {{"step_time_s", FigureKind::StepTime},
                                                {"tokens_per_s", FigureKind::TokensPerSecond},
                                                {"tokens_per_s_per_gpu", FigureKind::TokensPerSecondPerGpu},
                                                {"model_tflops_per_gpu", FigureKind::ModelTflopsPerGpu}};

namespace {

const std::string kNotExpressible = "not expressible: ";

Guard read_guard(MapReader& top) {
  Guard g;
  if (const DocNode* node = top.require("guard")) {
    MapReader r(*node, "guard", top.diagnostics());
    r.read("mean_abs_error", g.mean_abs_error, 0.0, 10.0, true);
    r.read("max_abs_error", g.max_abs_error, 0.0, 10.0, true);
    r.read("max_peak_over_published", g.max_peak_over_published, 0.0, 10.0, true);
    r.read("held_out_mean_abs_error", g.held_out_mean_abs_error, 0.0, 10.0);
    r.read("held_out_max_abs_error", g.held_out_max_abs_error, 0.0, 10.0);
    r.finish();
  }
  return g;
}

std::vector<Source> read_sources(MapReader& top) {
  std::vector<Source> sources;
  const DocNode* node = top.require("sources");
  if (!node) return sources;
  if (!node->is_mapping()) {
    top.diagnostics().error(node->location,
                            "expected a mapping of source names for sources, got " + describe(*node));
    return sources;
  }
  for (const auto& e : node->entries) {
    Source s;
    s.name = e.key;
    MapReader r(e.value.front(), "sources." + e.key, top.diagnostics());
    r.read("title", s.title, true);
    r.read("where", s.where, true);
    r.read("choices", s.choices, true);
    r.read("memory", s.memory);
    r.finish();
    sources.push_back(std::move(s));
  }
  return sources;
}

// Names the source of a run or an anchor; an unknown one is an error with the nearest name.
void read_source(MapReader& r, const DocNode& node, const std::string& path,
                 const std::map<std::string, const Source*>& sources, std::string& out) {
  if (!r.read("source", out, true) || sources.contains(out)) return;
  std::vector<std::string> names;
  for (const auto& [name, source] : sources) names.push_back(name);
  r.diagnostics().error(node.find("source")->location,
                        "unknown source '" + out + "' in " + path + did_you_mean(out, names));
}

Run read_run(const DocNode& node, const std::string& path, const std::string& directory,
             const std::map<std::string, const Source*>& sources, Diagnostics& diag) {
  Run run;
  run.where = node.location;
  MapReader r(node, path, diag);
  if (!r.is_mapping()) {
    diag.error(node.location, "expected a mapping for " + path + ", got " + describe(node));
    return run;
  }
  r.read("id", run.id, true);
  read_source(r, node, path, sources, run.source);
  if (r.read("scenario", run.scenario))
    run.scenario = (fs::path(directory) / run.scenario).lexically_normal().string();
  int figures = 0;
  for (const auto& [key, kind] : kFigureKindNames)
    if (r.read(key, run.published.value, 0.0, 1e15)) {
      run.published.kind = kind;
      ++figures;
    }
  if (figures != 1)
    diag.error(node.location, path + " needs exactly one published figure, one of " +
                                  join(enum_choices(kFigureKindNames)) + "; got " + std::to_string(figures));
  std::string status;
  if (r.read("status", status, true)) {
    if (status.rfind(kNotExpressible, 0) == 0 && status.size() > kNotExpressible.size())
      run.not_expressible = status.substr(kNotExpressible.size());
    else if (status == "held out")
      run.held_out = true;
    else if (status != "checked")
      diag.error(
          node.find("status")->location,
          path + ".status must be `checked`, `held out` or `not expressible: WHY`, got '" + status + "'");
  }
  if ((status == "checked" || run.held_out) && run.scenario.empty())
    diag.error(node.location, path + " (" + run.id + ") is " + status + " but names no scenario");
  if (!run.evaluated() && !run.scenario.empty())
    diag.error(node.find("scenario")->location,
               path + " (" + run.id + ") is not expressible, so it has no scenario to evaluate");
  if (r.read_quantity("peak_memory", run.published_peak) && sources.contains(run.source) &&
      sources.at(run.source)->memory.empty())
    diag.error(node.find("peak_memory")->location,
               path + " (" + run.id + ") publishes a peak memory, but sources." + run.source +
                   ".memory does not say what it measures (an allocator's reserve, a device's use)");
  r.read("notes", run.notes);
  r.finish();
  return run;
}

MemoryAnchor read_anchor(const DocNode& node, const std::string& path, const std::string& directory,
                         const std::map<std::string, const Source*>& sources, Diagnostics& diag) {
  MemoryAnchor a;
  a.where = node.location;
  MapReader r(node, path, diag);
  if (!r.is_mapping()) {
    diag.error(node.location, "expected a mapping for " + path + ", got " + describe(node));
    return a;
  }
  r.read("id", a.id, true);
  read_source(r, node, path, sources, a.source);
  if (r.read("scenario", a.scenario, true))
    a.scenario = (fs::path(directory) / a.scenario).lexically_normal().string();
  r.read("notes", a.notes);
  r.finish();
  return a;
}

// "tp 8, pp 8 (v 2), cp 1, dp 8, ep 1, mb 4, 1f1b, full, SP, zero 3" ("full every 2" with recompute_every,
// "full first 5" with recompute_layers, "selective (layernorm, moe_act)" with recompute_modules;
// "zero 3 after_step" with a reshard other than after_forward, "zero 3 HSDP 16 x 8": 16 replicas of an 8-way
// shard group)
std::string describe_plan(const Plan& p) {
  auto n = [](int v) { return std::to_string(v); };
  // With recompute_every: "full every 2"; with recompute_layers: "full first 5".
  std::set<std::tuple<Recompute, int, int>> modes;
  for (const auto& st : p.stages)
    modes.insert(st.recompute == Recompute::None
                     ? std::tuple{st.recompute, 1, 0}
                     : std::tuple{st.recompute, st.recompute_every, st.recompute_layers});
  std::string recompute;
  for (const auto& [m, every, first] : modes)
    recompute += (recompute.empty() ? "" : "/") + enum_name(m, kRecomputeNames) +
                 (every > 1 ? " every " + n(every) : "") + (first > 0 ? " first " + n(first) : "");
  if (const RecomputeModules& modules = p.stages.front().recompute_modules; modules != RecomputeModules{})
    recompute += " (" + modules.names() + ")";
  return "tp " + n(p.tp) + ", pp " + n(p.pp) +
         (p.virtual_stages > 1 ? " (v " + n(p.virtual_stages) + ")" : "") + ", cp " + n(p.cp) + ", dp " +
         n(p.dp) + ", ep " + n(p.ep) + (folds_experts(p) ? " (expert tp " + n(p.expert_tp) + ")" : "") +
         ", mb " + n(p.micro_batch) + ", " + enum_name(p.schedule, kScheduleNames) + ", " + recompute +
         (p.sequence_parallel ? ", SP" : "") + ", zero " + n(p.zero) +
         (p.zero == 3 && p.reshard != Reshard::AfterForward ? " " + enum_name(p.reshard, kReshardNames)
                                                            : "") +
         (p.dp_replicate > 1 ? " HSDP " + n(p.dp_replicate) + " x " + n(p.dp / p.dp_replicate) : "");
}

// A sweep file, loaded once and checked as a whole (every list entry).
class SweepFiles {
 public:
  explicit SweepFiles(const Catalog& catalog) : catalog_(catalog) {}

  // The run's scenario and its list entry as --set arguments.
  std::pair<ScenarioSpec, std::string> run_scenario(const Run& run) {
    auto it = files_.find(run.scenario);
    if (it == files_.end())
      it = files_.emplace(run.scenario, load_scenario(run.scenario, {}, catalog_)).first;
    const ScenarioSpec& file = it->second;
    SweepPoint point;
    try {
      point = named_sweep_point(file, run.id);
    } catch (const InputError&) {
      throw InputError(run.where,
                       run.id + ": " + run.scenario + " has no sweep.list entry with name: " + run.id);
    }
    std::string settings;
    for (const SweepSetting& s : point.settings)
      if (s.path != "name")
        settings += (settings.empty() ? "" : " ") + std::string("--set '") + s.path + "=" +
                    to_flow_yaml(s.value) + "'";
    return {point_scenario(file, point, catalog_), settings};
  }

 private:
  const Catalog& catalog_;
  std::map<std::string, ScenarioSpec> files_;
};

Outcome evaluate_loaded(const Run& run, const ScenarioSpec& s, const std::string& settings) {
  const ChosenPlan chosen = choose_plan(s, "", SearchOptions{});
  if (chosen.search)
    throw InputError(run.where, run.id +
                                    ": its scenario leaves the plan to the optimizer; a published run has "
                                    "a fixed plan (tp, pp and micro_batch)");
  const Plan& plan = chosen.plan;
  const Program program = lower(plan, s.model, s.cluster, s.training);
  Outcome o;
  o.report = make_report(s.name, program, evaluate(program, s.cluster, s.training));
  o.id = run.id;
  o.source = run.source;
  o.model = s.model.name;
  const PoolSpec* pool = &s.cluster.pools.front();
  for (const auto& p : s.cluster.pools)
    if (!plan.stages.empty() && p.name == plan.stages.front().pool) pool = &p;
  o.device = s.cluster.device_of(*pool).name;
  o.plan = describe_plan(plan);
  o.settings = settings;
  o.replay = "paratwin plan bench/fidelity/" + std::filesystem::path(run.scenario).filename().string() +
             " --point " + run.id;
  o.precision = enum_name(s.training.precision, kPrecisionNames);
  o.attention = enum_name(s.training.attention, kAttentionNames);
  o.gpus = plan.gpus();
  o.seq_len = s.training.seq_len;
  o.parameters = count_parameters(s.model).total;
  o.zero3 = plan.zero == 3;
  o.h100 = o.device.find("h100") != std::string::npos;
  o.moe = s.model.moe.has_value();
  o.measured_s = measured_iteration_time(run.published, s);
  o.predicted_s = o.report.metrics.iteration_time_s;
  o.published_peak = run.published_peak;
  return o;
}

}  // namespace

Manifest load_manifest(const std::string& path) {
  Manifest m;
  m.file = path;
  const DocNode document = load_yaml_file(path);
  Diagnostics diag;
  MapReader top(document, "", diag);
  if (!top.is_mapping()) throw InputError(document.location, "expected a mapping (guard, sources, runs)");
  m.guard = read_guard(top);
  m.sources = read_sources(top);
  std::map<std::string, const Source*> sources;
  for (const auto& s : m.sources) sources[s.name] = &s;
  const std::string directory = fs::path(path).parent_path().string();
  std::set<std::string> ids;
  auto unique = [&](const std::string& id, const Location& where) {
    if (!id.empty() && !ids.insert(id).second) diag.error(where, "run " + id + " appears twice");
  };
  if (const DocNode* runs = top.require("runs")) {
    if (!runs->is_sequence()) {
      diag.error(runs->location, "expected a list of runs, got " + describe(*runs));
    } else {
      for (size_t i = 0; i < runs->items.size(); ++i) {
        Run run = read_run(runs->items[i], "runs[" + std::to_string(i) + "]", directory, sources, diag);
        unique(run.id, run.where);
        m.runs.push_back(std::move(run));
      }
    }
  }
  if (const DocNode* anchors = top.get("out_of_memory")) {
    if (!anchors->is_sequence()) {
      diag.error(anchors->location,
                 "expected a list of configurations for out_of_memory, got " + describe(*anchors));
    } else {
      for (size_t i = 0; i < anchors->items.size(); ++i) {
        MemoryAnchor a = read_anchor(anchors->items[i], "out_of_memory[" + std::to_string(i) + "]", directory,
                                     sources, diag);
        unique(a.id, a.where);
        m.out_of_memory.push_back(std::move(a));
      }
    }
  }
  top.finish();
  diag.throw_if_errors();
  return m;
}

double measured_iteration_time(const Figure& published, const ScenarioSpec& s) {
  const double tokens = double(s.training.global_batch) * s.training.seq_len;
  const double gpus = s.cluster.gpus();
  switch (published.kind) {
    case FigureKind::StepTime:
      return published.value;
    case FigureKind::TokensPerSecond:
      return tokens / published.value;
    case FigureKind::TokensPerSecondPerGpu:
      return tokens / (published.value * gpus);
    case FigureKind::ModelTflopsPerGpu:
      return tokens * training_flops_per_token(s.model, s.training.seq_len) / (published.value * 1e12 * gpus);
  }
  return 0;
}

ScenarioSpec load_run_scenario(const Run& run, const Catalog& catalog) {
  SweepFiles files(catalog);
  return files.run_scenario(run).first;
}

Outcome evaluate_run(const Run& run, const Catalog& catalog) {
  SweepFiles files(catalog);
  const auto [scenario, settings] = files.run_scenario(run);
  return evaluate_loaded(run, scenario, settings);
}

namespace {

std::vector<Outcome> evaluate_runs(const Manifest& manifest, const Catalog& catalog, bool held_out,
                                   const std::function<void(const std::string&)>& progress) {
  SweepFiles files(catalog);
  std::vector<Outcome> out;
  for (const Run& run : manifest.runs) {
    if (!run.evaluated() || run.held_out != held_out) continue;
    if (progress) progress(run.id);
    const auto [scenario, settings] = files.run_scenario(run);
    out.push_back(evaluate_loaded(run, scenario, settings));
  }
  return out;
}

}  // namespace

std::vector<Outcome> evaluate_checked(const Manifest& manifest, const Catalog& catalog,
                                      const std::function<void(const std::string&)>& progress) {
  return evaluate_runs(manifest, catalog, false, progress);
}

std::vector<Outcome> evaluate_held_out(const Manifest& manifest, const Catalog& catalog) {
  return evaluate_runs(manifest, catalog, true, {});
}

std::vector<AnchorOutcome> evaluate_anchors(const Manifest& manifest, const Catalog& catalog) {
  SweepFiles files(catalog);
  std::vector<AnchorOutcome> out;
  for (const MemoryAnchor& a : manifest.out_of_memory) {
    Run run;  // the anchor as a run without a figure: its scenario, id and place
    run.id = a.id;
    run.source = a.source;
    run.scenario = a.scenario;
    run.where = a.where;
    const auto [scenario, settings] = files.run_scenario(run);
    const Outcome o = evaluate_loaded(run, scenario, settings);
    out.push_back({a.id, a.source, o.plan, o.replay, o.report.metrics.peak_memory_gib,
                   o.report.metrics.memory_capacity_gib, o.report.metrics.fits});
  }
  return out;
}

Stats stats(const std::vector<Outcome>& outcomes, const std::function<bool(const Outcome&)>& keep) {
  std::vector<double> abs_errors;
  double signed_sum = 0;
  for (const Outcome& o : outcomes) {
    if (keep && !keep(o)) continue;
    abs_errors.push_back(std::fabs(o.error()));
    signed_sum += o.error();
  }
  Stats s;
  s.runs = int(abs_errors.size());
  if (abs_errors.empty()) return s;
  std::sort(abs_errors.begin(), abs_errors.end());
  double sum = 0;
  for (double e : abs_errors) sum += e;
  s.mean_abs = sum / s.runs;
  s.max_abs = abs_errors.back();
  s.p90_abs = abs_errors[size_t(std::ceil(0.9 * s.runs)) - 1];
  s.mean_signed = signed_sum / s.runs;
  return s;
}

PeakStats peak_stats(const std::vector<Outcome>& outcomes, const std::function<bool(const Outcome&)>& keep) {
  PeakStats p;
  double sum = 0;
  for (const Outcome& o : outcomes) {
    if (!o.published_peak || (keep && !keep(o))) continue;
    const double r = o.peak_ratio();
    p.min = p.runs == 0 ? r : std::min(p.min, r);
    p.max = p.runs == 0 ? r : std::max(p.max, r);
    sum += r;
    ++p.runs;
  }
  if (p.runs > 0) p.mean = sum / p.runs;
  return p;
}

}  // namespace paratwin::fidelity
