// Output files appear whole or not at all: written to a temporary file beside the target, flushed
// to disk, then renamed over it. An interrupted run never leaves a half-written report.
#pragma once

#include <fstream>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

namespace paratwin {

// Writes `content` to `path` atomically; "-" writes to standard output. Throws std::runtime_error
// naming the path and the system's reason when the directory is missing or not writable.
// `sync`: flush the data to disk before the rename, so that the file survives a power loss too.
// Without it the file is still whole or absent when the process is killed, at a fraction of the cost
// (progress files rewritten many times a second).
void write_file_atomically(const std::string& path, std::string_view content, bool sync = true);

// The same for content written piece by piece (a sweep's millions of rows never held at once): the
// stream writes into the temporary file, commit() renames it over `path`; destroyed without a
// commit, the temporary file goes and `path` is untouched. "-" streams to standard output.
class AtomicFileWriter {
 public:
  // Throws std::runtime_error as write_file_atomically does.
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  std::ostream& stream();
  // Throws std::runtime_error when the data could not be written or the file renamed.
  void commit(bool sync = true);

 private:
  std::string path_, tmp_;
  std::unique_ptr<std::ofstream> file_;
  bool committed_ = false;
};

}  // namespace paratwin
