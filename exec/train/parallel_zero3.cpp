// Range-wise ZeRO-3 gathers over a shard's DP buckets (see parallel_zero3.hpp).
#include "exec/train/parallel_zero3.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "exec/train/zero3.hpp"

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

// Of each rank's block of `bucket`, the values inside `part` (a sub-range): the blocks are laid out in
// rank order, so these counts are an all-gather of `part` in place.
std::vector<size_t> counts_within(Range bucket, Range part, int ranks) {
  std::vector<size_t> counts = dp_blocks(bucket, ranks);
  size_t begin = bucket.first;
  for (size_t& c : counts) {
    const Range block = intersect({begin, begin + c}, part);
    begin += c;
    c = block.second - block.first;
  }
  return counts;
}

}  // namespace

Zero3Gathers::Zero3Gathers(Buffer<float>& params, std::vector<Range> buckets,
                           std::unique_ptr<Communicator> comm)
    : params_(params), buckets_(std::move(buckets)), comm_(std::move(comm)) {
  for (const Range& b : buckets_) drop(b);
}

int Zero3Gathers::request(Range range) {
  Gather g;
  g.ticket = next_ticket_;
  g.range = range;
  gathers_.push_back(std::move(g));
  for (const Range& b : buckets_) {
    const Range part = intersect(b, range);
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
    if (comm_->size() == 1) continue;
    for (const Range& b : buckets_) {
      const Range part = intersect(b, it->range);
      if (part.second > part.first)
        it->requests.push_back(
            comm_->start_allgather(params_.data() + part.first, counts_within(b, part, comm_->size())));
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
  for (auto h : g->requests) done = comm_->test(h) && done;
  return done;
}

void Zero3Gathers::wait(int ticket) {
  issue();
  Gather* g = find(ticket);
  if (!g->issued)
    throw std::logic_error("ZeRO-3: a pass waits for parameters that an earlier pass still holds");
  for (auto h : g->requests) comm_->wait(h);
}

void Zero3Gathers::release(Range done) {
  for (auto it = gathers_.begin(); it != gathers_.end();) {
    if (it->issued && it->range.first >= done.first && it->range.second <= done.second) {
      for (auto h : it->requests) comm_->wait(h);  // (ended: the pass used them)
      drop(it->range);
      it = gathers_.erase(it);
    } else {
      ++it;
    }
  }
  issue();
}

// What this rank does not own in `range` is no longer valid: NaN, so that a pass reading parameters
// it did not gather fails loudly instead of training on stale values.
void Zero3Gathers::drop(Range range) {
  if (comm_->size() == 1) return;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const Range& b : buckets_) {
    const std::vector<size_t> counts = dp_blocks(b, comm_->size());
    size_t begin = b.first;
    for (int r = 0; r < comm_->size(); ++r) {
      const Range block = intersect({begin, begin + counts[size_t(r)]}, range);
      begin += counts[size_t(r)];
      if (r != comm_->rank())
        std::fill(params_.begin() + long(block.first), params_.begin() + long(block.second), nan);
    }
  }
}

void Zero3Gathers::gather_everything() {
  if (!gathers_.empty()) throw std::logic_error("ZeRO-3: the whole shard is gathered while a pass runs");
  if (comm_->size() == 1) return;
  for (const Range& b : buckets_)
    if (b.second > b.first)
      comm_->wait(comm_->start_allgather(params_.data() + b.first, dp_blocks(b, comm_->size())));
}

}  // namespace paratwin::exec
