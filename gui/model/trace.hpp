// What the timeline draws: lanes of spans (one per rank or stage and stream), counters (link usage)
// and instant markers (failures, restarts, checkpoints), read from any Chrome trace ParaTwin wrote
// (`plan --trace`, `simulate --trace`, `run --trace`) or taken straight from an analytic evaluation.
#pragma once

#include <QByteArray>
#include <QString>
#include <optional>
#include <vector>

#include "plan/analytic/evaluate.hpp"
#include "plan/ir/program.hpp"

namespace paratwin::gui {

// What a span is, for its colour: the task kinds of the Program, communication split by group, and
// the idle gaps (pipeline bubbles, waits) of compute lanes.
enum class SpanKind { Forward, Backward, Recompute, TpComm, PpComm, DpComm, Optimizer, Copy, Idle, Other };
constexpr int kSpanKinds = 10;

QString span_kind_label(SpanKind kind);  // "forward", "TP/CP/EP comm", "idle / bubble", ...

struct Span {
  double start_s = 0;
  double end_s = 0;
  SpanKind kind = SpanKind::Other;
  QString name;     // the Program task's name ("F mb3 c0"), or "idle"
  QString details;  // one line of its arguments for hover text ("microbatch 3 · 12.6 MB")
  int step = -1;    // the training step of a live run's task (1-based); -1 when the trace has none
};

// One track: a rank (or pipeline stage) and one of its streams.
struct Lane {
  int pid = 0, tid = 0;
  QString process;                     // "stage 0 (dgx, 32 ranks)", "rank 1 (stage 0, live cpu)"
  QString thread;                      // the stream: compute, tp, pp, dp, copy
  std::vector<Span> spans;             // sorted by start; idle gaps included on compute lanes
  std::vector<double> max_end_prefix;  // max end of spans[0..i], for finding the first visible span
};

struct CounterSeries {
  QString name;                                   // "node0-gpu0-nvlink_UP"
  std::vector<std::pair<double, double>> points;  // (time s, value)
};

struct Marker {
  double at_s = 0;
  QString name;               // "failure gpu 12 (node 1)"
  QString category;           // failure, restart, checkpoint
  double useful_tokens = -1;  // as of the marker, when the trace says
};

struct Trace {
  QString source;           // file name or "analytic evaluation of ..."
  std::vector<Lane> lanes;  // by pid, then tid; lanes without spans are left out
  std::vector<CounterSeries> counters;
  std::vector<Marker> markers;
  double begin_s = 0, end_s = 0;  // of the spans
  size_t task_count = 0;          // spans that are tasks (idle gaps not counted)
  int steps = 0;                  // training steps of a live run's trace; 0 for one iteration

  bool empty() const { return lanes.empty(); }
};

// Parses Chrome trace event JSON ({"traceEvents": [...]} or a bare array). Throws InputError naming
// `source` when the text is not such a trace.
Trace parse_chrome_trace(const QByteArray& json, const QString& source);
// Reads and parses a trace file: Chrome JSON, plain or gzip-compressed (`--trace FILE.json.gz`), or
// Perfetto's protobuf trace (`plan --trace FILE.pftrace`); a missing file throws
// InputError naming it.
Trace load_chrome_trace(const QString& path);

// The schedule of an analytic evaluation, as `plan --trace` writes it (one lane per stage and
// stream), without going through JSON: large Programs (300,000 tasks) appear in a fraction of the time.
Trace trace_of(const Program& program, const Evaluation& evaluation, const QString& source);

// When a live run's step began (its earliest task) and ended; nullopt for a step the trace lacks.
std::optional<std::pair<double, double>> step_span(const Trace& trace, int step);

}  // namespace paratwin::gui
