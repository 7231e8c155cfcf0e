// Pareto front and goal of a sweep.
#include "plan/sweep/analysis.hpp"

#include <algorithm>
#include <limits>

namespace paratwin {

namespace {

// The position in `points` of the point with `index` (points have distinct indices).
int position_of(const std::vector<PointResult>& points, int index) {
  for (int i = 0; i < int(points.size()); ++i)
    if (points[i].index == index) return i;
  return -1;
}

}  // namespace

std::vector<int> pareto_front(const std::vector<PointResult>& points) {
  SweepSummary summary{GoalSpec{}};
  for (const PointResult& p : points) summary.add(p);
  std::vector<int> front = summary.front();
  for (int& i : front) i = position_of(points, i);
  return front;
}

std::string point_summary(const PointResult& p) {
  std::string settings;
  for (const auto& [path, value] : p.settings) settings += " " + path + "=" + value;
  std::string out = "#" + std::to_string(p.index) + settings;
  if (!p.ok()) return out;
  out += " (" + std::to_string(p.gpus) + " GPUs): " + to_string(Seconds(p.time_to_train_s));
  if (p.cost_usd) out += ", " + to_string(Dollars(*p.cost_usd));
  return out;
}

GoalAnswer answer_goal(const GoalSpec& goal, const std::vector<PointResult>& points) {
  SweepSummary summary{goal};
  for (const PointResult& p : points) summary.add(p);
  GoalAnswer answer = summary.answer();
  if (answer.chosen) answer.chosen = position_of(points, *answer.chosen);
  if (answer.closest) answer.closest = position_of(points, *answer.closest);
  return answer;
}

void SweepSummary::add(const PointResult& p) {
  ++points_;
  if (p.ok() && p.cost_usd) {
    // The front's corner at or before this time has the least cost of all earlier times: the point is
    // dominated (or equalled by an earlier point) exactly when that corner costs no more.
    const double t = p.time_to_train_s, c = *p.cost_usd;
    auto after = front_.upper_bound(t);
    if (after == front_.begin() || std::prev(after)->second.cost_usd > c) {
      // Corners from this time on that cost as much or more are dominated now.
      auto first = front_.lower_bound(t), last = first;
      while (last != front_.end() && last->second.cost_usd >= c) ++last;
      front_.insert(front_.erase(first, last), {t, Corner{c, p.index}});
      front_sorted_.clear();
    }
  }
  if (!goal_.deadline && !goal_.budget) return;
  if (!p.ok() || (!p.cost_usd && goal_.budget)) return;
  eligible_ = true;
  if (excess(p) <= 1) {
    if (!chosen_ || better(p, *chosen_)) chosen_ = p;
  } else if (!closest_ || excess(p) < excess(*closest_)) {
    closest_ = p;
  }
}

std::vector<int> SweepSummary::front() const {
  std::vector<int> out;
  for (const auto& [time_s, k] : front_) out.push_back(k.index);
  return out;
}

bool SweepSummary::on_front(int index) const {
  if (front_sorted_.size() != front_.size()) {
    front_sorted_ = front();
    std::sort(front_sorted_.begin(), front_sorted_.end());
  }
  return std::binary_search(front_sorted_.begin(), front_sorted_.end(), index);
}

// How far a point is from the goal: the largest of time / deadline and cost / budget (<= 1 meets it).
double SweepSummary::excess(const PointResult& p) const {
  double worst = 0;
  if (goal_.deadline) worst = std::max(worst, p.time_to_train_s / goal_.deadline->value());
  if (goal_.budget) worst = std::max(worst, *p.cost_usd / goal_.budget->value());
  return worst;
}

// The cheapest meeting the goal when there is a deadline (the fastest when only a budget), ties to
// the faster; an earlier point stays on a full tie. Points without a price sort last by cost.
bool SweepSummary::better(const PointResult& a, const PointResult& b) const {
  const double inf = std::numeric_limits<double>::infinity();
  const double ca = a.cost_usd.value_or(inf), cb = b.cost_usd.value_or(inf);
  if (goal_.deadline && ca != cb) return ca < cb;
  if (a.time_to_train_s != b.time_to_train_s) return a.time_to_train_s < b.time_to_train_s;
  return ca < cb;
}

GoalAnswer SweepSummary::answer() const {
  GoalAnswer answer;
  if (!goal_.deadline && !goal_.budget) {
    answer.met = true;
    return answer;
  }
  std::string limits;
  if (goal_.deadline) limits = "the deadline of " + to_string(*goal_.deadline);
  if (goal_.budget)
    limits += (limits.empty() ? "" : " and ") + std::string("the budget of ") + to_string(*goal_.budget);
  if (!eligible_) {
    answer.message = "no point could be evaluated" + std::string(goal_.budget ? " with a price" : "") +
                     ", so none meets " + limits;
    return answer;
  }
  if (chosen_) {
    answer.met = true;
    answer.chosen = chosen_->index;
    answer.message = std::string(goal_.deadline ? "cheapest" : "fastest") + " point within " + limits + ": " +
                     point_summary(*chosen_);
    return answer;
  }
  const PointResult& c = *closest_;
  answer.closest = c.index;
  std::string over;
  if (goal_.deadline && c.time_to_train_s > goal_.deadline->value())
    over = to_string(Seconds(c.time_to_train_s - goal_.deadline->value())) + " over the deadline";
  if (goal_.budget && *c.cost_usd > goal_.budget->value())
    over += (over.empty() ? "" : ", ") + to_string(Dollars(*c.cost_usd - goal_.budget->value())) +
            " over the budget";
  answer.message = "no point meets " + limits + "; the closest is " + point_summary(c) + " (" + over + ")";
  return answer;
}

}  // namespace paratwin
