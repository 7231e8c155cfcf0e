// Pipeline schedules as ordered forward/backward steps per pipeline rank.
#include "plan/ir/schedule.hpp"

#include <algorithm>
#include <utility>

namespace paratwin {

std::vector<PipelineStep> pipeline_order(Schedule schedule, int pp, int v, int m, int rank) {
  std::vector<PipelineStep> out;
  if (schedule == Schedule::GPipe) {
    for (int mb = 0; mb < m; ++mb) out.push_back({true, mb, rank});
    for (int mb = 0; mb < m; ++mb) out.push_back({false, mb, rank});
    return out;
  }
  const int vv = schedule == Schedule::Interleaved ? v : 1;
  const int total = m * vv;
  auto step = [&](int k, bool forward) {
    const int group = pp * vv;
    const int j = (k / pp) % vv;
    const int microbatch = (k / group) * pp + k % pp;
    const int local = forward ? j : vv - 1 - j;
    // Without interleaving micro-step k is simply micro-batch k.
    return PipelineStep{forward, vv == 1 ? k : microbatch, local * pp + rank};
  };
  const int warmup = std::min(total, vv == 1 ? pp - rank - 1 : (pp - rank - 1) * 2 + (vv - 1) * pp);
  int forwards = 0, backwards = 0;
  for (; forwards < warmup; ++forwards) out.push_back(step(forwards, true));
  while (forwards < total) {
    out.push_back(step(forwards++, true));
    out.push_back(step(backwards++, false));
  }
  while (backwards < total) out.push_back(step(backwards++, false));
  return out;
}

std::vector<PipelineStep> combined_1f1b_order(std::vector<PipelineStep> order) {
  for (size_t k = 1; k + 1 < order.size(); k += 2) std::swap(order[k], order[k + 1]);
  return order;
}

std::vector<PipelineStep> pass_order(Schedule schedule, int pp, int v, int m, int rank, bool overlap_ep) {
  std::vector<PipelineStep> order = pipeline_order(schedule, pp, v, m, rank);
  return overlap_ep && pp == 1 ? combined_1f1b_order(std::move(order)) : order;
}

}  // namespace paratwin
