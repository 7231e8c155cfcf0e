// Chrome trace writer.
#include "plan/report/trace.hpp"

#include <sstream>

#include "plan/spec/limits.hpp"

namespace paratwin {

void write_chrome_trace(std::ostream& out, const Program& program, const Evaluation& ev,
                        const std::function<void(const TraceEventSink&)>& extra) {
  bool first = true;
  const TraceEventSink write = [&](const nlohmann::json& event) {
    out << (first ? "\n" : ",\n") << event.dump();
    first = false;
  };
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  for (size_t r = 0; r < program.roles.size(); ++r) {
    const Role& role = program.roles[r];
    write({{"name", "process_name"},
           {"ph", "M"},
           {"pid", role.pipeline_rank},
           {"args",
            {{"name", "stage " + std::to_string(role.pipeline_rank) + " (" + role.pool + ", " +
                          std::to_string(role.instances) + " ranks)"}}}});
    for (const auto& [name, stream] : kStreamKindNames)
      write({{"name", "thread_name"},
             {"ph", "M"},
             {"pid", role.pipeline_rank},
             {"tid", static_cast<int>(stream)},
             {"args", {{"name", name}}}});
    for (size_t i = 0; i < role.tasks.size(); ++i) {
      const Task& t = role.tasks[i];
      const TaskTiming& tm = ev.roles[r].tasks[i];
      nlohmann::json args = {{"task", i}};
      if (t.microbatch >= 0) args["microbatch"] = t.microbatch;
      if (t.chunk >= 0) args["chunk"] = t.chunk;
      if (t.kind == TaskKind::Collective) args["bytes"] = t.bytes.value() * t.count;
      if (t.work.gemm_flops.value() > 0) args["flops"] = t.work.gemm_flops.value();
      write({{"name", t.name},
             {"cat", enum_name(t.kind, kTaskKindNames)},
             {"ph", "X"},
             {"pid", role.pipeline_rank},
             {"tid", static_cast<int>(t.stream)},
             {"ts", tm.start_s * 1e6},
             {"dur", (tm.end_s - tm.start_s) * 1e6},
             {"args", args}});
    }
  }
  if (extra) extra(write);
  out << "\n]}\n";
}

std::string chrome_trace(const Program& program, const Evaluation& ev) {
  std::ostringstream out;
  write_chrome_trace(out, program, ev);
  return out.str();
}

std::int64_t chrome_trace_events(const Program& program) {
  std::int64_t events = 0;
  for (const Role& role : program.roles)
    events += 1 + std::int64_t(kStreamKindNames.size()) + std::int64_t(role.tasks.size());
  return events;
}

std::string trace_size_problem(std::int64_t events, std::int64_t tasks) {
  if (events <= limit_value(kTraceEventsLimit)) return "";
  return "the trace would hold " + std::to_string(events) + " events (" + std::to_string(tasks) +
         " tasks of the Program); fewer micro-batches per step (raise plan.micro_batch, lower "
         "training.global_batch) or fewer pipeline stages make it smaller, or leave out --trace" +
         limit_note(kTraceEventsLimit);
}

}  // namespace paratwin
