// Range-wise ZeRO-3 gathers over a shard's DP buckets (see parallel_zero3.hpp).
#include "exec/train/parallel_zero3.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "exec/memory/memory_meter.hpp"
#include "exec/train/dp_blocks.hpp"

namespace paratwin::exec {

namespace {

using Range = Zero3Gathers::Range;

Range intersect(Range a, Range b) {
  const size_t lo = std::max(a.first, b.first), hi = std::min(a.second, b.second);
  return lo < hi ? Range{lo, hi} : Range{lo, lo};
}
bool overlap(Range a, Range b) {
  return std::max(a.first, b.first) < std::min(a.second, b.second);
}

// Of each rank's block of `whole`, the values inside `part` (a sub-range): the blocks are laid out in
// rank order, so these counts are an all-gather of `part` in place.
std::vector<size_t> counts_within(Range whole, Range part, int ranks) {
  std::vector<size_t> counts = dp_blocks(whole, ranks);
  size_t begin = whole.first;
  for (size_t& c : counts) {
    const Range block = intersect({begin, begin + c}, part);
    begin += c;
    c = block.second - block.first;
  }
  return counts;
}

}  // namespace

Zero3Gathers::Zero3Gathers(Buffer<float>& params, std::vector<ShardedRange> parts,
                           std::vector<std::unique_ptr<Communicator>> groups)
    : params_(params), total_(params.size()), parts_(std::move(parts)), groups_(std::move(groups)) {
  // Kept: everything but the other ranks' blocks of the parts.
  std::vector<Range> others;
  for (const auto& [range, comm] : parts_) {
    const std::vector<size_t> counts = dp_blocks(range, comm->size());
    size_t begin = range.first;
    for (int r = 0; r < comm->size(); ++r) {
      if (r != comm->rank() && counts[size_t(r)] > 0) others.push_back({begin, begin + counts[size_t(r)]});
      begin += counts[size_t(r)];
    }
  }
  std::sort(others.begin(), others.end());
  size_t at = 0;
  for (const Range& o : others) {
    if (o.first > at) kept_.push_back({at, o.first});
    at = std::max(at, o.second);
  }
  if (at < total_) kept_.push_back({at, total_});
  MemoryUseScope use(MemoryUse::Parameters);
  for (const Range& k : kept_)
    shard_.insert(shard_.end(), params_.begin() + long(k.first), params_.begin() + long(k.second));
  Buffer<float>().swap(params_);
}

void Zero3Gathers::allocate() {
  if (!params_.empty()) return;
  MemoryUseScope use(MemoryUse::Parameters);
  params_.assign(total_, std::numeric_limits<float>::quiet_NaN());
  const float* from = shard_.data();
  for (const Range& k : kept_) {
    std::copy(from, from + (k.second - k.first), params_.begin() + long(k.first));
    from += k.second - k.first;
  }
}

float* Zero3Gathers::shard(size_t begin) {
  // The optimizer is about to change the kept values: a whole copy a checkpoint gathered would be stale.
  if (gathers_.empty()) Buffer<float>().swap(params_);
  size_t offset = 0;
  for (const Range& k : kept_) {
    if (begin >= k.first && begin < k.second) return shard_.data() + offset + (begin - k.first);
    offset += k.second - k.first;
  }
  throw std::logic_error("ZeRO-3: parameter " + std::to_string(begin) + " is not in this rank's shard");
}

void Zero3Gathers::assign(const float* whole) {
  if (!gathers_.empty()) throw std::logic_error("ZeRO-3: weights assigned while a pass runs");
  float* to = shard_.data();
  for (const Range& k : kept_) to = std::copy(whole + k.first, whole + k.second, to);
  Buffer<float>().swap(params_);  // a copy gathered before is stale
}

int Zero3Gathers::request(Range range) {
  Gather g;
  g.ticket = next_ticket_;
  g.range = range;
  gathers_.push_back(std::move(g));
  for (const auto& [whole, comm] : parts_) {
    const Range part = intersect(whole, range);
    bytes_ += double(part.second - part.first) * sizeof(float);
  }
  issue();
  return next_ticket_++;
}

// Issues waiting gathers in request order, up to the first whose range a gathered one still holds.
void Zero3Gathers::issue() {
  for (auto it = gathers_.begin(); it != gathers_.end(); ++it) {
    if (it->issued) continue;
    for (auto held = gathers_.begin(); held != it; ++held)
      if (held->issued && overlap(held->range, it->range)) return;
    it->issued = true;
    allocate();
    for (const auto& [whole, comm] : parts_) {
      const Range part = intersect(whole, it->range);
      if (part.second > part.first && comm->size() > 1)
        it->requests.push_back({comm, comm->start_allgather(params_.data() + part.first,
                                                            counts_within(whole, part, comm->size()))});
    }
  }
}

Zero3Gathers::Gather* Zero3Gathers::find(int ticket) {
  for (Gather& g : gathers_)
    if (g.ticket == ticket) return &g;
  throw std::logic_error("ZeRO-3: a pass waits for a gather that was released");
}

bool Zero3Gathers::ready(int ticket) {
  issue();
  Gather* g = find(ticket);
  if (!g->issued) return false;
  bool done = true;
  for (auto [comm, h] : g->requests) done = comm->test(h) && done;
  return done;
}

void Zero3Gathers::wait(int ticket) {
  issue();
  Gather* g = find(ticket);
  if (!g->issued)
    throw std::logic_error("ZeRO-3: a pass waits for parameters that an earlier pass still holds");
  for (auto [comm, h] : g->requests) comm->wait(h);
}

void Zero3Gathers::release(Range done) {
  for (auto it = gathers_.begin(); it != gathers_.end();) {
    if (it->issued && it->range.first >= done.first && it->range.second <= done.second) {
      for (auto [comm, h] : it->requests) comm->wait(h);  // (ended: the pass used them)
      drop(it->range);
      it = gathers_.erase(it);
    } else {
      ++it;
    }
  }
  if (gathers_.empty()) Buffer<float>().swap(params_);  // no pass holds any: the shard only
  issue();
}

// What this rank does not own in `range` is no longer valid: NaN, so that a pass reading parameters
// it did not gather fails loudly instead of training on stale values.
void Zero3Gathers::drop(Range range) {
  if (params_.empty()) return;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const auto& [whole, comm] : parts_) {
    const std::vector<size_t> counts = dp_blocks(whole, comm->size());
    size_t begin = whole.first;
    for (int r = 0; r < comm->size(); ++r) {
      const Range block = intersect({begin, begin + counts[size_t(r)]}, range);
      begin += counts[size_t(r)];
      if (r != comm->rank())
        std::fill(params_.begin() + long(block.first), params_.begin() + long(block.second), nan);
    }
  }
}

void Zero3Gathers::gather_everything() {
  if (!gathers_.empty()) throw std::logic_error("ZeRO-3: the whole shard is gathered while a pass runs");
  allocate();
  for (const auto& [whole, comm] : parts_)
    if (whole.second > whole.first && comm->size() > 1)
      comm->wait(comm->start_allgather(params_.data() + whole.first, dp_blocks(whole, comm->size())));
}

}  // namespace paratwin::exec
