// Traces: read from Chrome trace JSON (metadata names the lanes, "X" events become spans, "C"
// counters, "i" markers), or taken straight from a Program and its evaluation.
#include "gui/model/trace.hpp"

#include <QFile>
#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "plan/io/gzip_stream.hpp"
#include "plan/io/protobuf_wire.hpp"
#include "plan/report/perfetto_trace.hpp"
#include "plan/spec/diagnostics.hpp"
#include "plan/spec/units.hpp"

namespace paratwin::gui {
namespace {

using nlohmann::json;
using LaneMap = std::map<std::pair<int, int>, Lane>;  // by (pid, tid)

QString qs(const std::string& s) {
  return QString::fromStdString(s);
}

bool stream_is(const QString& thread, StreamKind stream) {
  return thread == qs(enum_name(stream, kStreamKindNames));
}

// The task kind and the stream (the lane's thread) decide the colour; communication on the compute
// stream (not overlapped) is told apart by its group in the task's name.
SpanKind classify(TaskKind kind, const QString& thread, const QString& name) {
  switch (kind) {
    case TaskKind::Forward:
      return SpanKind::Forward;
    case TaskKind::Backward:
      return SpanKind::Backward;
    case TaskKind::Recompute:
      return SpanKind::Recompute;
    case TaskKind::Optimizer:
      return SpanKind::Optimizer;
    case TaskKind::Copy:
      return SpanKind::Copy;
    case TaskKind::Send:
    case TaskKind::Recv:
      return SpanKind::PpComm;
    case TaskKind::Collective:
      break;
  }
  if (stream_is(thread, StreamKind::Tp) || stream_is(thread, StreamKind::Ep)) return SpanKind::TpComm;
  if (stream_is(thread, StreamKind::Pp)) return SpanKind::PpComm;
  if (stream_is(thread, StreamKind::Dp) || stream_is(thread, StreamKind::DpReplicate))
    return SpanKind::DpComm;
  const QStringList words = name.split(' ');
  for (const char* group : {"tp", "cp", "ep"})
    if (words.contains(group)) return SpanKind::TpComm;
  if (words.contains("pp")) return SpanKind::PpComm;
  return SpanKind::DpComm;  // dp buckets, ZeRO gathers, tied embeddings
}

// A task's arguments as one line of hover text; negative values are absent.
QString details(long long step, long long microbatch, long long chunk, double bytes, double flops,
                double blocked_s) {
  QStringList parts;
  if (step >= 0) parts << QString("step %1").arg(step);
  if (microbatch >= 0) parts << QString("micro-batch %1").arg(microbatch);
  if (chunk >= 0) parts << QString("chunk %1").arg(chunk);
  if (bytes >= 0) parts << qs(format_quantity(bytes, Dimension::DataSize));
  if (flops > 0) parts << qs(format_quantity(flops, Dimension::FlopCount));
  if (blocked_s > 0) parts << "compute waited " + qs(format_quantity(blocked_s, Dimension::Duration));
  return parts.join(" · ");
}

QString stage_label(const Role& role) {
  return QString("stage %1 (%2, %3 ranks)").arg(role.pipeline_rank).arg(qs(role.pool)).arg(role.instances);
}

void add_span(Trace& trace, Lane& lane, Span span) {
  trace.begin_s = trace.task_count ? std::min(trace.begin_s, span.start_s) : span.start_s;
  trace.end_s = trace.task_count ? std::max(trace.end_s, span.end_s) : span.end_s;
  trace.steps = std::max(trace.steps, span.step);
  ++trace.task_count;
  lane.spans.push_back(std::move(span));
}

// Gaps between the spans of a compute lane, within [begin, end]: pipeline bubbles and waits.
void add_idle_gaps(Lane& lane, double begin, double end) {
  std::vector<Span> idle;
  double cursor = begin;
  for (const Span& s : lane.spans) {
    if (s.start_s > cursor + 1e-12) idle.push_back({cursor, s.start_s, SpanKind::Idle, "idle", {}, -1});
    cursor = std::max(cursor, s.end_s);
  }
  if (end > cursor + 1e-12) idle.push_back({cursor, end, SpanKind::Idle, "idle", {}, -1});
  lane.spans.insert(lane.spans.end(), idle.begin(), idle.end());
}

// Sorts each lane, adds the idle gaps of compute lanes and moves the lanes into the trace.
void finish(Trace& trace, LaneMap& lanes) {
  auto by_start = [](const Span& a, const Span& b) { return a.start_s < b.start_s; };
  for (auto& [key, lane] : lanes) {
    if (lane.spans.empty()) continue;
    std::stable_sort(lane.spans.begin(), lane.spans.end(), by_start);
    if (stream_is(lane.thread, StreamKind::Compute)) {
      add_idle_gaps(lane, trace.begin_s, trace.end_s);
      std::stable_sort(lane.spans.begin(), lane.spans.end(), by_start);
    }
    double running = -1e300;
    lane.max_end_prefix.reserve(lane.spans.size());
    for (const Span& s : lane.spans) lane.max_end_prefix.push_back(running = std::max(running, s.end_s));
    trace.lanes.push_back(std::move(lane));
  }
  for (CounterSeries& c : trace.counters)
    std::stable_sort(c.points.begin(), c.points.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
  std::stable_sort(trace.markers.begin(), trace.markers.end(),
                   [](const Marker& a, const Marker& b) { return a.at_s < b.at_s; });
}

[[noreturn]] void not_a_trace(const QString& source, const std::string& why) {
  throw InputError(Location{source.toStdString()}, "not a Chrome trace: " + why);
}

long long integer(const json& args, const char* key) {
  auto it = args.find(key);
  return it != args.end() && it->is_number_integer() ? it->get<long long>() : -1;
}

double number(const json& args, const char* key) {
  auto it = args.find(key);
  return it != args.end() && it->is_number() ? it->get<double>() : -1;
}

Trace read_events(const QByteArray& text, const QString& source) {
  const json doc = json::parse(text.begin(), text.end(), nullptr, false);
  if (doc.is_discarded()) not_a_trace(source, "the text is not JSON");
  const json* events = &doc;
  if (doc.is_object()) {
    auto it = doc.find("traceEvents");
    if (it == doc.end()) not_a_trace(source, "expected a \"traceEvents\" list");
    events = &*it;
  }
  if (!events->is_array()) not_a_trace(source, "expected a list of events");

  Trace trace;
  trace.source = source;
  // Names first (metadata may come anywhere), then the events that use them.
  std::map<int, QString> processes;
  std::map<std::pair<int, int>, QString> threads;
  for (const json& e : *events) {
    if (!e.is_object() || e.value("ph", "") != "M") continue;
    const json args = e.value("args", json::object());
    const QString label = qs(args.is_object() ? args.value("name", "") : "");
    const std::string name = e.value("name", "");
    if (name == "process_name") processes[e.value("pid", 0)] = label;
    if (name == "thread_name") threads[{e.value("pid", 0), e.value("tid", 0)}] = label;
  }
  LaneMap lanes;
  std::map<std::string, size_t> counter_index;
  for (const json& e : *events) {
    if (!e.is_object()) continue;
    const std::string ph = e.value("ph", "");
    const int pid = e.value("pid", 0), tid = e.value("tid", 0);
    const double ts_s = e.value("ts", 0.0) * 1e-6;
    const std::string name = e.value("name", "");
    const json args = e.value("args", json::object());
    if (ph == "X") {
      Lane& lane = lanes[{pid, tid}];
      if (lane.thread.isEmpty()) {
        lane.pid = pid, lane.tid = tid;
        lane.process = processes.count(pid) ? processes[pid] : QString("process %1").arg(pid);
        lane.thread = threads.count({pid, tid}) ? threads[{pid, tid}] : QString("thread %1").arg(tid);
      }
      const std::string category = e.value("cat", "");
      auto known = std::find_if(kTaskKindNames.begin(), kTaskKindNames.end(),
                                [&](const auto& n) { return n.first == category; });
      const QString task = qs(name);
      const long long step = integer(args, "step");
      add_span(
          trace, lane,
          {ts_s, ts_s + std::max(0.0, e.value("dur", 0.0) * 1e-6),
           known == kTaskKindNames.end() ? SpanKind::Other : classify(known->second, lane.thread, task), task,
           details(step, integer(args, "microbatch"), integer(args, "chunk"), number(args, "bytes"),
                   number(args, "flops"), number(args, "compute_blocked_s")),
           int(step)});
    } else if (ph == "C" && args.is_object()) {
      auto [it, added] = counter_index.try_emplace(name, trace.counters.size());
      if (added) trace.counters.push_back({qs(name), {}});
      for (const auto& [key, value] : args.items())
        if (value.is_number()) trace.counters[it->second].points.push_back({ts_s, value.get<double>()});
    } else if (ph == "i" || ph == "I") {
      trace.markers.push_back({ts_s, qs(name), qs(e.value("cat", "")), number(args, "useful_tokens")});
    }
  }
  finish(trace, lanes);
  return trace;
}

// What a Perfetto track is to the timeline: the lane of its thread (a collective's child track draws
// in its stream's lane, as in the Chrome trace), or a process's name.
struct PerfettoTrack {
  std::uint64_t parent = 0;
  int pid = -1, tid = -1;
  QString name;
};

PerfettoTrack read_track(std::string_view bytes) {
  namespace pf = perfetto_field;
  using protowire::Field;
  using protowire::Reader;
  PerfettoTrack track;
  Reader reader(bytes);
  for (Field f; reader.next(f);) {
    if (f.number == pf::kParentUuid) track.parent = f.number_value;
    if (f.number == pf::kTrackName) track.name = qs(std::string(f.bytes));
    if (f.number != pf::kProcess && f.number != pf::kThread) continue;
    Reader who(f.bytes);
    for (Field g; who.next(g);) {
      if (g.number == pf::kPid) track.pid = int(g.number_value);
      if (f.number == pf::kThread && g.number == pf::kTid) track.tid = int(g.number_value);
      if ((f.number == pf::kProcess && g.number == pf::kProcessName) ||
          (f.number == pf::kThread && g.number == pf::kThreadName))
        track.name = qs(std::string(g.bytes));
    }
  }
  return track;
}

// `plan --trace FILE.pftrace`: track descriptors, then begin/end track events (category = task kind).
Trace read_perfetto(const QByteArray& bytes, const QString& source) {
  namespace pf = perfetto_field;
  using protowire::Field;
  using protowire::Reader;
  Trace trace;
  trace.source = source;
  std::map<std::uint64_t, PerfettoTrack> tracks;
  std::map<int, QString> processes;
  std::map<std::uint64_t, Span> open;  // by track
  LaneMap lanes;
  const auto lane_of = [&](std::uint64_t uuid) -> Lane& {
    const PerfettoTrack* t = &tracks.at(uuid);
    while (t->tid < 0) t = &tracks.at(t->parent);  // a child track: its thread's lane
    Lane& lane = lanes[{t->pid, t->tid}];
    lane.pid = t->pid, lane.tid = t->tid, lane.thread = t->name;
    lane.process = processes[t->pid];
    return lane;
  };
  Reader file(std::string_view(bytes.constData(), size_t(bytes.size())));
  for (Field packet; file.next(packet);) {
    if (packet.number != pf::kTracePacket) throw std::runtime_error("a field that is not a TracePacket");
    std::uint64_t ts = 0;
    Reader fields(packet.bytes);
    for (Field f; fields.next(f);) {
      if (f.number == pf::kTimestamp) ts = f.number_value;
      if (f.number == pf::kTrackDescriptor) {
        std::uint64_t uuid = 0;
        Reader track(f.bytes);
        for (Field g; track.next(g);)
          if (g.number == pf::kUuid) uuid = g.number_value;
        PerfettoTrack t = read_track(f.bytes);
        if (t.tid < 0 && t.pid >= 0) processes[t.pid] = t.name;
        tracks[uuid] = t;
      }
      if (f.number != pf::kTrackEvent) continue;
      std::uint64_t type = 0, uuid = 0;
      Span span{double(ts) * 1e-9, double(ts) * 1e-9, SpanKind::Other, {}, {}, -1};
      std::string category;
      Reader event(f.bytes);
      for (Field g; event.next(g);) {
        if (g.number == pf::kType) type = g.number_value;
        if (g.number == pf::kTrackUuid) uuid = g.number_value;
        if (g.number == pf::kName) span.name = qs(std::string(g.bytes));
        if (g.number == pf::kCategories) category = std::string(g.bytes);
      }
      if (!tracks.count(uuid)) throw std::runtime_error("an event on a track never described");
      if (type == pf::kSliceBegin) {
        auto known = std::find_if(kTaskKindNames.begin(), kTaskKindNames.end(),
                                  [&](const auto& n) { return n.first == category; });
        if (known != kTaskKindNames.end())
          span.kind = classify(known->second, lane_of(uuid).thread, span.name);
        open[uuid] = span;
      } else if (type == pf::kSliceEnd && open.count(uuid)) {
        Span done = open[uuid];
        done.end_s = std::max(done.start_s, span.start_s);
        open.erase(uuid);
        add_span(trace, lane_of(uuid), std::move(done));
      }
    }
  }
  finish(trace, lanes);
  return trace;
}

}  // namespace

QString span_kind_label(SpanKind kind) {
  switch (kind) {
    case SpanKind::Forward:
      return "forward";
    case SpanKind::Backward:
      return "backward";
    case SpanKind::Recompute:
      return "recompute";
    case SpanKind::TpComm:
      return "TP/CP/EP comm";
    case SpanKind::PpComm:
      return "PP send/recv";
    case SpanKind::DpComm:
      return "DP comm";
    case SpanKind::Optimizer:
      return "optimizer";
    case SpanKind::Copy:
      return "host copy";
    case SpanKind::Idle:
      return "idle / bubble";
    case SpanKind::Other:
      break;
  }
  return "other";
}

Trace parse_chrome_trace(const QByteArray& text, const QString& source) {
  try {
    return read_events(text, source);
  } catch (const nlohmann::json::exception& e) {
    not_a_trace(source, std::string("an event has a field of the wrong type (") + e.what() + ")");
  }
}

Trace load_chrome_trace(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly))
    throw InputError(Location{path.toStdString()},
                     "cannot read the trace: " + file.errorString().toStdString());
  QByteArray bytes = file.readAll();
  if (looks_gzipped({bytes.constData(), size_t(bytes.size())})) {  // `--trace FILE.json.gz`
    try {
      const std::string text = gunzip({bytes.constData(), size_t(bytes.size())});
      bytes = QByteArray(text.data(), qsizetype(text.size()));
    } catch (const std::runtime_error& e) {
      throw InputError(Location{path.toStdString()}, std::string("cannot read the trace: ") + e.what());
    }
  }
  if (path.endsWith(".pftrace")) {  // `plan --trace FILE.pftrace`
    try {
      return read_perfetto(bytes, path);
    } catch (const std::exception& e) {
      throw InputError(Location{path.toStdString()}, std::string("not a Perfetto trace: ") + e.what());
    }
  }
  return parse_chrome_trace(bytes, path);
}

Trace trace_of(const Program& program, const Evaluation& evaluation, const QString& source) {
  Trace trace;
  trace.source = source;
  LaneMap lanes;
  for (size_t r = 0; r < program.roles.size(); ++r) {
    const Role& role = program.roles[r];
    for (size_t i = 0; i < role.tasks.size(); ++i) {
      const Task& t = role.tasks[i];
      const TaskTiming& tm = evaluation.roles[r].tasks[i];
      Lane& lane = lanes[{role.pipeline_rank, int(t.stream)}];
      if (lane.thread.isEmpty()) {
        lane.pid = role.pipeline_rank, lane.tid = int(t.stream);
        lane.process = stage_label(role);
        lane.thread = qs(enum_name(t.stream, kStreamKindNames));
      }
      const QString name = qs(t.name);
      add_span(
          trace, lane,
          {tm.start_s, tm.end_s, classify(t.kind, lane.thread, name), name,
           details(-1, t.microbatch, t.chunk, t.kind == TaskKind::Collective ? t.bytes.value() * t.count : -1,
                   t.work.gemm_flops.value(), -1),
           -1});
    }
  }
  finish(trace, lanes);
  return trace;
}

std::optional<std::pair<double, double>> step_span(const Trace& trace, int step) {
  std::optional<std::pair<double, double>> out;
  for (const Lane& lane : trace.lanes)
    for (const Span& s : lane.spans)
      if (s.step == step)
        out = out ? std::pair{std::min(out->first, s.start_s), std::max(out->second, s.end_s)}
                  : std::pair{s.start_s, s.end_s};
  return out;
}

}  // namespace paratwin::gui
