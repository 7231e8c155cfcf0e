// Pipeline sends and receives between the stages (plan.overlap.pp: on their own stream), and under
// combined 1F1B (Plan::overlap_ep) a pass's send held until the next pass's receive is issued.
#include <cstdlib>
#include <utility>

#include "plan/ir/role_builder.hpp"

namespace paratwin::lowering {

int RoleBuilder::p2p(TaskKind kind, Direction dir, int mb, int chunk, TaskDeps deps) {
  Task t;
  t.kind = kind;
  t.stream = p_.overlap_pp ? StreamKind::Pp : StreamKind::Compute;
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

void RoleBuilder::send(Direction dir, int mb, int chunk, TaskDeps deps) {
  pending_send_ = PendingSend{dir, mb, chunk, std::move(deps)};
  // Combined 1F1B exchanges a merged step's outputs with the next step's inputs: this pass's output,
  // which waits for the all-to-alls it leaves beside the next pass, goes after the next pass's receive
  // on the PP stream (a send waiting on its data holds no unrelated receive).
  if (!ep_beside_next_) send_pending();
}

void RoleBuilder::send_pending() {
  if (!pending_send_) return;
  PendingSend s = std::move(*pending_send_);
  pending_send_.reset();
  p2p(TaskKind::Send, s.dir, s.microbatch, s.chunk, std::move(s.deps));
}

}  // namespace paratwin::lowering
