// Pipeline sends and receives between the stages (plan.overlap.pp: on their own stream).
#include <cstdlib>
#include <utility>

#include "plan/ir/role_builder.hpp"

namespace paratwin::lowering {

int RoleBuilder::p2p(TaskKind kind, Direction dir, int mb, int chunk, TaskDeps deps) {
  Task t;
  t.kind = kind;
  t.stream = p_.overlap_pp ? StreamKind::Pp : StreamKind::Compute;
  // Combined 1F1B sends a pass's output after the all-to-alls it leaves beside the next pass, on their
  // stream: queued on the PP stream it would hold up the next pass's receive, where Megatron-Core
  // exchanges a merged step's outputs and the next step's inputs together.
  if (kind == TaskKind::Send && ep_beside_next_) t.stream = StreamKind::Ep;
  t.direction = dir;
  t.microbatch = mb;
  t.chunk = chunk;
  t.bytes = boundary_bytes();
  const int other_chunk = (kind == TaskKind::Send) == (dir == Direction::Forward) ? chunk + 1 : chunk - 1;
  t.peer = p_.rank_of_chunk(other_chunk);
  t.peer_same_node =
      pp_stride_ * std::abs(t.peer - rank_) < pool_->gpus_per_node && p_.stages[t.peer].pool == role_.pool;
  t.name = named(kind == TaskKind::Send ? (dir == Direction::Forward ? "send F " : "send B ")
                                        : (dir == Direction::Forward ? "recv F " : "recv B "),
                 mb, chunk);
  t.deps = std::move(deps);
  return add(std::move(t));
}

}  // namespace paratwin::lowering
