// Sweep results: JSON, CSV and the terminal table.
#include "plan/sweep/results.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "plan/spec/sweep_size.hpp"
#include "plan/util/number_text.hpp"

namespace paratwin {
namespace {

std::string fnv1a_hex(const std::string& text) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ULL;
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, h);
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
  return mwh >= 1000 ? format_number("%.2f GWh", mwh / 1000)
         : mwh >= 1  ? format_number("%.1f MWh", mwh)
                     : format_number("%.0f kWh", mwh * 1000);
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

// The points' fields in the order the points set them: each list entry's, then the grid's axes.
std::vector<std::string> sweep_fields(const SweepSpec& sweep) {
  std::vector<std::string> fields;
  auto add = [&](const std::string& path) {
    if (std::find(fields.begin(), fields.end(), path) == fields.end()) fields.push_back(path);
  };
  const std::vector<std::vector<SweepSetting>> entries =
      sweep.list.empty() ? std::vector<std::vector<SweepSetting>>{{}} : sweep.list;
  for (const auto& entry : entries) {
    for (const auto& s : entry) add(s.path);
    for (const auto& axis : sweep.grid) add(axis.path);
  }
  return fields;
}

std::vector<std::string> table_row(const SweepHeader& h, const PointResult& p, char mark) {
  std::vector<std::string> row = {std::to_string(p.index) + mark};
  for (const auto& f : h.fields) row.push_back(value_of(p, f));
  if (p.ok()) {
    const Metrics& m = p.metrics;
    row.insert(row.end(),
               {std::to_string(p.gpus), plan_text(p.plan), format_number("%.3f", m.iteration_time_s),
                format_count(m.tokens_per_s), format_number("%.1f%%", 100 * m.mfu),
                format_number("%.1f", m.peak_memory_gib), to_string(Seconds(p.time_to_train_s)),
                p.cost_usd ? to_string(Dollars(*p.cost_usd)) : "-", energy_text(p.energy_mwh)});
  } else {
    row.push_back("");
    row.push_back(enum_name(p.status, kPointStatusNames));
  }
  return row;
}

std::string csv_row(const SweepHeader& h, const PointResult& p, bool on_front) {
  auto number = [](double v) { return format_number("%.10g", v); };
  std::string out = std::to_string(p.index);
  for (const auto& f : h.fields) out += "," + csv_cell(value_of(p, f));
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
  return out + "," + (on_front ? "1" : "0") + "," + csv_cell(p.message) + "\n";
}

SweepSummary summarize(const SweepHeader& h, const PointSource& points) {
  SweepSummary summary(h.goal);
  points([&](const PointResult& p) { summary.add(p); });
  return summary;
}

nlohmann::json header_json(const SweepHeader& h, int finished) {
  return {{"fingerprint", h.fingerprint}, {"fields", h.fields},     {"points", h.total},
          {"finished", finished},         {"simulate", h.simulate}, {"complete", finished == h.total}};
}

nlohmann::json goal_json(const SweepHeader& h, const GoalAnswer& answer) {
  auto index = [](const std::optional<int>& i) { return i ? nlohmann::json(*i) : nlohmann::json(); };
  return {{"deadline_s", h.goal.deadline ? nlohmann::json(h.goal.deadline->value()) : nlohmann::json()},
          {"budget_usd", h.goal.budget ? nlohmann::json(h.goal.budget->value()) : nlohmann::json()},
          {"met", answer.met},
          {"chosen", index(answer.chosen)},
          {"closest", index(answer.closest)},
          {"message", answer.message}};
}

SweepHeader header_from_json(const nlohmann::json& scenario, const nlohmann::json& s,
                             const nlohmann::json& g) {
  SweepHeader h;
  h.scenario = scenario.get<std::string>();
  h.fingerprint = s.at("fingerprint").get<std::string>();
  h.fields = s.at("fields").get<std::vector<std::string>>();
  const nlohmann::json& points = s.at("points");
  const auto total = points.is_number_integer() ? points.get<std::int64_t>() : std::int64_t(-1);
  if (total < 0 || total > std::numeric_limits<int>::max())
    throw std::runtime_error("sweep.points is not a count of points: " + std::to_string(total));
  h.total = int(total);
  h.simulate = s.at("simulate").get<bool>();
  if (!g.at("deadline_s").is_null()) h.goal.deadline = Seconds(g.at("deadline_s").get<double>());
  if (!g.at("budget_usd").is_null()) h.goal.budget = Dollars(g.at("budget_usd").get<double>());
  return h;
}

}  // namespace

SweepHeader sweep_header(const ScenarioSpec& scenario) {
  SweepHeader h;
  h.scenario = scenario.name;
  h.simulate = scenario.sweep.simulate;
  h.total = static_cast<int>(sweep_point_count(scenario.sweep));
  h.goal = scenario.goal;
  h.fields = sweep_fields(scenario.sweep);
  // The scenario (after --set) and the points' settings, from the list and the axes that make them.
  DocNode document = scenario.document;
  std::erase_if(document.entries, [](const DocEntry& e) { return e.key == "sweep"; });
  std::string identity = to_flow_yaml(document) + "\nsimulate " + (h.simulate ? "true" : "false") + "\n";
  for (const auto& entry : scenario.sweep.list) {
    identity += "list";
    for (const auto& s : entry) identity += " " + s.path + "=" + to_flow_yaml(s.value);
    identity += "\n";
  }
  for (const auto& axis : scenario.sweep.grid) {
    identity += "grid " + axis.path + "=";
    for (const auto& v : axis.values) identity += to_flow_yaml(v) + ",";
    identity += "\n";
  }
  h.fingerprint = fnv1a_hex(identity);
  return h;
}

void write_json(std::ostream& out, const SweepHeader& h, const PointSource& points) {
  const SweepSummary summary = summarize(h, points);
  out << "{\"scenario\": " << nlohmann::json(h.scenario).dump()
      << ",\n\"sweep\": " << header_json(h, summary.points()).dump()
      << ",\n\"goal\": " << goal_json(h, summary.answer()).dump()
      << ",\n\"pareto\": " << nlohmann::json(summary.front()).dump() << ",\n\"points\": [";
  bool first = true;
  points([&](const PointResult& p) {
    out << (first ? "\n" : ",\n") << to_json(p).dump();
    first = false;
  });
  out << "\n]}\n";
}

void write_csv(std::ostream& out, const SweepHeader& h, const PointSource& points) {
  const SweepSummary summary = summarize(h, points);
  out << "index";
  for (const auto& f : h.fields) out << "," << csv_cell(f);
  out << ",status,cluster,devices,gpus,plan_gpus,tp,pp,dp,cp,ep,micro_batch,schedule,virtual_stages,"
         "recompute,"
         "zero,evaluator,iteration_time_s,tokens_per_s,mfu,hfu,peak_memory_gib,memory_capacity_gib,tokens,"
         "time_to_train_s,time_to_train_days,gpu_hours,cost_usd,energy_mwh,goodput,pareto,message\n";
  points([&](const PointResult& p) { out << csv_row(h, p, summary.on_front(p.index)); });
}

void write_text(std::ostream& out, const SweepHeader& h, const PointSource& points) {
  std::vector<std::string> header = {"#"};
  header.insert(header.end(), h.fields.begin(), h.fields.end());
  for (const char* c :
       {"GPUs", "plan", "iter s", "tokens/s", "MFU", "mem GiB", "time to train", "cost", "energy"})
    header.push_back(c);
  const size_t first_metric = 1 + h.fields.size();
  // First pass: the front, the goal and the columns' widths.
  SweepSummary summary(h.goal);
  std::vector<size_t> width(header.size(), 0);
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  points([&](const PointResult& p) {
    summary.add(p);
    const std::vector<std::string> row = table_row(h, p, ' ');
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  });
  const GoalAnswer answer = summary.answer();
  // Numbers align right; text (the fields, the plan) left.
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text = " ";
    for (size_t c = 0; c < cells.size(); ++c) {
      const bool left = (c > 0 && c < first_metric) || c == first_metric + 1;
      const std::string pad(width[c] - cells[c].size(), ' ');
      text += " " + (left ? cells[c] + pad : pad + cells[c]);
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    return text + "\n";
  };
  out << "sweep " << h.scenario << ": " << summary.points() << " of " << h.total << " points"
      << (h.simulate ? ", simulated" : ", analytic") << "\n";
  out << line(header);
  points([&](const PointResult& p) {
    const bool chosen = answer.chosen && *answer.chosen == p.index;
    out << line(table_row(h, p, chosen ? '>' : summary.on_front(p.index) ? '*' : ' '));
    if (!p.ok()) out << "      " << p.message << "\n";
  });
  out << "  * on the Pareto front of time to train vs cost"
      << (answer.chosen ? "; > meets the goal\n" : "\n");
  out << "  Pareto front (fastest first):";
  const std::vector<int> front = summary.front();
  for (int i : front) out << " #" << i;
  out << (front.empty() ? " none (no point with a time and a cost)\n" : "\n");
  if (!answer.message.empty()) out << "  goal: " << answer.message << "\n";
}

void read_results(std::istream& in, const std::function<void(const SweepHeader&)>& on_header,
                  const PointVisitor& on_point) {
  // nlohmann's parser callback sees every value as it completes: the header's parts are kept, each point
  // is handed on and dropped, so the document is never whole in memory.
  using Event = nlohmann::json::parse_event_t;
  nlohmann::json scenario, sweep, goal;
  std::string key;  // the top-level key being read
  bool header_given = false;
  int depth = 0;
  auto callback = [&](int, Event event, nlohmann::json& parsed) {
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        ++depth;
        return true;
      case Event::key:
        if (depth == 1) {
          key = parsed.get<std::string>();
          if (key == "points") {
            if (scenario.is_null() || sweep.is_null() || goal.is_null())
              throw std::runtime_error("'points' comes before 'scenario', 'sweep' and 'goal'");
            on_header(header_from_json(scenario, sweep, goal));
            header_given = true;
          }
        }
        return true;
      case Event::object_end:
      case Event::array_end:
        --depth;
        if (depth == 2 && key == "points" && event == Event::object_end) {
          on_point(point_from_json(parsed));
          return false;
        }
        [[fallthrough]];
      case Event::value:
        if (depth == 1) {
          if (key == "scenario") scenario = parsed;
          if (key == "sweep") sweep = parsed;
          if (key == "goal") goal = parsed;
        }
        return depth != 2 || key != "points";
    }
    return true;
  };
  try {
    [[maybe_unused]] const nlohmann::json rest = nlohmann::json::parse(in, callback);  // the header
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("not a sweep results file: ") + e.what());
  }
  if (!header_given) throw std::runtime_error("not a sweep results file: it has no 'points'");
}

PointSource SweepResults::source() const {
  return [this](const PointVisitor& visit) {
    for (const PointResult& p : points) visit(p);
  };
}

SweepResults start_results(const ScenarioSpec& scenario) {
  SweepResults r;
  static_cast<SweepHeader&>(r) = sweep_header(scenario);
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
  std::ostringstream out;
  write_json(out, r, r.source());
  return nlohmann::json::parse(out.str());
}

SweepResults results_from_json(const nlohmann::json& j) {
  try {
    SweepResults r;
    static_cast<SweepHeader&>(r) = header_from_json(j.at("scenario"), j.at("sweep"), j.at("goal"));
    for (const auto& p : j.at("points")) add_point(r, point_from_json(p));
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("not a sweep results file: ") + e.what());
  }
}

std::string to_csv(const SweepResults& r) {
  std::ostringstream out;
  write_csv(out, r, r.source());
  return out.str();
}

std::string to_text(const SweepResults& r) {
  std::ostringstream out;
  write_text(out, r, r.source());
  return out.str();
}

}  // namespace paratwin
