// File-kind detection and validation of single catalog files.
#include "plan/spec/validate.hpp"

#include "plan/spec/jobs.hpp"
#include "plan/spec/scenario.hpp"
#include "plan/spec/summary.hpp"
#include "plan/topology/job_placement.hpp"

namespace paratwin {

std::string file_kind_name(FileKind kind) {
  switch (kind) {
    case FileKind::Model:
      return "model";
    case FileKind::Cluster:
      return "cluster";
    case FileKind::Scenario:
      return "scenario";
    case FileKind::Plan:
      return "plan";
  }
  return "";
}

static FileKind detect_kind(const DocNode& doc) {
  if (!doc.is_mapping())
    throw InputError(doc.location,
                     "expected a mapping (a model, a cluster or a scenario), got " + describe(doc));
  if (doc.find("model") || doc.find("cluster") || doc.find("training")) return FileKind::Scenario;
  if (doc.find("pools") || doc.find("devices")) return FileKind::Cluster;
  if (doc.find("layers") || doc.find("hidden") || doc.find("heads")) return FileKind::Model;
  if (doc.find("stages") || doc.find("tp") || doc.find("pp") || doc.find("dp")) return FileKind::Plan;
  throw InputError(doc.location,
                   "cannot tell what this file describes: expected a scenario (with 'model', 'cluster' and "
                   "'training'), a cluster (with 'devices' and 'pools'), a model (with 'layers', 'hidden', "
                   "'heads') or a plan file (with 'tp', 'pp', 'dp', 'stages')");
}

Validation validate_file(const std::string& path, const std::vector<Override>& overrides,
                         const Catalog& catalog) {
  DocNode doc = load_yaml_file(path);
  Validation v;
  v.kind = detect_kind(doc);
  if (v.kind != FileKind::Scenario && !overrides.empty())
    throw InputError(override_location(overrides.front().text),
                     "--set applies to scenarios; " + path + " is a " + file_kind_name(v.kind));
  switch (v.kind) {
    case FileKind::Model: {
      Diagnostics diag;
      ModelSpec m = parse_model(doc, "model", diag);
      diag.throw_if_errors();
      v.warnings = diag.warnings();
      const auto params = count_parameters(m);
      v.summary = "model " + m.name + ": " + format_count(params.total) + " parameters, " +
                  std::to_string(m.layers) + " layers";
      break;
    }
    case FileKind::Cluster: {
      Diagnostics diag;
      ClusterSpec c = parse_cluster(doc, "cluster", diag);
      diag.throw_if_errors();
      v.warnings = diag.warnings();
      v.summary = "cluster " + c.name + ": " + std::to_string(c.gpus()) + " GPUs in " +
                  std::to_string(c.pools.size()) + (c.pools.size() == 1 ? " pool" : " pools");
      break;
    }
    case FileKind::Plan: {
      // On its own a plan file can only be checked for form; `paratwin plan SCENARIO --plan FILE`
      // verifies it against a model and a cluster.
      Diagnostics diag;
      const PlanRequest r = parse_plan_request(doc, diag);
      diag.throw_if_errors();
      auto degree = [](const std::optional<int>& d) { return d ? std::to_string(*d) : std::string("auto"); };
      v.summary = "plan: tp " + degree(r.tp) + ", pp " + degree(r.pp) + ", dp " + degree(r.dp) +
                  (r.stages ? ", " + std::to_string(r.stages->size()) + " stages" : "");
      break;
    }
    case FileKind::Scenario: {
      if (holds_jobs(doc)) {
        JobsScenario s = load_jobs_scenario(std::move(doc), overrides, catalog);
        place_jobs(s);  // automatic placements must fit beside the others
        v.warnings = s.warnings;
        v.summary = "scenario " + s.name + ": " + std::to_string(s.jobs.size()) + " jobs on " +
                    s.cluster.name + " (" + std::to_string(s.cluster.gpus()) + " GPUs)";
        break;
      }
      ScenarioSpec s = load_scenario(std::move(doc), overrides, catalog);
      v.warnings = s.warnings;
      const ScenarioSummary sum = summarize(s);
      v.summary = "scenario " + s.name + ": " + sum.model + " (" + format_count(sum.parameters) +
                  " parameters) on " + sum.cluster + " (" + std::to_string(sum.gpus) + " GPUs)";
      break;
    }
  }
  return v;
}

}  // namespace paratwin
