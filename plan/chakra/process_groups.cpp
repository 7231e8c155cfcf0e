#include "plan/chakra/process_groups.hpp"

#include <set>
#include <stdexcept>

namespace paratwin::chakra {

int role_of_rank(const Program& program, const RankLayout& layout, int rank) {
  const int pp = layout.coords(rank).pp;
  for (size_t r = 0; r < program.roles.size(); ++r)
    if (program.roles[r].pipeline_rank == pp) return static_cast<int>(r);
  throw std::logic_error("no role plays pipeline rank " + std::to_string(pp));
}

ProcessGroups::ProcessGroups(const Program& program, const RankLayout& layout) {
  std::vector<std::set<GroupKind>> kinds_of_role(program.roles.size());
  for (size_t r = 0; r < program.roles.size(); ++r)
    for (const Task& t : program.roles[r].tasks)
      if (t.kind == TaskKind::Collective) kinds_of_role[r].insert(t.group);
  rank_groups_.resize(static_cast<size_t>(layout.world()));
  for (int rank = 0; rank < layout.world(); ++rank)
    for (GroupKind kind : kinds_of_role[static_cast<size_t>(role_of_rank(program, layout, rank))]) {
      std::vector<int> members = layout.group(rank, kind);
      auto [it, added] = ids_.try_emplace({kind, members}, static_cast<int>(groups_.size()) + 1);
      if (added) groups_.push_back({it->second, kind, std::move(members)});
      rank_groups_[static_cast<size_t>(rank)][kind] = it->second;
    }
}

int ProcessGroups::id(int rank, GroupKind kind) const {
  const auto& mine = rank_groups_.at(static_cast<size_t>(rank));
  const auto it = mine.find(kind);
  if (it == mine.end()) throw std::logic_error("rank " + std::to_string(rank) + " has no such group");
  return it->second;
}

std::vector<const ProcessGroup*> ProcessGroups::of_rank(int rank) const {
  std::vector<const ProcessGroup*> out;
  for (const auto& [kind, id] : rank_groups_.at(static_cast<size_t>(rank)))
    out.push_back(&groups_[static_cast<size_t>(id - 1)]);
  return out;
}

}  // namespace paratwin::chakra
