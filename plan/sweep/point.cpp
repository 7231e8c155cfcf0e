// Evaluating one sweep point: load, choose the plan, evaluate (or simulate), and cost the training.
#include "plan/sweep/point.hpp"

#include <limits>
#include <stdexcept>

#include "plan/analytic/evaluate.hpp"
#include "plan/report/goodput_report.hpp"
#include "plan/search/choose.hpp"
#include "plan/spec/suggest.hpp"
#include "plan/sweep/economics.hpp"

namespace paratwin {

const EnumNames<PointStatus> kPointStatusNames = {{"ok", PointStatus::Ok},
                                                  {"invalid", PointStatus::Invalid},
                                                  {"no-plan", PointStatus::NoPlan},
                                                  {"failed", PointStatus::Failed}};

namespace {

std::string messages_of(const InputError& e) {
  std::string out;
  for (const auto& d : e.diagnostics())
    if (d.severity == Severity::Error) out += (out.empty() ? "" : "; ") + d.message;
  return out;
}

PointResult named(const SweepPoint& point) {
  PointResult r;
  r.index = point.index;
  for (const auto& s : point.settings) r.settings[s.path] = to_flow_yaml(s.value);
  return r;
}

PointResult with_status(PointResult r, PointStatus status, std::string message) {
  r.status = status;
  r.message = std::move(message);
  return r;
}

bool has_failures(const FailureSpec& f) {
  return !f.rates.empty() || !f.events.empty();
}

}  // namespace

PointResult failed_point(const SweepPoint& point, const std::string& why) {
  return with_status(named(point), PointStatus::Failed, why);
}

ScenarioSpec point_scenario(const ScenarioSpec& sweep_scenario, const SweepPoint& point,
                            const Catalog& catalog, const std::vector<Override>& after) {
  DocNode document = sweep_scenario.document;
  std::erase_if(document.entries, [](const DocEntry& e) { return e.key == "sweep"; });
  std::vector<Override> overrides = sweep_overrides(point.settings);
  overrides.insert(overrides.end(), after.begin(), after.end());
  return load_scenario(std::move(document), std::move(overrides), catalog);
}

SweepPoint named_sweep_point(const ScenarioSpec& sweep_scenario, const std::string& name) {
  std::vector<std::string> names;
  const SweepSpec& sweep = sweep_scenario.sweep;
  for (size_t i = 0; i < sweep.list.size(); ++i)
    for (const SweepSetting& s : sweep.list[i])
      if (s.path == "name" && s.value.is_scalar()) {
        if (s.value.scalar == name) return {int(i), sweep.list[i]};
        names.push_back(s.value.scalar);
      }
  const Location where =
      sweep.list.empty() ? Location{sweep_scenario.document.location.file} : sweep.location;
  if (names.empty())
    throw InputError(where, "expected a sweep.list entry named '" + name +
                                "', but the scenario has no named sweep.list entries");
  throw InputError(where, "expected a sweep.list entry named '" + name + "', one of " + join(names) +
                              did_you_mean(name, names));
}

PointResult evaluate_point(const ScenarioSpec& sweep_scenario, const SweepPoint& point,
                           const PointSimulator& simulate, const Catalog& catalog) {
  PointResult r = named(point);
  ScenarioSpec s;
  try {
    s = point_scenario(sweep_scenario, point, catalog);
  } catch (const InputError& e) {
    return with_status(r, PointStatus::Invalid, messages_of(e));
  }
  if (!s.training.tokens && !s.training.steps)
    return with_status(r, PointStatus::Invalid,
                       "training.tokens or training.steps is needed for the time to train and the cost");

  const bool searched = !(s.plan.tp && s.plan.pp && s.plan.micro_batch);
  ChosenPlan chosen;
  try {
    chosen = choose_plan(s, "", SearchOptions{1, false});
  } catch (const InputError& e) {
    return with_status(r, searched ? PointStatus::NoPlan : PointStatus::Invalid, messages_of(e));
  }
  const Plan& plan = chosen.plan;
  Report report;
  if (chosen.search) {
    report = chosen.search->top.front().report;
  } else {
    const Program program = lower(plan, s.model, s.cluster, s.training);
    report = make_report(s.name, program, evaluate(program, s.cluster, s.training));
  }
  // Under failure rates the analytic point expects the closed form's goodput (the search's report has
  // it where its objective counted failures).
  if (has_failure_rates(s) && !report.goodput)
    add_expected_goodput(report, s, lower(plan, s.model, s.cluster, s.training, {.task_names = false}));
  if (!report.metrics.fits) {
    const StageMemory& worst = report.stages[report.worst_stage];
    return with_status(r, searched ? PointStatus::NoPlan : PointStatus::Invalid,
                       "the plan does not fit: stage " + std::to_string(worst.stage) + " needs " +
                           to_string(worst.peak) + " of " + to_string(worst.capacity));
  }

  const double tokens_per_step = double(s.training.global_batch) * s.training.seq_len;
  r.tokens = s.training.tokens ? *s.training.tokens : double(*s.training.steps) * tokens_per_step;
  r.metrics = report.metrics;
  r.analytic_iteration_time_s = report.metrics.iteration_time_s;
  r.evaluator = "analytic";
  if (report.goodput) r.goodput = report.goodput->goodput;
  if (simulate) {
    std::optional<Seconds> horizon;
    if (has_failures(s.failures)) horizon = Seconds(r.tokens / report.metrics.tokens_per_s);
    try {
      const SimulatedPoint simulated = simulate(s, plan, horizon);
      r.metrics = simulated.metrics;
      r.goodput = simulated.goodput;
      r.p95_iteration_time_s = simulated.p95_iteration_time_s;
      r.evaluator = "simulation";
    } catch (const InputError& e) {  // too large to simulate: the point's settings, not a failure
      return with_status(r, PointStatus::Invalid, messages_of(e));
    } catch (const std::exception& e) {
      return with_status(r, PointStatus::Failed, std::string("simulation failed: ") + e.what());
    }
    if (r.goodput && *r.goodput <= 0)
      return with_status(r, PointStatus::NoPlan, "no training survives the failures (goodput 0)");
  }

  const RunRates rates = run_rates(plan, s.cluster);
  r.cluster = s.cluster.name;
  r.devices = rates.devices;
  r.gpus = s.cluster.gpus();
  r.plan_gpus = rates.gpus;
  r.plan = plan_json(plan);
  r.time_to_train_s = r.tokens / (r.metrics.tokens_per_s * r.goodput.value_or(1.0));
  r.gpu_hours = rates.gpus * r.time_to_train_s / 3600;
  if (rates.dollars_per_s) r.cost_usd = *rates.dollars_per_s * r.time_to_train_s;
  r.energy_mwh = rates.watts * r.time_to_train_s / 3.6e9;
  return r;
}

nlohmann::json to_json(const PointResult& p) {
  nlohmann::json j = {
      {"index", p.index}, {"settings", p.settings}, {"status", enum_name(p.status, kPointStatusNames)}};
  if (!p.ok()) {
    j["message"] = p.message;
    return j;
  }
  j.update({{"cluster", p.cluster},
            {"devices", p.devices},
            {"gpus", p.gpus},
            {"plan_gpus", p.plan_gpus},
            {"evaluator", p.evaluator},
            {"plan", p.plan},
            {"metrics", metrics_json(p.metrics)},
            {"analytic_iteration_time_s", p.analytic_iteration_time_s},
            {"tokens", p.tokens},
            {"time_to_train_s", p.time_to_train_s},
            {"gpu_hours", p.gpu_hours},
            {"cost_usd", p.cost_usd ? nlohmann::json(*p.cost_usd) : nlohmann::json()},
            {"energy_mwh", p.energy_mwh},
            {"goodput", p.goodput ? nlohmann::json(*p.goodput) : nlohmann::json()}});
  if (p.p95_iteration_time_s) j["p95_iteration_time_s"] = *p.p95_iteration_time_s;  // only when simulated
  return j;
}

namespace {

// `j[key]` as a whole number from `min` to INT_MAX (a float or a larger number would not convert).
int whole_number(const nlohmann::json& j, const char* key, std::int64_t min, const std::string& where) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_integer() || v.get<std::int64_t>() < min ||
      v.get<std::int64_t>() > std::numeric_limits<int>::max())
    throw std::runtime_error("'" + where + key + "' is not a whole number from " + std::to_string(min));
  return v.get<int>();
}

// The plan of a point read back: what the table and the CSV show of it, typed.
void check_plan(const nlohmann::json& plan) {
  if (!plan.is_object()) throw std::runtime_error("'plan' is not a mapping");
  for (const char* key : {"tp", "pp", "dp", "cp", "ep", "micro_batch", "virtual_stages"})
    whole_number(plan, key, 1, "plan.");
  whole_number(plan, "zero", 0, "plan.");
  for (const char* key : {"schedule", "recompute"})
    if (!plan.at(key).is_string()) throw std::runtime_error(std::string("'plan.") + key + "' is not text");
}

}  // namespace

PointResult point_from_json(const nlohmann::json& j) {
  try {
    PointResult p;
    p.index = whole_number(j, "index", 0, "");
    p.settings = j.at("settings").get<std::map<std::string, std::string>>();
    const std::string status = j.at("status").get<std::string>();
    bool known = false;
    for (const auto& [name, value] : kPointStatusNames)
      if (name == status) p.status = value, known = true;
    if (!known) throw std::runtime_error("unknown status '" + status + "'");
    if (!p.ok()) {
      p.message = j.at("message").get<std::string>();
      return p;
    }
    p.cluster = j.at("cluster").get<std::string>();
    p.devices = j.at("devices").get<std::string>();
    p.gpus = whole_number(j, "gpus", 0, "");
    p.plan_gpus = whole_number(j, "plan_gpus", 0, "");
    p.evaluator = j.at("evaluator").get<std::string>();
    check_plan(j.at("plan"));
    p.plan = j.at("plan");
    const nlohmann::json& m = j.at("metrics");
    p.metrics = {m.at("iteration_time_s").get<double>(),
                 m.at("tokens_per_s").get<double>(),
                 m.at("model_tflops_per_gpu").get<double>(),
                 m.at("mfu").get<double>(),
                 m.at("hfu").get<double>(),
                 m.at("peak_memory_gib").get<double>(),
                 m.at("memory_capacity_gib").get<double>(),
                 m.at("fits").get<bool>(),
                 m.value("compute_pace", 1.0)};
    p.analytic_iteration_time_s = j.at("analytic_iteration_time_s").get<double>();
    p.tokens = j.at("tokens").get<double>();
    p.time_to_train_s = j.at("time_to_train_s").get<double>();
    p.gpu_hours = j.at("gpu_hours").get<double>();
    if (!j.at("cost_usd").is_null()) p.cost_usd = j.at("cost_usd").get<double>();
    p.energy_mwh = j.at("energy_mwh").get<double>();
    if (!j.at("goodput").is_null()) p.goodput = j.at("goodput").get<double>();
    if (j.contains("p95_iteration_time_s"))
      p.p95_iteration_time_s = j.at("p95_iteration_time_s").get<double>();
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("not a sweep point: ") + e.what());
  }
}

}  // namespace paratwin
