// The auto-parallel optimizer: searches degrees (dp, tp, pp, cp, ep), rank order, micro-batch,
// schedule and virtual stages, recompute, sequence parallelism, ZeRO, offload and compression, with
// a dynamic-programming layer partition for each candidate and, on heterogeneous clusters, which pool
// each pipeline rank runs on. Branch and bound: a valid lower bound on every candidate's objective
// orders exact evaluations, and the search stops once the bound exceeds the N-th best — so pruning
// never drops the true optimum of the modeled space.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "plan/ir/plan.hpp"
#include "plan/report/report.hpp"

namespace paratwin {

struct Candidate {
  Plan plan;
  Report report;
  double objective = 0;  // in the objective's unit: seconds, dollars, joules
};

struct SearchResult {
  std::vector<Candidate> top;            // best first
  std::map<std::string, long> rejected;  // reason -> candidates
  long enumerated = 0;                   // candidates in the space
  long evaluated = 0;                    // lowered and evaluated exactly
  long refined = 0;                      // given their partition and the bound that follows it
  long dominated = 0;                    // skipped: a simpler twin on the same partition fits
  double seconds = 0;                    // wall time of the search
  std::string explanation;               // why the best beats the runner-up
  // Under failures (objective_counts_failures): the fastest plan per iteration evaluated, when it is
  // faster than the best and lost for its expected goodput, and why.
  std::optional<Candidate> faster_lost_to_failures;
  std::string failures_explanation;
  bool stopped = false;  // stopped through SearchOptions::progress: top is the best so far
};

// Where a running search stands. It ends when the smallest bound still queued passes the cutoff (the
// N-th best objective found, plus the tie margin), so front_bound / cutoff says how far it has come.
struct SearchProgress {
  long enumerated = 0;
  long evaluated = 0;
  double front_bound = 0;
  double cutoff = 0;  // 0 until N plans are known
  double fraction() const { return cutoff > 0 ? std::min(1.0, front_bound / cutoff) : 0; }
};

struct SearchOptions {
  int top = 5;
  // Evaluate every candidate exactly, twins that cannot win included (tests compare it with the pruned
  // search).
  bool exhaustive = false;
  // Called from the searching thread after every exact evaluation; returning false stops the search.
  std::function<bool(const SearchProgress&)> progress = {};
};

// The objective of a candidate (smaller is better) and its unit, e.g. "s", "$", "J". Under failures
// time to train and cost are divided by the plan's expected goodput (the report's, else `goodput`).
double objective_value(const ScenarioSpec& scenario, const Plan& plan, const Report& report);
double objective_value(const ScenarioSpec& scenario, const Plan& plan, double iteration_time_s,
                       double goodput);
std::string objective_unit(Objective objective);

// Searches the plans the scenario allows (its fixed plan fields are honoured). Throws InputError
// saying what runs out when no plan fits.
SearchResult search_plans(const ScenarioSpec& scenario, const SearchOptions& options = {});

}  // namespace paratwin
