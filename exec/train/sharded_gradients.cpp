// Gradients held as the rank's partition, reduce-scattered span by span every micro-batch (see
// sharded_gradients.hpp).
#include "exec/train/sharded_gradients.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "exec/memory/memory_meter.hpp"

namespace paratwin::exec {

namespace {

Partition partition_of(const std::vector<ShardedRange>& parts, size_t total) {
  size_t covered = 0;
  for (const auto& [range, comm] : parts) covered += range.second - range.first;
  if (covered != total)
    throw std::logic_error("sharded gradients: the DP buckets cover " + std::to_string(covered) + " of the " +
                           std::to_string(total) + " parameters");
  MemoryUseScope use(MemoryUse::Gradients);
  return Partition(parts, total);
}

}  // namespace

ShardedGradients::ShardedGradients(const std::vector<ShardedRange>& parts, size_t total)
    : partition_(partition_of(parts, total)) {}

void ShardedGradients::zero() {
  std::fill(partition_.values().begin(), partition_.values().end(), 0.0f);
}

void ShardedGradients::open(Range part) {
  if (open_.count(part.first)) return;
  Buffer<float>& values = open_[part.first];
  {
    MemoryUseScope use(MemoryUse::Gradients);
    values.assign(part.second - part.first, 0.0f);
  }
  windows_.open(part.first, part.second, values.data());
}

int ShardedGradients::reduce(Range part, Communicator* comm,
                             std::vector<std::pair<Communicator*, Communicator::Handle>>& requests) {
  auto it = open_.find(part.first);
  if (it == open_.end())
    throw std::logic_error("sharded gradients: parameters " + std::to_string(part.first) + "-" +
                           std::to_string(part.second) + " are reduced, but no backward computed them");
  windows_.close(part.first);
  const int id = next_++;
  Reduction& r = reducing_[id] = {part, comm, std::move(it->second)};
  open_.erase(it);
  // In place: this rank's block of the buffer ends as the block's sum over the group.
  if (comm->size() > 1)
    requests.push_back(
        {comm, comm->start_reduce_scatter_sum(r.values.data(), dp_blocks(part, comm->size()))});
  return id;
}

void ShardedGradients::reduced(int id) {
  auto it = reducing_.find(id);
  if (it == reducing_.end()) throw std::logic_error("sharded gradients: a reduction ended twice");
  const Reduction& r = it->second;
  const std::vector<size_t> counts = dp_blocks(r.part, r.comm->size());
  size_t from = 0;
  for (int k = 0; k < r.comm->rank(); ++k) from += counts[size_t(k)];
  const size_t n = counts[size_t(r.comm->rank())];
  if (n > 0) {
    float* to = partition_.at(r.part.first + from);
    for (size_t i = 0; i < n; ++i) to[i] += r.values[from + i];
  }
  reducing_.erase(it);
}

}  // namespace paratwin::exec
