// Measured against predicted per kind of task.
#include "exec/train/kind_comparison.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace paratwin::exec {
namespace {

// The kinds in report order; collectives split by whether their group leaves a host.
const char* kind_of(const Task& t) {
  switch (t.kind) {
    case TaskKind::Forward:
      return "forward";
    case TaskKind::Backward:
      return "backward";
    case TaskKind::Recompute:
      return "recompute";
    case TaskKind::Optimizer:
      return "optimizer";
    case TaskKind::Copy:
      return t.purpose == Purpose::InputBatch ? "input batch" : "offload copy";
    case TaskKind::Collective:
      return t.placement.size > t.placement.per_node ? "collective across hosts" : "collective in a host";
    case TaskKind::Send:
    case TaskKind::Recv:
      return nullptr;  // pipeline transfers: measured on other roles' ranks too; not in the profile
  }
  return nullptr;
}

const char* const kOrder[] = {"forward",
                              "backward",
                              "recompute",
                              "optimizer",
                              "offload copy",
                              "input batch",
                              "collective in a host",
                              "collective across hosts"};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(v.size() / 2), v.end());
  return v[v.size() / 2];
}

double duration(const RunTimings& t, int rank, int step, int task) {
  return t.at(t.end_s, rank, step, task) - t.at(t.start_s, rank, step, task);
}

}  // namespace

nlohmann::json by_kind_json(const ScenarioSpec& scenario, const Program& program, const RunTimings& t) {
  const Role& role = program.roles.front();
  const PoolSpec* pool = &scenario.cluster.pools.front();
  for (const PoolSpec& p : scenario.cluster.pools)
    if (p.name == role.pool) pool = &p;
  const int first = t.steps > 1 ? 1 : 0;
  nlohmann::json out = nlohmann::json::array();
  for (const char* kind : kOrder) {
    int tasks = 0;
    double predicted = 0;
    std::vector<double> per_step(size_t(std::max(0, t.steps - first)), 0.0), cpu_per_step = per_step;
    for (int i = 0; i < t.tasks; ++i) {
      const Task& task = role.tasks[i];
      const char* k = kind_of(task);
      if (!k || std::string(k) != kind) continue;
      ++tasks;
      predicted += task_duration_s(task, *pool, scenario.cluster, scenario.training.precision);
      for (int s = first; s < t.steps; ++s) {
        double d = duration(t, 0, s, i);
        if (task.kind == TaskKind::Collective) {
          d = std::numeric_limits<double>::infinity();
          for (int r = 0; r < t.ranks; ++r) d = std::min(d, duration(t, r, s, i));
        }
        per_step[size_t(s - first)] += d;
        if (task.stream == StreamKind::Compute) cpu_per_step[size_t(s - first)] += t.at(t.cpu_s, 0, s, i);
      }
    }
    if (tasks == 0) continue;
    nlohmann::json row = {
        {"kind", kind}, {"tasks", tasks}, {"measured_s", median(per_step)}, {"predicted_s", predicted}};
    if (median(cpu_per_step) > 0) row["measured_cpu_s"] = median(cpu_per_step);
    out.push_back(row);
  }
  return out;
}

std::string by_kind_text(const nlohmann::json& by_kind) {
  std::string text = "per step, measured (CPU time) / predicted by the twin:";
  for (const nlohmann::json& k : by_kind) {
    const double measured = k["measured_s"].get<double>(), predicted = k["predicted_s"].get<double>();
    // Microseconds for kinds that take less than a tenth of a millisecond (the input batches).
    const bool small = std::max(measured, predicted) < 1e-4;
    const double unit = small ? 1e6 : 1e3;
    char item[200], cpu[48] = "";
    if (k.contains("measured_cpu_s"))
      std::snprintf(cpu, sizeof cpu, " (%.2f)", unit * k["measured_cpu_s"].get<double>());
    std::snprintf(item, sizeof item, "%s %s %.2f%s / %.2f %s", text.back() == ':' ? "" : ",",
                  k["kind"].get<std::string>().c_str(), unit * measured, cpu, unit * predicted,
                  small ? "us" : "ms");
    text += item;
  }
  return text + "\n";
}

}  // namespace paratwin::exec
