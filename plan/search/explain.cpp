// Messages of the search: why the best plan beats the runner-up, and what runs out when nothing fits.
#include "plan/search/explain.hpp"

#include <cmath>
#include <cstdio>
#include <tuple>
#include <vector>

#include "plan/search/objective.hpp"

namespace paratwin {

std::string nothing_fits(const Report* closest) {
  std::string msg = "no plan fits in memory";
  if (closest) {
    const StageMemory& w = closest->stages[closest->worst_stage];
    auto g = [](Bytes x) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.1f", x.value() / (1024.0 * 1024 * 1024));
      return std::string(buf);
    };
    msg += ": the closest plan (tp " + std::to_string(closest->plan.tp) + ", pp " +
           std::to_string(closest->plan.pp) + ", dp " + std::to_string(closest->plan.dp) + ", ZeRO " +
           std::to_string(closest->plan.zero) + ") needs " + g(w.peak) + " GiB on stage " +
           std::to_string(w.stage) + " of " + g(w.capacity) + " GiB (weights " + g(w.weights) +
           ", gradients " + g(w.gradients) + ", optimizer " + g(w.optimizer) + ", activations " +
           g(w.activations) + ")";
  } else {
    msg += ": the model states alone exceed device memory in every layout";
  }
  msg += "; add GPUs or nodes, use devices with more memory, or allow more pipeline stages";
  return msg;
}

std::string explain(const Candidate& a, const Candidate& b, Objective objective) {
  std::vector<std::string> why;
  const Plan &p = a.plan, &q = b.plan;
  auto diff = [&](const char* name, auto x, auto y) {
    if (x != y) why.push_back(std::string(name) + "=" + x + " instead of " + y);
  };
  auto s = [](int x) { return std::to_string(x); };
  diff("tp", s(p.tp), s(q.tp));
  diff("pp", s(p.pp), s(q.pp));
  diff("dp", s(p.dp), s(q.dp));
  diff("cp", s(p.cp), s(q.cp));
  diff("ep", s(p.ep), s(q.ep));
  diff("expert_tp", s(experts_tp(p)), s(experts_tp(q)));
  diff("micro_batch", s(p.micro_batch), s(q.micro_batch));
  diff("schedule",
       enum_name(p.schedule, kScheduleNames) + (p.virtual_stages > 1 ? " v=" + s(p.virtual_stages) : ""),
       enum_name(q.schedule, kScheduleNames) + (q.virtual_stages > 1 ? " v=" + s(q.virtual_stages) : ""));
  diff("recompute", enum_name(p.stages[0].recompute, kRecomputeNames),
       enum_name(q.stages[0].recompute, kRecomputeNames));
  diff("zero", s(p.zero), s(q.zero));
  diff("reshard", enum_name(p.reshard, kReshardNames), enum_name(q.reshard, kReshardNames));
  diff("dp_replicate", s(p.dp_replicate), s(q.dp_replicate));
  diff("sequence_parallel", std::string(p.sequence_parallel ? "true" : "false"),
       std::string(q.sequence_parallel ? "true" : "false"));
  diff("compression", enum_name(p.compression.kind, kCompressionNames),
       enum_name(q.compression.kind, kCompressionNames));
  diff("offload", std::string(p.offload_optimizer ? "optimizer" : "none"),
       std::string(q.offload_optimizer ? "optimizer" : "none"));
  diff("order", p.order, q.order);
  char buf[512];
  const auto& ma = a.report.metrics;
  const auto& mb = b.report.metrics;
  const auto pct = [](double part, double whole) { return 100 * part / whole; };
  std::snprintf(buf, sizeof buf,
                "%.2f s vs %.2f s per iteration (%.1f%% %s); bubble %.1f%% vs %.1f%%, exposed communication "
                "%.1f%% vs %.1f%%, recompute %.1f%% vs %.1f%%; memory %.1f vs %.1f GiB of %.0f",
                ma.iteration_time_s, mb.iteration_time_s,
                std::abs(pct(mb.iteration_time_s - ma.iteration_time_s, mb.iteration_time_s)),
                ma.iteration_time_s <= mb.iteration_time_s ? "faster" : "slower",
                pct(a.report.breakdown.bubble_s, ma.iteration_time_s),
                pct(b.report.breakdown.bubble_s, mb.iteration_time_s),
                pct(a.report.breakdown.exposed_comm_s, ma.iteration_time_s),
                pct(b.report.breakdown.exposed_comm_s, mb.iteration_time_s),
                pct(a.report.breakdown.recompute_s, ma.iteration_time_s),
                pct(b.report.breakdown.recompute_s, mb.iteration_time_s), ma.peak_memory_gib,
                mb.peak_memory_gib, ma.memory_capacity_gib);
  std::string out = (why.empty() ? std::string("same degrees; ") : join(why, ", ") + ": ") + buf;
  if (b.objective <= a.objective * (1 + kTieMargin))
    out = "a tie within the model's precision (0.1%), settled for the simpler plan; " + out;
  if (objective != Objective::IterationTime)
    out += "; objective " + enum_name(objective, kObjectiveNames) + " " + format_count(a.objective) + " vs " +
           format_count(b.objective) + " " + objective_unit(objective);
  return out;
}

std::string explain_failures(const Candidate& best, const Candidate& faster, Objective objective) {
  const Plan &p = best.plan, &q = faster.plan;
  const ExpectedGoodput& a = *best.report.goodput;
  const ExpectedGoodput& b = *faster.report.goodput;
  const double ta = best.report.metrics.iteration_time_s, tb = faster.report.metrics.iteration_time_s;
  auto seconds = [](double s) { return to_string(Seconds(s)); };
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "tp %d pp %d dp %d cp %d is %.1f%% faster per iteration (%.3f s vs %.3f s) but expects "
                "goodput %.1f%% vs %.1f%%",
                q.tp, q.pp, q.dp, q.cp, 100 * (ta - tb) / ta, tb, ta, 100 * b.goodput, 100 * a.goodput);
  std::string out = buf;
  // What differs between the two (the faster plan's figure first); the same figures are left out.
  std::vector<std::string> why;
  const auto differs = [](double x, double y) {
    return std::abs(x - y) > 1e-3 * std::max(std::abs(x), std::abs(y));
  };
  if (differs(b.checkpoint_cost_s, a.checkpoint_cost_s) ||
      differs(b.checkpoint_interval_s, a.checkpoint_interval_s))
    why.push_back("checkpoint " + seconds(b.checkpoint_cost_s) + " every " +
                  seconds(b.checkpoint_interval_s) + " vs " + seconds(a.checkpoint_cost_s) + " every " +
                  seconds(a.checkpoint_interval_s));
  const int wide_q = q.tp * q.pp * q.cp, wide_p = p.tp * p.pp * p.cp;
  if (wide_q != wide_p)
    why.push_back("a shrink loses " + std::to_string(wide_q) + " vs " + std::to_string(wide_p) + " GPUs");
  if (differs(b.job_mtbf_s, a.job_mtbf_s))
    why.push_back("a failure every " + seconds(b.job_mtbf_s) + " vs " + seconds(a.job_mtbf_s));
  for (auto [label, x, y] : {std::tuple{"lost work", b.lost_work_share, a.lost_work_share},
                             {"downtime", b.downtime_share, a.downtime_share},
                             {"shrunk", b.shrunk_share, a.shrunk_share},
                             {"checkpoints", b.checkpoint_share, a.checkpoint_share}})
    if (std::abs(x - y) >= 5e-4) {
      std::snprintf(buf, sizeof buf, "%s %.1f%% vs %.1f%% of the time", label, 100 * x, 100 * y);
      why.push_back(buf);
    }
  if (!why.empty()) out += ": " + join(why, ", ");
  return out + "; " + enum_name(objective, kObjectiveNames) + " " + format_count(faster.objective) + " vs " +
         format_count(best.objective) + " " + objective_unit(objective);
}

}  // namespace paratwin
