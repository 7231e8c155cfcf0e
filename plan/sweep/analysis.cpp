// Pareto front and goal of a sweep.
#include "plan/sweep/analysis.hpp"

#include <algorithm>
#include <limits>

namespace paratwin {

std::vector<int> pareto_front(const std::vector<PointResult>& points) {
  std::vector<int> priced;
  for (int i = 0; i < int(points.size()); ++i)
    if (points[i].ok() && points[i].cost_usd) priced.push_back(i);
  std::stable_sort(priced.begin(), priced.end(), [&](int a, int b) {
    const PointResult &pa = points[a], &pb = points[b];
    if (pa.time_to_train_s != pb.time_to_train_s) return pa.time_to_train_s < pb.time_to_train_s;
    return *pa.cost_usd < *pb.cost_usd;
  });
  std::vector<int> front;
  for (int i : priced)
    if (front.empty() || *points[i].cost_usd < *points[front.back()].cost_usd) front.push_back(i);
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
  GoalAnswer answer;
  if (!goal.deadline && !goal.budget) {
    answer.met = true;
    return answer;
  }
  std::string limits;
  if (goal.deadline) limits = "the deadline of " + to_string(*goal.deadline);
  if (goal.budget)
    limits += (limits.empty() ? "" : " and ") + std::string("the budget of ") + to_string(*goal.budget);

  // How far a point is from the goal: the largest of time / deadline and cost / budget (<= 1 meets it).
  auto excess = [&](const PointResult& p) {
    double worst = 0;
    if (goal.deadline) worst = std::max(worst, p.time_to_train_s / goal.deadline->value());
    if (goal.budget) worst = std::max(worst, *p.cost_usd / goal.budget->value());
    return worst;
  };
  std::vector<int> eligible;
  for (int i = 0; i < int(points.size()); ++i)
    if (points[i].ok() && (points[i].cost_usd || !goal.budget)) eligible.push_back(i);
  if (eligible.empty()) {
    answer.message = "no point could be evaluated" + std::string(goal.budget ? " with a price" : "") +
                     ", so none meets " + limits;
    return answer;
  }
  // The cheapest meeting the goal when there is a deadline (the fastest when only a budget), ties to
  // the faster, then the earlier point. Points without a price sort last by cost.
  auto cost = [&](int i) { return points[i].cost_usd.value_or(std::numeric_limits<double>::infinity()); };
  auto better = [&](int a, int b) {
    const double ta = points[a].time_to_train_s, tb = points[b].time_to_train_s;
    if (goal.deadline && cost(a) != cost(b)) return cost(a) < cost(b);
    if (ta != tb) return ta < tb;
    return cost(a) < cost(b);
  };
  for (int i : eligible)
    if (excess(points[i]) <= 1 && (!answer.chosen || better(i, *answer.chosen))) answer.chosen = i;
  if (answer.chosen) {
    answer.met = true;
    answer.message = std::string(goal.deadline ? "cheapest" : "fastest") + " point within " + limits + ": " +
                     point_summary(points[*answer.chosen]);
    return answer;
  }
  answer.closest = *std::min_element(eligible.begin(), eligible.end(),
                                     [&](int a, int b) { return excess(points[a]) < excess(points[b]); });
  const PointResult& c = points[*answer.closest];
  std::string over;
  if (goal.deadline && c.time_to_train_s > goal.deadline->value())
    over = to_string(Seconds(c.time_to_train_s - goal.deadline->value())) + " over the deadline";
  if (goal.budget && *c.cost_usd > goal.budget->value())
    over += (over.empty() ? "" : ", ") + to_string(Dollars(*c.cost_usd - goal.budget->value())) +
            " over the budget";
  answer.message = "no point meets " + limits + "; the closest is " + point_summary(c) + " (" + over + ")";
  return answer;
}

}  // namespace paratwin
