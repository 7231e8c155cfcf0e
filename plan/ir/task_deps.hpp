// A task's dependencies: a few task indices, held in the task itself. Lowering builds thousands of
// tasks per candidate plan in the optimizer, nearly all with one to four dependencies; a std::vector
// each made their allocation and freeing a quarter of the search's time. Longer lists (the optimizer
// step waits for every DP bucket) go to the heap.
#pragma once

#include <algorithm>
#include <array>
#include <initializer_list>
#include <vector>

namespace paratwin {

class TaskDeps {
 public:
  TaskDeps() = default;
  TaskDeps(std::initializer_list<int> ids) { assign(ids.begin(), ids.end()); }
  TaskDeps(const std::vector<int>& ids) { assign(ids.begin(), ids.end()); }  // NOLINT: as a vector
  TaskDeps(const TaskDeps& other) { assign(other.begin(), other.end()); }
  TaskDeps& operator=(const TaskDeps& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  TaskDeps(TaskDeps&& other) noexcept
      : size_(other.size_), inline_(other.inline_), heap_(std::move(other.heap_)) {
    other.size_ = 0;
  }
  TaskDeps& operator=(TaskDeps&& other) noexcept {
    size_ = other.size_;
    inline_ = other.inline_;
    heap_ = std::move(other.heap_);
    other.size_ = 0;
    return *this;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const int* begin() const { return data(); }
  const int* end() const { return data() + size_; }
  int operator[](size_t i) const { return data()[i]; }
  int front() const { return data()[0]; }
  int back() const { return data()[size_ - 1]; }
  bool contains(int id) const { return std::find(begin(), end(), id) != end(); }

  void push_back(int id) {
    if (size_ < kInline) {
      inline_[size_++] = id;
      return;
    }
    if (size_ == kInline) heap_.assign(inline_.begin(), inline_.end());
    heap_.push_back(id);
    ++size_;
  }
  // Removes every occurrence of `id`, keeping the order of the rest.
  void remove(int id) {
    int* first = size_ > kInline ? heap_.data() : inline_.data();
    const size_t kept = static_cast<size_t>(std::remove(first, first + size_, id) - first);
    if (size_ > kInline && kept <= kInline) std::copy(first, first + kept, inline_.begin());
    if (size_ > kInline) heap_.resize(kept > kInline ? kept : 0);
    size_ = kept;
  }

  friend bool operator==(const TaskDeps& a, const TaskDeps& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  static constexpr size_t kInline = 6;
  const int* data() const { return size_ > kInline ? heap_.data() : inline_.data(); }
  template <class It>
  void assign(It first, It last) {
    size_ = 0;
    heap_.clear();
    for (; first != last; ++first) push_back(*first);
  }

  size_t size_ = 0;
  std::array<int, kInline> inline_{};
  std::vector<int> heap_;  // all of them, once there are more than kInline
};

}  // namespace paratwin
