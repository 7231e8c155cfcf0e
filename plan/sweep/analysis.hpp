// What a sweep answers: the Pareto front of time to train against cost, and the point that best meets
// the scenario's goal (a deadline, a budget, or both).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "plan/sweep/point.hpp"

namespace paratwin {

// Positions in `points` of the Pareto front, fastest first: the points with a cost that no other
// point matches or beats on both time to train and cost. Along the front the time strictly
// increases and the cost strictly decreases; of identical points the first is kept.
std::vector<int> pareto_front(const std::vector<PointResult>& points);

struct GoalAnswer {
  bool met = false;
  std::optional<int> chosen;   // position in points: the cheapest point meeting the deadline (and the
                               // budget); with a budget alone, the fastest point within it
  std::optional<int> closest;  // when none meets the goal: the point with the least excess, the largest
                               // of time / deadline and cost / budget
  std::string message;         // the answer in one sentence, naming the point
};

// Points that are not Ok, or have no cost while a budget is set, are never chosen. A goal without a
// deadline or budget has nothing to answer (met, no point, empty message).
GoalAnswer answer_goal(const GoalSpec& goal, const std::vector<PointResult>& points);

// The Pareto front and the goal's answer in one pass over the points, in the order the vector forms
// above take them (by index): memory for the front and two points, however many points pass. The
// answer's `chosen` and `closest` are point indices here, not positions.
class SweepSummary {
 public:
  explicit SweepSummary(GoalSpec goal) : goal_(std::move(goal)) {}

  void add(const PointResult& point);

  int points() const { return points_; }
  // Point indices, fastest first.
  std::vector<int> front() const;
  bool on_front(int index) const;
  GoalAnswer answer() const;

 private:
  struct Corner {
    double cost_usd;
    int index;
  };
  double excess(const PointResult& p) const;
  bool better(const PointResult& a, const PointResult& b) const;

  GoalSpec goal_;
  int points_ = 0;
  std::map<double, Corner> front_;         // by time to train, rising; cost strictly falling
  mutable std::vector<int> front_sorted_;  // the front's indices in order, for on_front (built on use)
  bool eligible_ = false;                  // a point the goal could choose was seen
  std::optional<PointResult> chosen_, closest_;
};

// "#5 cluster=dgx-h100 cluster.nodes=256 (2048 GPUs): 41.2 d, $12.3M" for messages.
std::string point_summary(const PointResult& point);

}  // namespace paratwin
