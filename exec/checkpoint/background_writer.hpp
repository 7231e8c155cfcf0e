// The second phase of a two-phase checkpoint: the training state, already copied to host memory
// (the snapshot, phase one), is written to disk by a thread of its own while training goes on. The
// writing itself is save_checkpoint's: atomic, checksummed, a manifest last.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "exec/checkpoint/checkpoint.hpp"

namespace paratwin::exec {

class BackgroundCheckpointWriter {
 public:
  // Called on the writer thread once a checkpoint is complete on disk, with its step, how long its
  // snapshot held training up (as given to submit) and how long the write took.
  using Committed = std::function<void(int64_t step, double snapshot_s, double write_s)>;

  BackgroundCheckpointWriter(std::string dir, Committed on_committed);
  ~BackgroundCheckpointWriter();  // finishes the write in progress (a killed process leaves none)
  BackgroundCheckpointWriter(const BackgroundCheckpointWriter&) = delete;
  BackgroundCheckpointWriter& operator=(const BackgroundCheckpointWriter&) = delete;

  // Hands the snapshot to the writer and returns; waits first while the previous one is still being
  // written (so at most one snapshot is held besides the live state). Rethrows the error of a
  // previous write (std::runtime_error naming the path).
  void submit(TrainingState snapshot, double snapshot_s);
  // Returns when nothing is being written; rethrows a write's error.
  void wait();

 private:
  void loop();
  void rethrow_locked();

  std::string dir_;
  Committed on_committed_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<TrainingState> pending_;
  double pending_snapshot_s_ = 0;
  bool writing_ = false, stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace paratwin::exec
