// ZeRO-3 parameter shards, gathered per pass (see zero3.hpp).
#include "exec/train/zero3.hpp"

#include <algorithm>
#include <stdexcept>

namespace paratwin::exec {

std::vector<size_t> dp_blocks(std::pair<size_t, size_t> range, int ranks) {
  const size_t n = range.second - range.first, dp = size_t(ranks);
  std::vector<size_t> counts(dp);
  for (size_t r = 0; r < dp; ++r) counts[r] = n / dp + (r < n % dp ? 1 : 0);
  return counts;
}

ParameterRanges owned_blocks(const std::vector<ShardedRange>& ranges) {
  ParameterRanges out;
  for (const auto& [range, comm] : ranges) {
    const std::vector<size_t> counts = dp_blocks(range, comm->size());
    size_t begin = range.first;
    for (int k = 0; k < comm->rank(); ++k) begin += counts[size_t(k)];
    if (counts[size_t(comm->rank())] > 0) out.push_back({begin, begin + counts[size_t(comm->rank())]});
  }
  std::sort(out.begin(), out.end());
  return out;
}

Zero3Parameters::Zero3Parameters(Buffer<float>& params, std::vector<ShardedRange> ranges, Communicator& comm)
    : params_(params),
      total_(params.size()),
      ranges_(std::move(ranges)),
      owned_(owned_blocks(ranges_)),
      comm_(comm) {
  size_t n = 0;
  for (const auto& [b, e] : owned_) {
    shard_offset_[b] = n;
    n += e - b;
  }
  {
    MemoryUseScope use(MemoryUse::Parameters);
    shard_.resize(n);
  }
  for (const auto& [b, e] : owned_)
    std::copy(params_.begin() + long(b), params_.begin() + long(e), shard_.begin() + long(shard_offset_[b]));
  Buffer<float>().swap(params_);
}

float* Zero3Parameters::shard(size_t begin) {
  auto it = shard_offset_.find(begin);
  if (it == shard_offset_.end()) throw std::logic_error("ZeRO-3: no owned range begins at this parameter");
  return shard_.data() + it->second;
}

int Zero3Parameters::request() {
  waiting_.push_back(next_ticket_);
  if (issued_ < 0) issue();
  return next_ticket_++;
}

// Allocates the whole parameters, puts the shard in its place and starts every bucket's all-gather.
void Zero3Parameters::issue() {
  if (waiting_.empty()) return;
  issued_ = waiting_.front();
  {
    MemoryUseScope use(MemoryUse::Parameters);
    params_.assign(total_, 0.0f);
  }
  for (const auto& [b, e] : owned_)
    std::copy(shard_.begin() + long(shard_offset_[b]), shard_.begin() + long(shard_offset_[b] + e - b),
              params_.begin() + long(b));
  requests_.clear();
  for (const auto& [range, comm] : ranges_)
    if (comm->size() > 1)
      requests_.push_back(
          {comm, comm->start_allgather(params_.data() + range.first, dp_blocks(range, comm->size()))});
}

bool Zero3Parameters::ready(int ticket) {
  if (ticket != issued_) return false;
  bool done = true;
  for (auto [comm, h] : requests_) done = comm->test(h) && done;
  return done;
}

void Zero3Parameters::wait(int ticket) {
  if (ticket != issued_) {
    if (issued_ >= 0 || waiting_.empty() || waiting_.front() != ticket)
      throw std::logic_error("ZeRO-3: a pass waits for parameters while another pass holds them");
    issue();
  }
  for (auto [comm, h] : requests_) comm->wait(h);
}

void Zero3Parameters::pass_ended() {
  if (waiting_.empty() || issued_ != waiting_.front())
    throw std::logic_error("ZeRO-3: a pass ended without gathered parameters");
  for (auto [comm, h] : requests_) comm->wait(h);  // (already ended: the pass used them)
  requests_.clear();
  waiting_.pop_front();
  issued_ = -1;
  Buffer<float>().swap(params_);
  issue();
}

std::vector<float> Zero3Parameters::gather_all() {
  std::vector<float> out(total_, 0.0f);
  for (const auto& [b, e] : owned_)
    std::copy(shard_.begin() + long(shard_offset_[b]), shard_.begin() + long(shard_offset_[b] + e - b),
              out.begin() + long(b));
  // Every value is owned by one rank and zero on the others: the sum is the whole model.
  if (comm_.size() > 1) comm_.wait(comm_.start_allreduce_sum(out.data(), out.size()));
  return out;
}

void Zero3Parameters::assign_full(const std::vector<float>& weights) {
  for (const auto& [b, e] : owned_)
    std::copy(weights.begin() + long(b), weights.begin() + long(e), shard_.begin() + long(shard_offset_[b]));
}

void Zero3Parameters::materialize() {
  const std::vector<float> all = gather_all();
  MemoryUseScope use(MemoryUse::Parameters);
  params_.assign(all.begin(), all.end());
}

}  // namespace paratwin::exec
