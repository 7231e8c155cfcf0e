// What a live run measured on every rank, gathered on rank 0, and the files made from it: the
// profile (measured duration of every task, keyed by its Program task name), the Chrome trace and
// the report with the twin's keys.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "exec/comm/communicator.hpp"
#include "exec/train/run_result.hpp"
#include "plan/analytic/evaluate.hpp"

namespace paratwin::exec {

struct RunTimings {
  int ranks = 0, steps = 0, tasks = 0;
  // Indexed [(rank x steps + step) x tasks + task]: start and end in seconds since that rank's run
  // started, and the other TaskSpan fields.
  std::vector<double> start_s, end_s, wait_s, cpu_s, gemm_s, attention_s, scores_s;
  std::vector<double> step_cpu_s;      // [rank x steps + step]
  std::vector<double> peak_rss_bytes;  // per rank
  std::vector<double> routed_tokens;   // [layer x experts]: tokens per expert, summed over the ranks

  double at(const std::vector<double>& v, int rank, int step, int task) const {
    return v[(size_t(rank) * steps + step) * tasks + task];
  }
};

// Collective over `comm`: every rank passes its result; rank 0 gets everyone's timings, the other
// ranks an empty RunTimings.
RunTimings gather_timings(Communicator& comm, const Role& role, const RunResult& result);

// The profile: {"format": "paratwin-profile", "version", "scenario", "backend", "model", "cluster",
// "pool", "device", "ranks", "nodes", "steps", "inputs" (what the Program was lowered from, less the cluster:
// see plan/calibrate/profile.hpp), "step_cpu_cv" (the step-to-step coefficient of variation of a rank's
// compute tasks' CPU time together), "step_cpu_correlation" (how much the ranks' step totals move
// together: their pairwise correlation, averaged), "rank_cpu_cv" (how much the ranks' mean step totals
// differ: their coefficient of variation), "tasks": [{"task": name, "index", "kind", "stream",
// "count", "mean_s", "min_s", "max_s", "median_s", ...}]}: every task of the role, over all ranks and all
// steps but the first (warm-up) when there are several. Compute tasks add "cpu_s", "gemm_s", "attention_s",
// "scores_s" and "cpu_cv" (the step-to-step coefficient of variation of their CPU time); collectives and
// offload copies "bytes" and "transfer_s" (see profile_json in measurements.cpp).
nlohmann::json profile_json(const ScenarioSpec& scenario, const Program& program, const RunTimings& timings);

// Chrome trace events as plan/report/trace.cpp lays them out, with one process per rank.
std::string live_chrome_trace(const Program& program, const RunTimings& timings);

// The Report's JSON with measured metrics (evaluator "live"), plus loss[], steps, predicted{...}
// (the analytic twin's metrics for the same plan) and reliability{...}.
nlohmann::json live_report_json(const ScenarioSpec& scenario, const Program& program, const RunResult& result,
                                const RunTimings& timings);

}  // namespace paratwin::exec
