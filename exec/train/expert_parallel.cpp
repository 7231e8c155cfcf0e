// Expert parallelism's gradient reduction, owned parameters and gathers (see expert_parallel.hpp).
#include "exec/train/expert_parallel.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "exec/optim/schedule.hpp"
#include "exec/train/trainer.hpp"

namespace paratwin::exec {

namespace {

// The parts of [begin, end) inside `ranges` (sorted, disjoint), and those outside.
ParameterRanges intersect(const ParameterRanges& ranges, size_t begin, size_t end) {
  ParameterRanges out;
  for (const auto& [b, e] : ranges)
    if (std::max(b, begin) < std::min(e, end)) out.push_back({std::max(b, begin), std::min(e, end)});
  return out;
}
ParameterRanges complement(const ParameterRanges& ranges, size_t begin, size_t end) {
  ParameterRanges out;
  size_t at = begin;
  for (const auto& [b, e] : intersect(ranges, begin, end)) {
    if (at < b) out.push_back({at, b});
    at = e;
  }
  if (at < end) out.push_back({at, end});
  return out;
}

}  // namespace

void attribute_expert_exchanges(const Role& role, const std::map<int, ExchangeTime>& times,
                                std::vector<TaskSpan>& spans) {
  std::map<int, std::vector<int>> owned;  // compute task -> its EP tasks
  int owner = -1;
  for (size_t i = 0; i < role.tasks.size(); ++i) {
    const Task& t = role.tasks[i];
    if (t.kind == TaskKind::Forward || t.kind == TaskKind::Backward || t.kind == TaskKind::Recompute)
      owner = int(i);
    else if (t.kind == TaskKind::Collective && t.group == GroupKind::Ep && owner >= 0)
      owned[owner].push_back(int(i));
  }
  for (const auto& [compute, ep_tasks] : owned) {
    const auto it = times.find(compute);
    if (it == times.end()) continue;
    TaskSpan& c = spans[size_t(compute)];
    const double share = it->second.wall_s / double(ep_tasks.size());
    c.cpu_s = std::max(0.0, c.cpu_s - it->second.cpu_s);  // MPI spins while it waits: not the task's work
    double at = c.end_s - it->second.wall_s;
    for (int t : ep_tasks) {
      spans[size_t(t)].start_s = at;
      spans[size_t(t)].end_s = at += share;
      spans[size_t(t)].wait_s = 0;
    }
  }
}

ExpertParallel::ExpertParallel(Gpt<float>& model, Communicator& dp, int ep) : dp_(dp) {
  if (ep < 1 || dp.size() % ep != 0)
    throw std::invalid_argument("ep " + std::to_string(ep) + " must divide the " + std::to_string(dp.size()) +
                                " data-parallel ranks");
  group_ = dp.split(dp.rank() / ep);
  replicas_ = dp.split(dp.rank() % ep);
  model.set_expert_group(group_.get());
  const auto [first, count] = model.local_experts();
  const GptConfig& c = model.config();
  const ParameterLayout& layout = model.layout();
  // An expert's four tensors are one contiguous range (config.cpp lays them out so).
  for (int l = 0; l < c.layers; ++l) {
    if (!c.moe_layer(l)) continue;
    for (int e = 0; e < c.experts; ++e) {
      const std::string name = "layer" + std::to_string(l) + ".expert" + std::to_string(e) + ".";
      const size_t begin = layout.find(name + "fc_w").offset;
      const ParameterTensor& last = layout.find(name + (c.bias ? "fc_proj_b" : "fc_proj_w"));
      (e >= first && e < first + count ? own_experts_ : other_experts_)
          .push_back({begin, last.offset + last.size()});
    }
  }
  all_experts_ = own_experts_;
  all_experts_.insert(all_experts_.end(), other_experts_.begin(), other_experts_.end());
  std::sort(all_experts_.begin(), all_experts_.end());
  dense_ = complement(all_experts_, 0, layout.total);
  owned_ = complement(other_experts_, 0, layout.total);
}

std::vector<ShardedRange> ExpertParallel::parts(size_t begin, size_t end) {
  std::vector<ShardedRange> out;
  for (const auto& range : intersect(dense_, begin, end)) out.push_back({range, &dp_});
  for (const auto& range : intersect(own_experts_, begin, end)) out.push_back({range, replicas_.get()});
  return out;
}

double ExpertParallel::gradient_squares(const float* grads) const {
  double dense = 0, experts = 0;
  for (const auto& [b, e] : dense_) dense += sum_of_squares(grads, b, e);
  for (const auto& [b, e] : own_experts_) experts += sum_of_squares(grads, b, e);
  return dense + group_->allreduce_sum(experts);
}

void ExpertParallel::gather_experts(float* values) {
  for (const auto& [b, e] : other_experts_) std::fill(values + b, values + e, 0.0f);
  // In the same order on every rank of the group (each expert is one rank's own).
  for (const auto& [b, e] : all_experts_) group_->wait(group_->start_allreduce_sum(values + b, e - b));
}

}  // namespace paratwin::exec
