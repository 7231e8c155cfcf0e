// Hosts up and down over a supervised run.
#include "exec/supervise/host_pool.hpp"

#include <algorithm>
#include <limits>

namespace paratwin::exec {

HostPool::HostPool(std::vector<Host> hosts, const std::vector<int>& host_of_rank,
                   const std::vector<int>& slot_of_rank)
    : hosts_(std::move(hosts)),
      down_until_(hosts_.size(), -std::numeric_limits<double>::infinity()),
      answering_(hosts_.size(), true),
      outages_(hosts_.size(), 0) {
  ranks_per_host_ = hosts_.empty() ? 0 : int(host_of_rank.size() / hosts_.size());
  for (size_t r = 0; r < host_of_rank.size(); ++r) {
    const auto slot = size_t(slot_of_rank[r]);
    if (hosts_of_slot_.size() <= slot) hosts_of_slot_.resize(slot + 1);
    auto& on = hosts_of_slot_[slot];
    if (std::find(on.begin(), on.end(), host_of_rank[r]) == on.end()) on.push_back(host_of_rank[r]);
  }
}

int HostPool::nodes_for(int world) const {
  if (ranks_per_host_ <= 0 || world % ranks_per_host_ != 0) return 0;
  return world / ranks_per_host_;
}

bool HostPool::slot_up(int slot, double t) const {
  if (size_t(slot) >= hosts_of_slot_.size()) return true;
  for (int h : hosts_of_slot_[size_t(slot)])
    if (!is_up(size_t(h), t)) return false;
  return true;
}

std::vector<Host> HostPool::up(double t, std::vector<int>& indices) const {
  std::vector<Host> out;
  indices.clear();
  for (size_t h = 0; h < hosts_.size(); ++h)
    if (is_up(h, t)) {
      out.push_back(hosts_[h]);
      indices.push_back(int(h));
    }
  return out;
}

std::vector<int> HostPool::awaiting_answer(double t) const {
  std::vector<int> out;
  for (size_t h = 0; h < hosts_.size(); ++h)
    if (down_until_[h] <= t && !answering_[h]) out.push_back(int(h));
  return out;
}

}  // namespace paratwin::exec
