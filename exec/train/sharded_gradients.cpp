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

ShardedGradients::ShardedGradients(const std::vector<ShardedRange>& parts, size_t total,
                                   Communicator* replicas)
    : partition_(partition_of(parts, total)), replicas_(replicas) {}

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
  Reduction& r = it->second;
  const std::vector<size_t> counts = dp_blocks(r.part, r.comm->size());
  for (int k = 0; k < r.comm->rank(); ++k) r.from += counts[size_t(k)];
  r.size = counts[size_t(r.comm->rank())];
  if (replicas_) {
    // Only the block waits for the replicas' sum: the rest of the part's buffer goes now.
    Buffer<float> block;
    {
      MemoryUseScope use(MemoryUse::Gradients);
      block.assign(r.size, 0.0f);
    }
    std::copy(r.values.data() + r.from, r.values.data() + r.from + r.size, block.data());
    r.values.swap(block);
    r.block_only = true;
    if (!reduced_.emplace(r.part.first, std::move(r)).second)
      throw std::logic_error("sharded gradients: a block is reduced again before its replicas' sum");
  } else {
    add_to_partition(r);
  }
  reducing_.erase(it);
}

int ShardedGradients::sum_over_replicas(
    Range part, std::vector<std::pair<Communicator*, Communicator::Handle>>& requests) {
  auto it = reduced_.find(part.first);
  if (!replicas_ || it == reduced_.end())
    throw std::logic_error("sharded gradients: parameters " + std::to_string(part.first) + "-" +
                           std::to_string(part.second) +
                           " are summed over the replicas before their reduction");
  const int id = next_++;
  Reduction& r = reducing_[id] = std::move(it->second);
  reduced_.erase(it);
  if (replicas_->size() > 1 && r.size > 0)
    requests.push_back({replicas_, replicas_->start_allreduce_sum(r.values.data(), r.size)});
  return id;
}

void ShardedGradients::replicas_summed(int id) {
  auto it = reducing_.find(id);
  if (it == reducing_.end()) throw std::logic_error("sharded gradients: a replicas' sum ended twice");
  add_to_partition(it->second);
  reducing_.erase(it);
}

void ShardedGradients::add_to_partition(const Reduction& r) {
  if (r.size == 0) return;
  float* to = partition_.at(r.part.first + r.from);
  const float* block = r.values.data() + (r.block_only ? 0 : r.from);
  for (size_t i = 0; i < r.size; ++i) to[i] += block[i];
}

}  // namespace paratwin::exec
