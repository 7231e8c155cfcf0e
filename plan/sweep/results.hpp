// A sweep's results: the points finished so far, the Pareto front and the goal's answer; as JSON (also
// the file `--resume` continues from), CSV and a terminal table. Every writer takes the points from a
// source it reads twice (the front and the goal, then the rows), so that a sweep of millions of points
// is written without being held.
#pragma once

#include <functional>
#include <istream>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/sweep/analysis.hpp"

namespace paratwin {

// Which sweep the results are of, and what they hold besides their points.
struct SweepHeader {
  std::string scenario;             // its name
  std::string fingerprint;          // of the scenario and its points: which sweep these results are of
  std::vector<std::string> fields;  // the paths the points set, in the sweep's order (table columns)
  bool simulate = false;
  int total = 0;  // points in the sweep
  GoalSpec goal;
};

// The header of `scenario`'s sweep (after --set and --grid), from its axes and list: no point is made.
SweepHeader sweep_header(const ScenarioSpec& scenario);

// Calls `visit` with each finished point in index order; a source can be read more than once.
using PointVisitor = std::function<void(const PointResult&)>;
using PointSource = std::function<void(const PointVisitor&)>;

// {scenario, sweep{fingerprint, fields[], points, finished, simulate, complete}, goal{deadline_s,
// budget_usd, met, chosen, closest, message}, pareto[] (point indices, fastest first), points[]}, in
// that order, one point per line. Nothing in it depends on how or in which order the points ran.
void write_json(std::ostream& out, const SweepHeader& header, const PointSource& points);
// One row per point: index, the fields, status, cluster and plan, metrics, time to train, cost,
// energy, whether it is on the Pareto front, and the message of a point that is not ok.
void write_csv(std::ostream& out, const SweepHeader& header, const PointSource& points);
// The table people read, followed by the Pareto front and the goal's answer.
void write_text(std::ostream& out, const SweepHeader& header, const PointSource& points);

// Reads what write_json wrote, a point at a time: `on_header` once, before the first point (the goal's
// deadline and budget are read back; its answer is not), then `on_point` for each point in the file's
// order. Memory is that of one point. Throws std::runtime_error saying what is missing or mistyped.
void read_results(std::istream& in, const std::function<void(const SweepHeader&)>& on_header,
                  const PointVisitor& on_point);

// The results in memory, for tests and the plot.
struct SweepResults : SweepHeader {
  std::vector<PointResult> points;  // those finished, by index

  bool complete() const { return int(points.size()) == total; }
  PointSource source() const;
};

// The results of a sweep before any point has finished.
SweepResults start_results(const ScenarioSpec& scenario);
// Adds a finished point, keeping the points ordered by index (a point already there is replaced).
void add_point(SweepResults& results, PointResult point);

nlohmann::json to_json(const SweepResults& results);
// Throws std::runtime_error saying what is missing or mistyped.
SweepResults results_from_json(const nlohmann::json& json);
std::string to_csv(const SweepResults& results);
std::string to_text(const SweepResults& results);

}  // namespace paratwin
