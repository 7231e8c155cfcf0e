// The members of a rank's group of each kind under the plan's rank order: the one rule of who meets
// whom, which the simulator's layout (RankLayout::group) and the live engines' communicators share.
#pragma once

#include <vector>

#include "plan/ir/program.hpp"
#include "plan/topology/rank_order.hpp"

namespace paratwin {

// The world ranks of `rank`'s group of `kind`, in group order (the first is the group's leader, the
// same for every member): Tp, Cp and Pp vary their coordinate; Dp varies dp x cp, within the rank's
// HSDP shard group (consecutive dp coordinates), in rank order; DpReplicate is the rank's place in
// its shard group in every replica; Ep is `ep` consecutive dp coordinates; Embedding the first and
// the last pipeline rank; World every rank; None the rank alone.
std::vector<int> group_members(const Plan& plan, const RankStrides& strides, int rank, GroupKind kind);
std::vector<int> group_members(const Plan& plan, int rank, GroupKind kind);

}  // namespace paratwin
