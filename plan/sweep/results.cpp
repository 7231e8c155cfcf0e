// Sweep results: JSON, CSV and the terminal table.
#include "plan/sweep/results.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <stdexcept>

namespace paratwin {
namespace {

std::string fnv1a_hex(const std::string& text) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ULL;
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, h);
  return buf;
}

std::string fixed(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// "tp 8 pp 4 dp 16 mb 1 interleaved v2 selective ZeRO 1"
std::string plan_text(const nlohmann::json& p) {
  std::string out = "tp " + std::to_string(p.at("tp").get<int>()) + " pp " +
                    std::to_string(p.at("pp").get<int>()) + " dp " + std::to_string(p.at("dp").get<int>());
  for (const char* extra : {"cp", "ep"})
    if (p.at(extra).get<int>() > 1)
      out += std::string(" ") + extra + " " + std::to_string(p.at(extra).get<int>());
  out += " mb " + std::to_string(p.at("micro_batch").get<int>()) + " " + p.at("schedule").get<std::string>();
  if (p.at("virtual_stages").get<int>() > 1) out += " v" + std::to_string(p.at("virtual_stages").get<int>());
  if (p.at("recompute") != "none") out += " " + p.at("recompute").get<std::string>();
  if (p.at("zero").get<int>() > 0) out += " ZeRO " + std::to_string(p.at("zero").get<int>());
  return out;
}

std::string energy_text(double mwh) {
  return mwh >= 1000 ? fixed("%.2f GWh", mwh / 1000)
         : mwh >= 1  ? fixed("%.1f MWh", mwh)
                     : fixed("%.0f kWh", mwh * 1000);
}

std::string csv_cell(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string value_of(const PointResult& p, const std::string& field) {
  const auto it = p.settings.find(field);
  return it == p.settings.end() ? "" : it->second;
}

}  // namespace

SweepResults start_results(const ScenarioSpec& scenario, const std::vector<SweepPoint>& points) {
  SweepResults r;
  r.scenario = scenario.name;
  r.simulate = scenario.sweep.simulate;
  r.total = static_cast<int>(points.size());
  r.goal = scenario.goal;
  DocNode document = scenario.document;
  std::erase_if(document.entries, [](const DocEntry& e) { return e.key == "sweep"; });
  std::string identity = to_flow_yaml(document) + "\nsimulate " + (r.simulate ? "true" : "false") + "\n";
  for (const auto& point : points) {
    identity += describe(point) + "\n";
    for (const auto& s : point.settings)
      if (std::find(r.fields.begin(), r.fields.end(), s.path) == r.fields.end()) r.fields.push_back(s.path);
  }
  r.fingerprint = fnv1a_hex(identity);
  return r;
}

void add_point(SweepResults& results, PointResult point) {
  auto at = std::lower_bound(results.points.begin(), results.points.end(), point.index,
                             [](const PointResult& p, int index) { return p.index < index; });
  if (at != results.points.end() && at->index == point.index)
    *at = std::move(point);
  else
    results.points.insert(at, std::move(point));
}

nlohmann::json to_json(const SweepResults& r) {
  nlohmann::json points = nlohmann::json::array();
  for (const auto& p : r.points) points.push_back(to_json(p));
  nlohmann::json pareto = nlohmann::json::array();
  for (int i : pareto_front(r.points)) pareto.push_back(r.points[i].index);
  const GoalAnswer answer = answer_goal(r.goal, r.points);
  auto index_of = [&](const std::optional<int>& i) {
    return i ? nlohmann::json(r.points[*i].index) : nlohmann::json();
  };
  return {{"scenario", r.scenario},
          {"sweep",
           {{"fingerprint", r.fingerprint},
            {"fields", r.fields},
            {"points", r.total},
            {"finished", r.points.size()},
            {"simulate", r.simulate},
            {"complete", r.complete()}}},
          {"goal",
           {{"deadline_s", r.goal.deadline ? nlohmann::json(r.goal.deadline->value()) : nlohmann::json()},
            {"budget_usd", r.goal.budget ? nlohmann::json(r.goal.budget->value()) : nlohmann::json()},
            {"met", answer.met},
            {"chosen", index_of(answer.chosen)},
            {"closest", index_of(answer.closest)},
            {"message", answer.message}}},
          {"pareto", pareto},
          {"points", points}};
}

SweepResults results_from_json(const nlohmann::json& j) {
  try {
    SweepResults r;
    r.scenario = j.at("scenario").get<std::string>();
    const nlohmann::json& s = j.at("sweep");
    r.fingerprint = s.at("fingerprint").get<std::string>();
    r.fields = s.at("fields").get<std::vector<std::string>>();
    r.total = s.at("points").get<int>();
    r.simulate = s.at("simulate").get<bool>();
    if (const auto& g = j.at("goal"); !g.at("deadline_s").is_null())
      r.goal.deadline = Seconds(g.at("deadline_s").get<double>());
    if (const auto& g = j.at("goal"); !g.at("budget_usd").is_null())
      r.goal.budget = Dollars(g.at("budget_usd").get<double>());
    for (const auto& p : j.at("points")) add_point(r, point_from_json(p));
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("not a sweep results file: ") + e.what());
  }
}

std::string to_csv(const SweepResults& r) {
  const std::vector<int> front = pareto_front(r.points);
  std::string out = "index";
  for (const auto& f : r.fields) out += "," + csv_cell(f);
  out +=
      ",status,cluster,devices,gpus,plan_gpus,tp,pp,dp,cp,ep,micro_batch,schedule,virtual_stages,recompute,"
      "zero,"
      "evaluator,iteration_time_s,tokens_per_s,mfu,hfu,peak_memory_gib,memory_capacity_gib,tokens,"
      "time_to_train_s,time_to_train_days,gpu_hours,cost_usd,energy_mwh,goodput,pareto,message\n";
  auto number = [](double v) { return fixed("%.10g", v); };
  for (int i = 0; i < int(r.points.size()); ++i) {
    const PointResult& p = r.points[i];
    out += std::to_string(p.index);
    for (const auto& f : r.fields) out += "," + csv_cell(value_of(p, f));
    out += "," + enum_name(p.status, kPointStatusNames);
    if (p.ok()) {
      out += "," + csv_cell(p.cluster) + "," + csv_cell(p.devices) + "," + std::to_string(p.gpus) + "," +
             std::to_string(p.plan_gpus);
      for (const char* k : {"tp", "pp", "dp", "cp", "ep", "micro_batch"})
        out += "," + std::to_string(p.plan.at(k).get<int>());
      out += "," + p.plan.at("schedule").get<std::string>() + "," +
             std::to_string(p.plan.at("virtual_stages").get<int>()) + "," +
             p.plan.at("recompute").get<std::string>() + "," + std::to_string(p.plan.at("zero").get<int>()) +
             "," + p.evaluator;
      const Metrics& m = p.metrics;
      for (double v :
           {m.iteration_time_s, m.tokens_per_s, m.mfu, m.hfu, m.peak_memory_gib, m.memory_capacity_gib,
            p.tokens, p.time_to_train_s, p.time_to_train_s / 86400, p.gpu_hours})
        out += "," + number(v);
      out += "," + (p.cost_usd ? number(*p.cost_usd) : "") + "," + number(p.energy_mwh) + "," +
             (p.goodput ? number(*p.goodput) : "");
    } else {
      out += std::string(28, ',');
    }
    out += std::string(",") + (std::find(front.begin(), front.end(), i) != front.end() ? "1" : "0") + "," +
           csv_cell(p.message) + "\n";
  }
  return out;
}

std::string to_text(const SweepResults& r) {
  const std::vector<int> front = pareto_front(r.points);
  const GoalAnswer answer = answer_goal(r.goal, r.points);
  std::vector<std::string> header = {"#"};
  header.insert(header.end(), r.fields.begin(), r.fields.end());
  for (const char* h :
       {"GPUs", "plan", "iter s", "tokens/s", "MFU", "mem GiB", "time to train", "cost", "energy"})
    header.push_back(h);
  const size_t first_metric = 1 + r.fields.size();
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> notes;  // the message of each point that is not ok, after its row
  for (int i = 0; i < int(r.points.size()); ++i) {
    const PointResult& p = r.points[i];
    const bool on_front = std::find(front.begin(), front.end(), i) != front.end();
    const bool chosen = answer.chosen && *answer.chosen == i;
    std::vector<std::string> row = {std::to_string(p.index) + (chosen ? ">" : on_front ? "*" : " ")};
    for (const auto& f : r.fields) row.push_back(value_of(p, f));
    if (p.ok()) {
      const Metrics& m = p.metrics;
      row.insert(row.end(), {std::to_string(p.gpus), plan_text(p.plan), fixed("%.3f", m.iteration_time_s),
                             format_count(m.tokens_per_s), fixed("%.1f%%", 100 * m.mfu),
                             fixed("%.1f", m.peak_memory_gib), to_string(Seconds(p.time_to_train_s)),
                             p.cost_usd ? to_string(Dollars(*p.cost_usd)) : "-", energy_text(p.energy_mwh)});
      notes.push_back("");
    } else {
      row.push_back("");
      row.push_back(enum_name(p.status, kPointStatusNames));
      notes.push_back(p.message);
    }
    rows.push_back(std::move(row));
  }
  std::vector<size_t> width(header.size(), 0);
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  // Numbers align right; text (the fields, the plan) left.
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out = " ";
    for (size_t c = 0; c < cells.size(); ++c) {
      const bool left = (c > 0 && c < first_metric) || c == first_metric + 1;
      const std::string pad(width[c] - cells[c].size(), ' ');
      out += " " + (left ? cells[c] + pad : pad + cells[c]);
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = "sweep " + r.scenario + ": " + std::to_string(r.points.size()) + " of " +
                    std::to_string(r.total) + " points" + (r.simulate ? ", simulated" : ", analytic") + "\n";
  out += line(header);
  for (size_t i = 0; i < rows.size(); ++i) {
    out += line(rows[i]);
    if (!notes[i].empty()) out += "      " + notes[i] + "\n";
  }
  out += "  * on the Pareto front of time to train vs cost";
  out += answer.chosen ? "; > meets the goal\n" : "\n";
  out += "  Pareto front (fastest first):";
  for (int i : front) out += " #" + std::to_string(r.points[i].index);
  out += front.empty() ? " none (no point with a time and a cost)\n" : "\n";
  if (!answer.message.empty()) out += "  goal: " + answer.message + "\n";
  return out;
}

}  // namespace paratwin
