// The process groups of a Program's collectives over every world rank, numbered as Chakra traces name
// them: a collective node's `pg_name` attribute is the decimal id of its group, ids from 1 up (ASTRA-sim
// reads an empty name or "0" as the whole world, so no group takes 0). Members come from the rank
// layout (plan/topology/rank_layout.hpp), in its group order.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "plan/ir/program.hpp"
#include "plan/topology/rank_layout.hpp"

namespace paratwin::chakra {

struct ProcessGroup {
  int id = 0;
  GroupKind kind = GroupKind::None;
  std::vector<int> ranks;  // world ranks, in group order
};

class ProcessGroups {
 public:
  // Every group a collective of `program` runs on, from rank 0 up: ids follow the order in which the
  // ranks first meet their groups, so the same Program and layout always give the same ids.
  ProcessGroups(const Program& program, const RankLayout& layout);

  // The id of `rank`'s group of `kind` (one the Program's collectives use); std::logic_error otherwise.
  int id(int rank, GroupKind kind) const;
  const std::vector<ProcessGroup>& all() const { return groups_; }
  // The groups `rank` belongs to, by id.
  std::vector<const ProcessGroup*> of_rank(int rank) const;

 private:
  std::vector<ProcessGroup> groups_;                           // by id - 1
  std::map<std::pair<GroupKind, std::vector<int>>, int> ids_;  // (kind, members) -> id
  std::vector<std::map<GroupKind, int>> rank_groups_;          // per rank: kind -> id
};

// The role a world rank plays: the one of its pipeline rank.
int role_of_rank(const Program& program, const RankLayout& layout, int rank);

}  // namespace paratwin::chakra
