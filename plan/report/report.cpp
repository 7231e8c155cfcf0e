// Report assembly and rendering.
#include "plan/report/report.hpp"

#include <cstdio>

#include "plan/report/goodput_report.hpp"

namespace paratwin {

Report make_report(const std::string& scenario, const Program& program, const Evaluation& ev) {
  Report r;
  r.scenario = scenario;
  r.evaluator = "analytic";
  r.plan = program.plan;
  Metrics& m = r.metrics;
  m.iteration_time_s = ev.iteration_time_s;
  m.tokens_per_s = program.tokens_per_iteration / ev.iteration_time_s;
  m.model_tflops_per_gpu =
      program.model_flops_per_iteration.value() / ev.iteration_time_s / program.world / 1e12;
  m.mfu = program.model_flops_per_iteration.value() / (ev.iteration_time_s * ev.peak.value());
  m.hfu = ev.hardware_flops.value() / (ev.iteration_time_s * ev.peak.value());
  m.compute_pace = ev.compute_pace;
  r.breakdown = ev.roles[ev.critical_role].breakdown;
  double worst = -1;
  for (size_t i = 0; i < program.roles.size(); ++i) {
    const Role& role = program.roles[i];
    const RoleEvaluation& re = ev.roles[i];
    StageMemory s{role.pipeline_rank,   role.pool,           role.state.weights, role.state.gradients,
                  role.state.optimizer, re.activations_peak, role.buffers,       role.host_state,
                  re.peak_memory,       re.capacity};
    const double ratio = s.peak / s.capacity;
    if (ratio > worst) {
      worst = ratio;
      r.worst_stage = static_cast<int>(i);
    }
    m.fits = m.fits && s.fits();
    r.stages.push_back(s);
  }
  m.peak_memory_gib = gib(r.stages[r.worst_stage].peak);
  m.memory_capacity_gib = gib(r.stages[r.worst_stage].capacity);
  r.routing = routing_report(program);
  return r;
}

nlohmann::json plan_json(const Plan& p) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : p.stages)
    stages.push_back({{"layers", {s.layer_begin, s.layer_end}},
                      {"pool", s.pool},
                      {"recompute", enum_name(s.recompute, kRecomputeNames)},
                      {"recompute_every", s.recompute_every},
                      {"recompute_layers", s.recompute_layers}});
  return {{"dp", p.dp},
          {"tp", p.tp},
          {"pp", p.pp},
          {"cp", p.cp},
          {"ep", p.ep},
          {"expert_tp", experts_tp(p)},
          {"order", p.order},
          {"micro_batch", p.micro_batch},
          {"num_microbatches", p.num_microbatches},
          {"schedule", enum_name(p.schedule, kScheduleNames)},
          {"virtual_stages", p.virtual_stages},
          {"recompute", p.stages.empty() ? "none" : enum_name(p.stages.front().recompute, kRecomputeNames)},
          {"recompute_every", p.stages.empty() ? 1 : p.stages.front().recompute_every},
          {"recompute_layers", p.stages.empty() ? 0 : p.stages.front().recompute_layers},
          {"recompute_modules",
           (p.stages.empty() ? RecomputeModules{} : p.stages.front().recompute_modules).list()},
          {"sequence_parallel", p.sequence_parallel},
          {"zero", p.zero},
          {"reshard", enum_name(p.reshard, kReshardNames)},
          {"dp_replicate", p.dp_replicate},
          {"offload", {{"optimizer", p.offload_optimizer}, {"activations", p.offload_activations}}},
          {"compression",
           {{"kind", enum_name(p.compression.kind, kCompressionNames)},
            {"ratio", p.compression.ratio},
            {"error_feedback", p.compression.error_feedback},
            {"warmup_steps", p.compression.warmup_steps}}},
          {"bucket_size_bytes", p.bucket_size.value()},
          {"stages", stages}};
}

nlohmann::json metrics_json(const Metrics& m) {
  return {{"iteration_time_s", m.iteration_time_s},
          {"tokens_per_s", m.tokens_per_s},
          {"model_tflops_per_gpu", m.model_tflops_per_gpu},
          {"mfu", m.mfu},
          {"hfu", m.hfu},
          {"peak_memory_gib", m.peak_memory_gib},
          {"memory_capacity_gib", m.memory_capacity_gib},
          {"fits", m.fits},
          {"compute_pace", m.compute_pace}};
}

nlohmann::json to_json(const Report& r) {
  const TimeBreakdown& b = r.breakdown;
  const StageMemory& w = r.stages[r.worst_stage];
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : r.stages)
    stages.push_back({{"stage", s.stage},
                      {"pool", s.pool},
                      {"peak_gib", gib(s.peak)},
                      {"capacity_gib", gib(s.capacity)},
                      {"fits", s.fits()}});
  nlohmann::json out = {{"scenario", r.scenario},
                        {"evaluator", r.evaluator},
                        {"plan", plan_json(r.plan)},
                        {"metrics", metrics_json(r.metrics)},
                        {"breakdown",
                         {{"compute_s", b.compute_s},
                          {"recompute_s", b.recompute_s},
                          {"bubble_s", b.bubble_s},
                          {"tp_comm_s", b.tp_comm_s},
                          {"pp_comm_s", b.pp_comm_s},
                          {"dp_comm_s", b.dp_comm_s},
                          {"exposed_comm_s", b.exposed_comm_s},
                          {"optimizer_s", b.optimizer_s},
                          {"offload_s", b.offload_s},
                          {"kernels",
                           {{"gemm_s", b.kernels.gemm_s},
                            {"attention_s", b.kernels.attention_s},
                            {"memory_bound_s", b.kernels.memory_bound_s},
                            {"launch_s", b.kernels.launch_s}}}}},
                        {"memory",
                         {{"stage", w.stage},
                          {"weights_gib", gib(w.weights)},
                          {"gradients_gib", gib(w.gradients)},
                          {"optimizer_gib", gib(w.optimizer)},
                          {"activations_gib", gib(w.activations)},
                          {"buffers_gib", gib(w.buffers)},
                          {"host_gib", gib(w.host)}}},
                        {"stages", stages}};
  if (r.routing) out["routing"] = to_json(*r.routing);
  if (r.goodput) out["expected_goodput"] = to_json(*r.goodput);
  return out;
}

std::string to_text(const Report& r) {
  std::string out;
  char buf[256];
  auto row = [&](const char* label, const std::string& value) {
    std::snprintf(buf, sizeof buf, "  %-24s %s\n", label, value.c_str());
    out += buf;
  };
  auto seconds = [](double s) { return to_string(Seconds(s)); };
  auto pct = [&](double part) {
    std::snprintf(buf, sizeof buf, "%5.1f%%", 100 * part / r.metrics.iteration_time_s);
    return std::string(buf);
  };
  const Plan& p = r.plan;
  out += "plan (" + r.evaluator + ") for " + r.scenario + "\n";
  std::snprintf(
      buf, sizeof buf,
      "  dp %d x tp %d x pp %d x cp %d x ep %d; micro-batch %d x %d; %s%s; recompute %s; ZeRO %d%s%s%s%s\n",
      p.dp, p.tp, p.pp, p.cp, p.ep, p.micro_batch, p.num_microbatches,
      enum_name(p.schedule, kScheduleNames).c_str(),
      p.virtual_stages > 1 ? (" v=" + std::to_string(p.virtual_stages)).c_str() : "",
      recompute_name(p).c_str(), p.zero,
      p.zero == 3 && p.reshard != Reshard::AfterForward
          ? (" reshard " + enum_name(p.reshard, kReshardNames)).c_str()
          : "",
      p.dp_replicate > 1 ? (" HSDP (" + std::to_string(p.dp_replicate) + " replicas of " +
                            std::to_string(p.dp / p.dp_replicate) + ")")
                               .c_str()
                         : "",
      p.sequence_parallel ? "; sequence parallel" : "",
      p.compression.kind == CompressionKind::TopK ? "; top-k compression" : "");
  out += buf;
  const Metrics& m = r.metrics;
  row("iteration time", seconds(m.iteration_time_s));
  row("tokens/s", format_count(m.tokens_per_s));
  std::snprintf(buf, sizeof buf, "%.1f", m.model_tflops_per_gpu);
  row("model TFLOP/s per GPU", buf);
  std::snprintf(buf, sizeof buf, "%.1f%% (HFU %.1f%%)", 100 * m.mfu, 100 * m.hfu);
  row("MFU", buf);
  std::snprintf(buf, sizeof buf, "%.1f of %.1f GiB on stage %d%s", m.peak_memory_gib, m.memory_capacity_gib,
                r.stages[r.worst_stage].stage, m.fits ? "" : "  DOES NOT FIT");
  row("peak memory", buf);
  if (m.compute_pace > 1) {
    std::snprintf(buf, sizeof buf, "x%.3f: the expected slowest of %d GPUs", m.compute_pace, p.gpus());
    row("compute pace", buf);
  }
  out += "  time of the critical stage:\n";
  const TimeBreakdown& b = r.breakdown;
  for (auto [label, v] : {std::pair{"compute", b.compute_s},
                          {"recompute", b.recompute_s},
                          {"optimizer", b.optimizer_s},
                          {"exposed communication", b.exposed_comm_s},
                          {"bubble", b.bubble_s}})
    row((std::string("  ") + label).c_str(), seconds(v) + "  " + pct(v));
  if (const double kernels = b.kernels.total(); kernels > 0) {
    std::snprintf(buf, sizeof buf, "GEMM %.0f%%, attention %.0f%%, memory-bound %.0f%%, launches %.0f%%",
                  100 * b.kernels.gemm_s / kernels, 100 * b.kernels.attention_s / kernels,
                  100 * b.kernels.memory_bound_s / kernels, 100 * b.kernels.launch_s / kernels);
    row("  (re)compute by kernel", buf);
  }
  out += "  communication (busy, partly hidden):\n";
  for (auto [label, v] : {std::pair{"TP/CP/EP", b.tp_comm_s},
                          {"PP", b.pp_comm_s},
                          {"DP", b.dp_comm_s},
                          {"offload copies", b.offload_s}})
    if (v > 0) row((std::string("  ") + label).c_str(), seconds(v));
  out +=
      "  memory per stage (GiB): weights + gradients + optimizer + activations + buffers = peak / capacity\n";
  for (const auto& s : r.stages) {
    std::snprintf(buf, sizeof buf,
                  "    stage %-3d %-8s %6.1f + %6.1f + %6.1f + %6.1f + %5.1f = %6.1f / %.0f%s\n", s.stage,
                  s.pool.c_str(), gib(s.weights), gib(s.gradients), gib(s.optimizer), gib(s.activations),
                  gib(s.buffers), gib(s.peak), gib(s.capacity), s.fits() ? "" : "  over capacity");
    out += buf;
  }
  if (r.routing) out += to_text(*r.routing, m.iteration_time_s);
  if (r.goodput) out += to_text(*r.goodput);
  return out;
}

}  // namespace paratwin
