// Per-rank memory and DP traffic of a live run against the twin (see memory_report.hpp).
#include "exec/run/memory_report.hpp"

#include <cstdio>

#include "plan/analytic/evaluate.hpp"

namespace paratwin::exec {

namespace {

constexpr MemoryUse kReported[] = {MemoryUse::Parameters,  MemoryUse::Gradients,     MemoryUse::Optimizer,
                                   MemoryUse::Activations, MemoryUse::Communication, MemoryUse::Other};

}  // namespace

nlohmann::json measured_memory_json(Communicator& comm, const ScenarioSpec& scenario, const Program& program,
                                    const RunResult& result) {
  std::vector<double> mine{double(result.memory.device_peak), double(result.memory.host_peak)};
  for (MemoryUse use : kReported) mine.push_back(double(result.memory.at_peak[size_t(use)]));
  const std::vector<double> all = comm.gather(mine, 0);
  if (comm.rank() != 0) return nullptr;
  nlohmann::json ranks = nlohmann::json::array();
  for (int r = 0; r < comm.size(); ++r) {
    const double* v = all.data() + size_t(r) * mine.size();
    nlohmann::json j{{"rank", r}, {"peak_bytes", v[0]}, {"host_peak_bytes", v[1]}};
    for (size_t u = 0; u < std::size(kReported); ++u) j[memory_use_name(kReported[u])] = v[2 + u];
    ranks.push_back(j);
  }
  const Evaluation twin = evaluate(program, scenario.cluster, scenario.training);
  const Role& role = program.roles.front();
  const RoleEvaluation& e = twin.roles.front();
  double predicted_dp = 0;
  for (const Task& t : role.tasks)
    if (t.kind == TaskKind::Collective &&
        (t.group == GroupKind::Dp || t.group == GroupKind::ExpertDp || t.group == GroupKind::DpReplicate))
      predicted_dp += t.bytes.value() * t.count;
  return {{"memory_measured",
           {{"ranks", ranks},
            {"predicted",
             {{"peak_bytes", e.peak_memory.value()},
              {"weights", role.state.weights.value()},
              {"gradients", role.state.gradients.value()},
              {"optimizer", role.state.optimizer.value()},
              {"activations", e.activations_peak.value()},
              {"buffers", role.buffers.value()},
              {"host", role.host_state.value()}}},
            {"notes",
             "measured: the rank's exec::Buffer bytes (weights, gradients, optimizer state, activations kept "
             "for backward, communication buffers, kernel scratch) at the rank's peak over the steps; "
             "predicted: the twin's per-rank model for the same Program (the scenario's precision)"}}},
          {"dp_traffic",
           {{"measured_bytes_per_step", result.dp_bytes},
            {"predicted_bytes_per_step", predicted_dp},
            {"notes",
             "bytes of each DP collective's message as the Program counts them (top-k: every "
             "rank's (value, index) pairs), summed per step"}}}};
}

std::string measured_memory_text(const nlohmann::json& report) {
  const auto& m = report.at("memory_measured");
  const nlohmann::json* worst = nullptr;
  for (const auto& r : m.at("ranks"))
    if (!worst || r.at("peak_bytes").get<double>() > worst->at("peak_bytes").get<double>()) worst = &r;
  const double MiB = 1024.0 * 1024;
  const auto& p = m.at("predicted");
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "memory per rank: measured peak %.2f MiB (weights %.2f, gradients %.2f, optimizer %.2f, "
                "activations %.2f, other %.2f); twin %.2f MiB (weights %.2f, gradients %.2f, optimizer %.2f, "
                "activations %.2f, buffers %.2f)\n",
                worst->at("peak_bytes").get<double>() / MiB, worst->at("parameters").get<double>() / MiB,
                worst->at("gradients").get<double>() / MiB, worst->at("optimizer").get<double>() / MiB,
                worst->at("activations").get<double>() / MiB,
                (worst->at("other").get<double>() + worst->at("communication").get<double>()) / MiB,
                p.at("peak_bytes").get<double>() / MiB, p.at("weights").get<double>() / MiB,
                p.at("gradients").get<double>() / MiB, p.at("optimizer").get<double>() / MiB,
                p.at("activations").get<double>() / MiB, p.at("buffers").get<double>() / MiB);
  std::string out = buf;
  const auto& d = report.at("dp_traffic");
  const auto& steps = d.at("measured_bytes_per_step");
  if (!steps.empty() && d.at("predicted_bytes_per_step").get<double>() > 0) {
    std::snprintf(buf, sizeof buf, "DP bytes per step: measured %.0f (last step), twin %.0f\n",
                  steps.back().get<double>(), d.at("predicted_bytes_per_step").get<double>());
    out += buf;
  }
  return out;
}

}  // namespace paratwin::exec
