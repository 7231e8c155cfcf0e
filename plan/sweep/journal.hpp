// The points a sweep has finished, kept on disk as they finish, one JSON line each, so that neither the
// coordinator's memory nor what an interruption loses depends on how many points the sweep has. The
// file holds a header line (which sweep), then runs: each session that evaluates points appends one,
// its points in index order; a point evaluated again (it had failed) is in a later run, which wins.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "plan/sweep/results.hpp"

namespace paratwin {

// Reads the runs of a journal merged into one stream in index order, the latest run's point where runs
// share one. Memory: one point per run.
class JournalReader {
 public:
  using Run = std::pair<std::uint64_t, std::uint64_t>;  // byte offsets [begin, end) of its points
  JournalReader(const std::string& path, const std::vector<Run>& runs);
  JournalReader(JournalReader&&) noexcept;
  ~JournalReader();

  // The next point, or nullopt after the last. Throws std::runtime_error for a line that is not a point.
  std::optional<PointResult> next();

 private:
  struct Cursor;
  std::string path_;
  std::vector<std::unique_ptr<Cursor>> cursors_;
};

class SweepJournal {
 public:
  // A new journal at `path` (replacing one there) for the sweep of `header`. Throws std::runtime_error
  // when it cannot be written.
  static SweepJournal create(const std::string& path, const SweepHeader& header);
  // Continues the journal at `path`, or, when there is none, one made from `results_file` (what
  // write_json wrote, "" for none); without either, a new journal. Throws InputError naming the file
  // when it belongs to another sweep or cannot be read. A last line cut short by a kill is dropped.
  static SweepJournal resume(const std::string& path, const SweepHeader& header,
                             const std::string& results_file);

  SweepJournal(SweepJournal&&) noexcept = default;
  ~SweepJournal();

  // Starts this session's run; points appended after it must come in rising index order.
  void start_run();
  // One line, flushed (not synced: a kill loses at most the line being written).
  void append(const PointResult& point);

  const std::string& path() const { return path_; }
  // Every point in the journal once, in index order, read from the file each time the source is read.
  PointSource points() const;
  // The same as a reader, over the runs as they are now.
  JournalReader reader() const;

 private:
  SweepJournal(std::string path, SweepHeader header);
  void open_for_append();

  std::string path_;
  SweepHeader header_;
  std::unique_ptr<std::ofstream> out_;
  std::vector<JournalReader::Run> runs_;
  std::uint64_t size_ = 0;  // bytes in the file
  int last_index_ = -1;     // of this run, to check the order
};

}  // namespace paratwin
