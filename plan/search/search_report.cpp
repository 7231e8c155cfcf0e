// Text and JSON of search results.
#include "plan/search/search_report.hpp"

#include <cstdio>

namespace paratwin {

static std::string degrees(const Plan& p) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "tp %d pp %d dp %d%s%s mb %d %s%s %s ZeRO %d%s%s%s%s", p.tp, p.pp, p.dp,
                p.cp > 1 ? (" cp " + std::to_string(p.cp)).c_str() : "",
                p.ep > 1 ? (" ep " + std::to_string(p.ep)).c_str() : "", p.micro_batch,
                enum_name(p.schedule, kScheduleNames).c_str(),
                p.virtual_stages > 1 ? (" v" + std::to_string(p.virtual_stages)).c_str() : "",
                recompute_name(p).c_str(), p.zero,
                p.dp_replicate > 1 ? (" hsdp " + std::to_string(p.dp_replicate)).c_str() : "",
                p.sequence_parallel ? " sp" : "", p.offload_optimizer ? " offload" : "",
                p.compression.kind == CompressionKind::TopK ? " topk" : "");
  if (p.order != Plan().order) return std::string(buf) + " " + p.order;
  return buf;
}

std::string to_text(const SearchResult& r, const ScenarioSpec& s) {
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "search: %ld candidates, %ld evaluated exactly, %ld twins skipped, %.2f s; objective %s\n",
                r.enumerated, r.evaluated, r.dominated, r.seconds,
                enum_name(s.search.objective, kObjectiveNames).c_str());
  out += buf;
  std::snprintf(buf, sizeof buf, "  %-3s %-58s %9s %7s %6s %9s\n", "#", "plan", "iter s", "MFU", "mem GiB",
                ("objective " + objective_unit(s.search.objective)).c_str());
  out += buf;
  for (size_t i = 0; i < r.top.size(); ++i) {
    const Candidate& c = r.top[i];
    std::snprintf(buf, sizeof buf, "  %-3zu %-58s %9.3f %6.1f%% %7.1f %9.4g\n", i + 1,
                  degrees(c.plan).c_str(), c.report.metrics.iteration_time_s, 100 * c.report.metrics.mfu,
                  c.report.metrics.peak_memory_gib, c.objective);
    out += buf;
  }
  if (!r.explanation.empty()) out += "  why #1: " + r.explanation + "\n";
  if (!r.top.empty() && r.top.front().report.goodput) {
    std::string goodputs;
    for (size_t i = 0; i < r.top.size(); ++i) {
      std::snprintf(buf, sizeof buf, "%s#%zu %.1f%%", i ? ", " : "", i + 1,
                    100 * r.top[i].report.goodput->goodput);
      goodputs += buf;
    }
    out += "  expected goodput under failures (objective divided by it): " + goodputs + "\n";
  }
  if (!r.failures_explanation.empty())
    out += "  a faster plan lost to failures: " + r.failures_explanation + "\n";
  if (!r.rejected.empty()) {
    out += "  rejected:";
    for (const auto& [reason, n] : r.rejected) out += " " + std::to_string(n) + " " + reason + ";";
    out.back() = '\n';
  }
  out += "\n";
  return out;
}

void add_search(nlohmann::json& report, const SearchResult& r, const ScenarioSpec& s) {
  nlohmann::json candidates = nlohmann::json::array();
  for (const auto& c : r.top) {
    nlohmann::json j = to_json(c.report);
    candidates.push_back({{"plan", j["plan"]}, {"metrics", j["metrics"]}, {"objective", c.objective}});
    if (c.report.goodput) candidates.back()["expected_goodput"] = j["expected_goodput"];
  }
  report["candidates"] = candidates;
  report["rejected"] = r.rejected;
  report["search"] = {{"objective", enum_name(s.search.objective, kObjectiveNames)},
                      {"objective_unit", objective_unit(s.search.objective)},
                      {"enumerated", r.enumerated},
                      {"evaluated", r.evaluated},
                      {"twins_skipped", r.dominated},
                      {"seconds", r.seconds},
                      {"explanation", r.explanation}};
  if (r.faster_lost_to_failures) {
    const Candidate& f = *r.faster_lost_to_failures;
    nlohmann::json j = to_json(f.report);
    report["search"]["faster_lost_to_failures"] = {{"plan", j["plan"]},
                                                   {"metrics", j["metrics"]},
                                                   {"objective", f.objective},
                                                   {"expected_goodput", j["expected_goodput"]},
                                                   {"explanation", r.failures_explanation}};
  }
}

}  // namespace paratwin
