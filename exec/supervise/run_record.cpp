// Measured goodput, the failure trace, and the twin's prediction from it.
#include "exec/supervise/run_record.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "plan/io/atomic_file.hpp"
#include "plan/util/child_process.hpp"

namespace paratwin::exec {

namespace fs = std::filesystem;

double RunRecord::mean_step_s() const {
  double sum = 0;
  for (double s : full_step_s) sum += s;
  return full_step_s.empty() ? 0 : sum / double(full_step_s.size());
}

double RunRecord::goodput() const {
  const double horizon = horizon_s();
  return horizon > 0 ? double(last_step - first_step) * mean_step_s() / horizon : 0;
}

FailureTrace failure_trace(const RunRecord& record, const std::string& scenario,
                           std::vector<std::string> sets, double checkpoint_interval_s, double down_s) {
  FailureTrace t;
  t.scenario = scenario;
  t.sets = std::move(sets);
  t.ranks = record.max_ranks;
  t.min_ranks = record.min_ranks;
  t.horizon_s = record.horizon_s();
  const double step_s = record.mean_step_s();
  t.checkpoint_interval_s = checkpoint_interval_s;
  t.checkpoint_cost_s = record.checkpoints > 0 ? record.snapshot_s / record.checkpoints : 0;
  t.checkpoint_write_s = record.checkpoints > 0 ? record.write_s / record.checkpoints : 0;
  t.down_s = down_s;
  int recovered = 0;
  for (const auto& r : record.recoveries) {
    t.failures.push_back({std::max(0.0, r.failed_s - record.start_s()), std::max(0, r.slot), r.kind});
    if (!r.recovered()) continue;
    t.detection_s += r.detected_s - r.failed_s;
    t.restart_s += r.resumed_s(step_s) - r.detected_s - r.waited_s;
    ++recovered;
  }
  if (recovered > 0) {
    t.detection_s /= recovered;
    t.restart_s /= recovered;
  }
  return t;
}

nlohmann::json reliability_json(const RunRecord& record, const std::optional<nlohmann::json>& predicted) {
  nlohmann::json recoveries = nlohmann::json::array();
  double recover_s = 0;
  int recovered = 0;
  const double step_s = record.mean_step_s();
  for (const auto& r : record.recoveries) {
    recoveries.push_back({{"kind", r.kind},
                          {"rank", r.rank},
                          {"slot", r.slot},
                          {"step", r.step},
                          {"at_s", r.failed_s - record.start_s()},
                          {"detection_s", r.detected_s - r.failed_s},
                          {"waited_for_capacity_s", r.waited_s},
                          {"time_to_recover_s", r.recovered() ? r.time_to_recover_s(step_s) : -1.0},
                          {"ranks_before", r.ranks_before},
                          {"ranks_after", r.ranks_after},
                          {"resumed_from_step", r.resumed_from},
                          {"lost_steps", r.lost_steps},
                          {"lost_work_s", double(r.lost_steps) * step_s}});
    if (r.recovered()) {
      recover_s += r.time_to_recover_s(step_s);
      ++recovered;
    }
  }
  nlohmann::json j = {
      {"failures", record.recoveries.size()},
      {"restarts", recovered},
      {"recoveries", recoveries},
      {"time_to_recover_s", recovered ? recover_s / recovered : 0.0},
      {"lost_steps", record.lost_steps},
      {"lost_work_s", record.lost_work_s()},
      {"shrinks", record.shrinks},
      {"grows", record.grows},
      {"horizon_s", record.horizon_s()},
      {"goodput", record.goodput()},
      {"checkpoints_written", record.checkpoints},
      {"checkpoint_overhead", record.checkpoint_overhead()},
      {"checkpoint_snapshot_s", record.checkpoints ? record.snapshot_s / record.checkpoints : 0.0},
      {"checkpoint_write_s", record.checkpoints ? record.write_s / record.checkpoints : 0.0}};
  if (predicted) j["predicted"] = *predicted;
  return j;
}

std::optional<nlohmann::json> predict_with_twin(const std::string& trace, const std::string& plan_file,
                                                std::string& error) {
  const FailureTrace t = load_failure_trace(trace);
  const fs::path out = fs::path(trace).replace_extension(".twin.json");
  std::vector<std::string> args = {sibling_executable("paratwin"),
                                   "simulate",
                                   t.scenario,
                                   "--failure-trace",
                                   trace,
                                   "--json",
                                   out.string()};
  if (!plan_file.empty()) args.insert(args.begin() + 3, {"--plan", plan_file});
  int status = -1;
  try {
    // Standard output is the table; errors still reach standard error.
    status = wait_for_process(spawn_process(args, {.output = ChildStream::Null}).pid);
  } catch (const std::runtime_error& e) {
    error = e.what();
    return std::nullopt;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    error = "paratwin simulate --failure-trace " + trace + " failed";
    return std::nullopt;
  }
  std::ifstream in(out);
  const nlohmann::json report = nlohmann::json::parse(in, nullptr, false);
  std::error_code ec;
  fs::remove(out, ec);
  if (report.is_discarded() || !report.contains("reliability")) {
    error = "the simulation's report has no reliability figures";
    return std::nullopt;
  }
  nlohmann::json r = report["reliability"];
  r["tokens_per_s"] = report["metrics"]["tokens_per_s"];
  return r;
}

}  // namespace paratwin::exec
