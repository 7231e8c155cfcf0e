// Pieces of a shard's flat parameter layout held in buffers of their own while they exist: ZeRO 3's
// gathered layers, ZeRO 2's and 3's unsharded gradients of a span. ShardedGpt reads a tensor at an
// offset of its layout from the window that holds it (see ShardedGpt::use_windows).
#pragma once

#include <cstddef>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

namespace paratwin::exec {

class LayoutWindows {
 public:
  // Layout offsets [begin, end) live at `data` until close(begin). Throws std::logic_error when the
  // range is empty or overlaps an open window.
  void open(size_t begin, size_t end, float* data) {
    const auto next = open_.lower_bound(begin);
    const bool before = next != open_.begin() && std::prev(next)->second.first > begin;
    if (begin >= end || before || (next != open_.end() && next->first < end))
      throw std::logic_error("layout window [" + std::to_string(begin) + ", " + std::to_string(end) +
                             ") is empty or overlaps an open one");
    open_.emplace(begin, std::pair{end, data});
  }
  void close(size_t begin) { open_.erase(begin); }
  bool is_open(size_t begin) const { return open_.count(begin) > 0; }

  // Where layout offset `offset` lives. Throws std::logic_error when no open window holds it: a pass
  // reads parameters it did not gather, or writes gradients no backward opened.
  float* at(size_t offset) const {
    auto it = open_.upper_bound(offset);
    if (it == open_.begin() || (--it)->second.first <= offset)
      throw std::logic_error("parameter " + std::to_string(offset) + " of the shard is in no open window");
    return it->second.second + (offset - it->first);
  }

 private:
  std::map<size_t, std::pair<size_t, float*>> open_;  // begin -> (end, data)
};

}  // namespace paratwin::exec
