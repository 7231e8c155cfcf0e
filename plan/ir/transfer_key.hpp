// Which transfer a send or a receive is part of: its direction, micro-batch and the chunk that
// receives it. A send and the receive it feeds have the same key, and no two transfers between the
// same pair of ranks share one; every consumer (the analytic evaluator, the simulator, the Chakra
// writer) pairs them by it.
#pragma once

#include <cstddef>
#include <tuple>

#include "plan/ir/program.hpp"

namespace paratwin {

using TransferKey = std::tuple<int /*direction*/, int /*microbatch*/, int /*receiving chunk*/>;

inline TransferKey transfer_key(const Task& t) {
  int receiver = t.chunk;
  if (t.kind == TaskKind::Send) receiver = t.direction == Direction::Forward ? t.chunk + 1 : t.chunk - 1;
  return {static_cast<int>(t.direction), t.microbatch, receiver};
}

// The key as a dense number, below 2 x num_microbatches x chunks: a slot per transfer, or a message tag.
inline size_t transfer_index(const Task& t, const Plan& plan) {
  const auto [direction, microbatch, receiver] = transfer_key(t);
  return (static_cast<size_t>(direction) * plan.num_microbatches + microbatch) * plan.chunks() + receiver;
}

}  // namespace paratwin
