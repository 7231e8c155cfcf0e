// Chrome trace writer.
#include "plan/report/trace.hpp"

#include <nlohmann/json.hpp>

namespace paratwin {

std::string chrome_trace(const Program& program, const Evaluation& ev) {
  nlohmann::json events = nlohmann::json::array();
  for (size_t r = 0; r < program.roles.size(); ++r) {
    const Role& role = program.roles[r];
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", role.pipeline_rank},
                      {"args",
                       {{"name", "stage " + std::to_string(role.pipeline_rank) + " (" + role.pool + ", " +
                                     std::to_string(role.instances) + " ranks)"}}}});
    for (const auto& [name, stream] : kStreamKindNames)
      events.push_back({{"name", "thread_name"},
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
      events.push_back({{"name", t.name},
                        {"cat", enum_name(t.kind, kTaskKindNames)},
                        {"ph", "X"},
                        {"pid", role.pipeline_rank},
                        {"tid", static_cast<int>(t.stream)},
                        {"ts", tm.start_s * 1e6},
                        {"dur", (tm.end_s - tm.start_s) * 1e6},
                        {"args", args}});
    }
  }
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() + "\n";
}

}  // namespace paratwin
