// Writing and reading failure traces. A trace is JSON, which is YAML too: it is read with the
// scenario reader, so a mistyped key gets the file, line, column and the nearest valid key.
#include "plan/io/failure_trace.hpp"

#include <limits>

#include "plan/spec/reader.hpp"

namespace paratwin {

nlohmann::json to_json(const FailureTrace& t) {
  nlohmann::json failures = nlohmann::json::array();
  for (const auto& f : t.failures) failures.push_back({{"at_s", f.at_s}, {"slot", f.slot}, {"kind", f.kind}});
  return {{"scenario", t.scenario},
          {"sets", t.sets},
          {"ranks", t.ranks},
          {"min_ranks", t.min_ranks},
          {"horizon_s", t.horizon_s},
          {"checkpoint_interval_s", t.checkpoint_interval_s},
          {"checkpoint_cost_s", t.checkpoint_cost_s},
          {"checkpoint_write_s", t.checkpoint_write_s},
          {"detection_s", t.detection_s},
          {"restart_s", t.restart_s},
          {"down_s", t.down_s},
          {"failures", failures}};
}

FailureTrace load_failure_trace(const std::string& path) {
  return parse_failure_trace(load_yaml_file(path));
}

FailureTrace parse_failure_trace(const DocNode& doc) {
  Diagnostics diag;
  FailureTrace t;
  MapReader r(doc, "", diag);
  if (!r.is_mapping())
    throw InputError(doc.location, "expected a failure trace (a mapping), found " + describe(doc));
  constexpr double kInf = std::numeric_limits<double>::infinity();
  r.read("scenario", t.scenario, true);
  if (const DocNode* sets = r.get("sets")) {
    if (!sets->is_sequence()) diag.error(sets->location, "expected a list of KEY=VALUE for 'sets'");
    for (const DocNode& s : sets->items)
      if (auto v = read_string(s, "sets[]", diag)) t.sets.push_back(*v);
  }
  r.read("ranks", t.ranks, 1, 1 << 20, true);
  r.read("min_ranks", t.min_ranks, 1, 1 << 20, true);
  r.read("horizon_s", t.horizon_s, 0, kInf, true);
  r.read("checkpoint_interval_s", t.checkpoint_interval_s, 0, kInf, true);
  r.read("checkpoint_cost_s", t.checkpoint_cost_s, 0, kInf, true);
  r.read("checkpoint_write_s", t.checkpoint_write_s, 0, kInf, true);
  r.read("detection_s", t.detection_s, 0, kInf, true);
  r.read("restart_s", t.restart_s, 0, kInf, true);
  r.read("down_s", t.down_s, 0, kInf, true);
  if (const DocNode* failures = r.require("failures")) {
    if (!failures->is_sequence()) diag.error(failures->location, "expected a list of {at_s, slot, kind}");
    for (const DocNode& f : failures->items) {
      TraceFailure e;
      MapReader fr(f, "failures[]", diag);
      if (!fr.is_mapping()) {
        diag.error(f.location, "expected a failure {at_s, slot, kind}, found " + describe(f));
        continue;
      }
      fr.read("at_s", e.at_s, 0, kInf, true);
      fr.read("slot", e.slot, 0, t.ranks - 1, true);
      fr.read("kind", e.kind, true);
      fr.finish();
      t.failures.push_back(e);
    }
  }
  r.finish();
  if (t.min_ranks > t.ranks)
    diag.error(doc.location,
               "min_ranks " + std::to_string(t.min_ranks) + " exceeds ranks " + std::to_string(t.ranks));
  diag.throw_if_errors();
  return t;
}

void apply_failure_trace(const FailureTrace& t, ScenarioSpec& s) {
  s.failures.rates.clear();
  s.failures.events.clear();
  for (const auto& f : t.failures) s.failures.events.push_back({Seconds(f.at_s), Component::Gpu, f.slot});
  s.failures.detection = Seconds(t.detection_s);
  s.failures.restart = Seconds(t.restart_s);
  s.failures.repair = Seconds(t.down_s);
  // Without checkpoints a failure loses everything since the start: an interval past the horizon.
  s.checkpoint.interval =
      Seconds(t.checkpoint_interval_s > 0 ? t.checkpoint_interval_s : 10 * t.horizon_s + 1);
  s.elasticity.policy = t.min_ranks < t.ranks ? ElasticPolicy::Shrink : ElasticPolicy::Restart;
  s.elasticity.min_gpus = t.min_ranks;
  s.elasticity.spares = 0;
}

}  // namespace paratwin
