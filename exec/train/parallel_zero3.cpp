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

Partition kept_values(const std::vector<ShardedRange>& parts, const Buffer<float>& params) {
  MemoryUseScope use(MemoryUse::Parameters);
  Partition p(parts, params.size());
  p.take(params.data());
  return p;
}

}  // namespace

Zero3Gathers::Zero3Gathers(Buffer<float>& params, std::vector<ShardedRange> parts,
                           std::vector<std::unique_ptr<Communicator>> groups)
    : params_(params),
      total_(params.size()),
      parts_(std::move(parts)),
      groups_(std::move(groups)),
      kept_(kept_values(parts_, params)) {
  Buffer<float>().swap(params_);
}

float* Zero3Gathers::shard(size_t begin) {
  // The optimizer is about to change the kept values: a whole copy a checkpoint gathered would be stale.
  Buffer<float>().swap(params_);
  return kept_.at(begin);
}

void Zero3Gathers::assign(const float* whole) {
  if (!gathers_.empty()) throw std::logic_error("ZeRO-3: weights assigned while a pass runs");
  kept_.take(whole);
  Buffer<float>().swap(params_);  // a copy gathered before is stale
}

int Zero3Gathers::request(std::vector<Range> ranges) {
  Buffer<float>().swap(params_);  // a pass gathers its own copy: the whole one a checkpoint took goes
  Gather g;
  g.ticket = next_ticket_;
  g.ranges = std::move(ranges);
  for (const Range& range : g.ranges)
    for (const auto& [whole, comm] : parts_) {
      const Range part = intersect(whole, range);
      if (comm->size() > 1) bytes_ += double(part.second - part.first) * sizeof(float);
    }
  gathers_.push_back(std::move(g));
  issue();
  return next_ticket_++;
}

// Issues waiting gathers in request order, up to the first whose ranges a gathered copy still holds.
void Zero3Gathers::issue() {
  for (auto it = gathers_.begin(); it != gathers_.end(); ++it) {
    if (it->issued) continue;
    for (auto held = gathers_.begin(); held != it; ++held)
      for (const Range& a : held->ranges)
        for (const Range& b : it->ranges)
          if (held->issued && overlap(a, b)) return;
    start(*it);
  }
}

void Zero3Gathers::start(Gather& g) {
  g.issued = true;
  for (const Range& range : g.ranges) {
    Buffer<float>& copy = g.copies.emplace_back();
    {
      MemoryUseScope use(MemoryUse::Parameters);
      copy.assign(range.second - range.first, std::numeric_limits<float>::quiet_NaN());
    }
    fill(range, copy.data());
    for (const auto& [whole, comm] : parts_) {
      const Range part = intersect(whole, range);
      if (part.second > part.first && comm->size() > 1)
        g.requests.push_back({comm, comm->start_allgather(copy.data() + (part.first - range.first),
                                                          counts_within(whole, part, comm->size()))});
    }
    windows_.open(range.first, range.second, copy.data());
  }
}

void Zero3Gathers::fill(Range range, float* to) {
  for (const auto& k : kept_.kept()) {
    const Range both = intersect(k, range);
    if (both.second > both.first)
      std::copy(kept_.at(both.first), kept_.at(both.first) + (both.second - both.first),
                to + (both.first - range.first));
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

void Zero3Gathers::release(int ticket) {
  for (auto it = gathers_.begin(); it != gathers_.end(); ++it) {
    if (it->ticket != ticket) continue;
    if (!it->issued) throw std::logic_error("ZeRO-3: a pass released parameters it never had");
    for (auto [comm, h] : it->requests) comm->wait(h);  // (ended: the pass used them)
    for (const Range& range : it->ranges) windows_.close(range.first);
    gathers_.erase(it);
    issue();
    return;
  }
  throw std::logic_error("ZeRO-3: a pass released a gather twice");
}

void Zero3Gathers::gather_everything() {
  if (!gathers_.empty()) throw std::logic_error("ZeRO-3: the whole shard is gathered while a pass runs");
  {
    MemoryUseScope use(MemoryUse::Parameters);
    params_.assign(total_, std::numeric_limits<float>::quiet_NaN());
  }
  kept_.put(params_.data());
  for (const auto& [whole, comm] : parts_)
    if (whole.second > whole.first && comm->size() > 1)
      comm->wait(comm->start_allgather(params_.data() + whole.first, dp_blocks(whole, comm->size())));
}

}  // namespace paratwin::exec
