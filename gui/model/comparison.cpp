// Side-by-side comparison of two candidates.
#include "gui/model/comparison.hpp"

#include <cmath>
#include <tuple>

#include "gui/model/axis.hpp"
#include "gui/model/candidate_table.hpp"

namespace paratwin::gui {

std::vector<ComparisonRow> compare(const Candidate& a, const Candidate& b) {
  std::vector<ComparisonRow> rows;
  // Results: smaller is better (sign -1) or larger is better (+1).
  auto result = [&](const QString& label, double va, double vb, int larger_better, QString sa, QString sb) {
    const double scale = std::max(std::abs(va), std::abs(vb));
    const bool same = scale == 0 || std::abs(va - vb) <= 1e-9 * scale;
    const int better = same ? 0 : ((va > vb) == (larger_better > 0) ? -1 : 1);
    rows.push_back({label, sa, sb, better, !same});
  };
  const Metrics &ma = a.report.metrics, &mb = b.report.metrics;
  auto seconds = [](double s) { return format_time(s, s / 1000); };
  auto pct = [](double f) { return QString::number(100 * f, 'f', 1) + "%"; };
  result("iteration time", ma.iteration_time_s, mb.iteration_time_s, -1, seconds(ma.iteration_time_s),
         seconds(mb.iteration_time_s));
  result("tokens/s", ma.tokens_per_s, mb.tokens_per_s, 1, format_si(ma.tokens_per_s, 4),
         format_si(mb.tokens_per_s, 4));
  result("MFU", ma.mfu, mb.mfu, 1, pct(ma.mfu), pct(mb.mfu));
  result("HFU", ma.hfu, mb.hfu, 1, pct(ma.hfu), pct(mb.hfu));
  result("peak memory (GiB)", ma.peak_memory_gib, mb.peak_memory_gib, -1,
         QString::number(ma.peak_memory_gib, 'f', 1), QString::number(mb.peak_memory_gib, 'f', 1));
  const TimeBreakdown &ba = a.report.breakdown, &bb = b.report.breakdown;
  for (auto [label, va, vb] :
       {std::tuple{"bubble", ba.bubble_s, bb.bubble_s},
        {"exposed communication", ba.exposed_comm_s, bb.exposed_comm_s},
        {"recompute", ba.recompute_s, bb.recompute_s},
        {"optimizer", ba.optimizer_s, bb.optimizer_s},
        {"GEMMs", ba.kernels.gemm_s, bb.kernels.gemm_s},
        {"attention kernels", ba.kernels.attention_s, bb.kernels.attention_s},
        {"memory-bound kernels", ba.kernels.memory_bound_s, bb.kernels.memory_bound_s}})
    result(label, va, vb, -1, seconds(va), seconds(vb));
  // Under the scenario's failures: the expected goodput the objective is divided by.
  if (a.report.goodput && b.report.goodput)
    result("goodput under failures", a.report.goodput->goodput, b.report.goodput->goodput, 1,
           pct(a.report.goodput->goodput), pct(b.report.goodput->goodput));
  result("objective", a.objective, b.objective, -1, QString::number(a.objective, 'g', 5),
         QString::number(b.objective, 'g', 5));
  // Plan fields: shown as the table shows them; no direction.
  CandidateTable table;
  table.set_candidates({a, b}, {});
  for (int column = CandidateTable::Tp; column <= CandidateTable::Compression; ++column) {
    const QString ta = table.data(table.index(0, column)).toString();
    const QString tb = table.data(table.index(1, column)).toString();
    rows.push_back({table.headerData(column, Qt::Horizontal).toString(), ta, tb, 0, ta != tb});
  }
  return rows;
}

}  // namespace paratwin::gui
