// A sweep's results as one document: the points finished so far, the Pareto front and the goal's
// answer; as JSON (also the file `--resume` continues from), CSV and a terminal table.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/sweep/analysis.hpp"

namespace paratwin {

struct SweepResults {
  std::string scenario;             // its name
  std::string fingerprint;          // of the scenario and its points: which sweep these results are of
  std::vector<std::string> fields;  // the paths the points set, in the sweep's order (table columns)
  bool simulate = false;
  int total = 0;  // points in the sweep
  GoalSpec goal;
  std::vector<PointResult> points;  // those finished, by index

  bool complete() const { return int(points.size()) == total; }
};

// The results of a sweep before any point has finished.
SweepResults start_results(const ScenarioSpec& scenario, const std::vector<SweepPoint>& points);

// Adds a finished point, keeping the points ordered by index (a point already there is replaced).
void add_point(SweepResults& results, PointResult point);

// {scenario, sweep{fingerprint, fields[], points, finished, simulate, complete}, goal{deadline_s,
// budget_usd, met, chosen, closest, message}, pareto[] (point indices, fastest first), points[]}.
// Nothing in it depends on how or in which order the points were computed.
nlohmann::json to_json(const SweepResults& results);
// Reads what to_json wrote (the goal's deadline and budget; its answer is recomputed). Throws
// std::runtime_error saying what is missing or mistyped.
SweepResults results_from_json(const nlohmann::json& json);

// One row per point: index, the fields, status, cluster and plan, metrics, time to train, cost,
// energy, whether it is on the Pareto front, and the message of a point that is not ok.
std::string to_csv(const SweepResults& results);
// The table people read, followed by the Pareto front and the goal's answer.
std::string to_text(const SweepResults& results);

}  // namespace paratwin
