// The validation set of issue 19 (bench/fidelity/manifest.yaml): published training runs, the scenario
// that rebuilds each, its published figure as an iteration time, the twin's prediction of that time by
// the analytic evaluator (the path of `paratwin plan`), and the error statistics. bench_fidelity prints
// them; tests/test_fidelity guards them.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "plan/report/report.hpp"
#include "plan/spec/catalog.hpp"
#include "plan/spec/scenario.hpp"

namespace paratwin::fidelity {

// What a source published, and how it becomes an iteration time (the manifest's header has the formulas).
enum class FigureKind { StepTime, TokensPerSecond, TokensPerSecondPerGpu, ModelTflopsPerGpu };
extern const EnumNames<FigureKind> kFigureKindNames;  // step_time_s, tokens_per_s, ...

struct Figure {
  FigureKind kind = FigureKind::StepTime;
  double value = 0;
};

struct Source {
  std::string name;  // the manifest's key: llm-foundry, torchtitan, ...
  std::string title, where, choices;
  std::string memory;  // what its published peak memory measures (an allocator's reserve, a device's
                       // use); empty when it publishes none
};

struct Run {
  std::string id;        // as in published-runs.md: MF-H01
  std::string source;    // a key of Manifest::sources
  std::string scenario;  // path of the sweep file holding the run (sweep.list entry `name: id`); empty
                         // for runs that are not expressible
  Figure published;
  // The peak memory per GPU the source published beside the figure (what it measures: Source::memory).
  std::optional<Bytes> published_peak;
  std::string not_expressible;  // why; empty for a run that is evaluated
  // Evaluated and reported apart, out of the set's statistics and issue 19's guard: a published run
  // that no mechanism was developed against (the rest of a table whose other rows are in the set).
  bool held_out = false;
  std::string notes;
  Location where;  // of the run in the manifest

  bool checked() const { return not_expressible.empty() && !held_out; }
  bool evaluated() const { return not_expressible.empty(); }  // checked or held out
};

// A configuration its source reports as out of memory: the twin should find that its plan does not fit.
struct MemoryAnchor {
  std::string id, source;
  std::string scenario;  // the sweep file with a sweep.list entry `name: id`
  std::string notes;
  Location where;
};

// The error guard of test_fidelity.
struct Guard {
  double mean_abs_error = 0;
  double max_abs_error = 0;
  // The same two over the held-out runs (a regression guard of its own).
  double held_out_mean_abs_error = 0;
  double held_out_max_abs_error = 0;
  // The most a predicted peak memory may be of a published one (an allocator's reserve or a device's
  // use holds every allocation the twin counts, so above 1 the twin counts memory the run never held).
  double max_peak_over_published = 0;
};

struct Manifest {
  std::string file;
  Guard guard;
  std::vector<Source> sources;
  std::vector<Run> runs;  // in file order
  std::vector<MemoryAnchor> out_of_memory;
};

// Reads a manifest. Throws InputError listing every problem with its line and column: unknown keys,
// a run without a figure or with two, a status other than `checked`, `held out` or `not expressible:
// why`, a checked or held-out run without a scenario, an unknown source, a repeated id (runs and
// out_of_memory anchors together), a published peak memory from a source that does not say what it measures.
Manifest load_manifest(const std::string& path);

// One checked run, evaluated.
struct Outcome {
  std::string id, source;
  std::string model;      // the model's name
  std::string device;     // the device the plan runs on
  std::string plan;       // "tp 8, pp 8 (v 2), cp 1, dp 8, ep 1, mb 4, 1f1b, full, SP, zero 3"
  std::string settings;   // the run's sweep.list entry as --set arguments
  std::string replay;     // the command that evaluates it: paratwin plan bench/fidelity/FILE --point ID
  std::string precision;  // training.precision
  std::string attention;  // training.attention: the kernel
  int gpus = 0;
  int seq_len = 0;
  double parameters = 0;  // the model's, all experts counted
  bool zero3 = false, h100 = false, moe = false;
  double measured_s = 0;                // the published figure as an iteration time
  double predicted_s = 0;               // the analytic evaluator's iteration time
  std::optional<Bytes> published_peak;  // the run's, when its source published one
  Report report;                        // the whole prediction (breakdown, memory)

  // predicted / measured - 1: negative when the twin is too fast.
  double error() const { return predicted_s / measured_s - 1; }
  // The published peak in GiB (the twin reports GiB), and the twin's (its fullest stage's) over it; 0
  // without a published peak.
  double published_peak_gib() const { return published_peak ? gib(*published_peak) : 0; }
  double peak_ratio() const {
    return published_peak ? report.metrics.peak_memory_gib / published_peak_gib() : 0;
  }
  // Attention's share of the critical stage's (re)compute time in the prediction.
  double attention_share() const {
    const double all = report.breakdown.kernels.total();
    return all > 0 ? report.breakdown.kernels.attention_s / all : 0;
  }
};

// An out-of-memory anchor, evaluated: the twin's peak on its fullest stage against the device.
struct AnchorOutcome {
  std::string id, source, plan, replay;
  double peak_gib = 0, capacity_gib = 0;
  bool fits = false;  // the twin's verdict; the source's is: out of memory
};

// The published figure of `run` as an iteration time for the scenario that rebuilds it.
double measured_iteration_time(const Figure& published, const ScenarioSpec& scenario);

// The scenario of a checked run: its sweep file with the run's list entry applied. Throws InputError
// when the file has no entry named after the run, or the entry makes an invalid scenario.
ScenarioSpec load_run_scenario(const Run& run, const Catalog& catalog);

// Evaluates a checked run as `paratwin plan` does: the fixed plan, verified, lowered, evaluated.
// Throws InputError when the plan cannot run.
Outcome evaluate_run(const Run& run, const Catalog& catalog);

// Every checked run, in manifest order; `progress` (optional) hears each id before it is evaluated.
std::vector<Outcome> evaluate_checked(const Manifest& manifest, const Catalog& catalog,
                                      const std::function<void(const std::string&)>& progress = {});

// Every held-out run, in manifest order.
std::vector<Outcome> evaluate_held_out(const Manifest& manifest, const Catalog& catalog);

// Every out-of-memory anchor, in manifest order.
std::vector<AnchorOutcome> evaluate_anchors(const Manifest& manifest, const Catalog& catalog);

struct Stats {
  int runs = 0;
  double mean_abs = 0;  // mean of |error|
  double p90_abs = 0;   // 90th percentile of |error| (nearest rank)
  double max_abs = 0;
  double mean_signed = 0;  // mean error: its sign says which way the twin leans
};

// Statistics over the outcomes that `keep` selects (all when empty).
Stats stats(const std::vector<Outcome>& outcomes, const std::function<bool(const Outcome&)>& keep = {});

// The twin's peak memory over the published one, over the selected outcomes that have one.
struct PeakStats {
  int runs = 0;
  double mean = 0, min = 0, max = 0;  // of peak_ratio()
};
PeakStats peak_stats(const std::vector<Outcome>& outcomes,
                     const std::function<bool(const Outcome&)>& keep = {});

}  // namespace paratwin::fidelity
