// The checkpoint writer thread.
#include "exec/checkpoint/background_writer.hpp"

#include <chrono>

namespace paratwin::exec {

BackgroundCheckpointWriter::BackgroundCheckpointWriter(std::string dir, Committed on_committed)
    : dir_(std::move(dir)), on_committed_(std::move(on_committed)), thread_([this] { loop(); }) {}

BackgroundCheckpointWriter::~BackgroundCheckpointWriter() {
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return !pending_ && !writing_; });
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void BackgroundCheckpointWriter::rethrow_locked() {
  if (!error_) return;
  std::exception_ptr e = error_;
  error_ = nullptr;
  std::rethrow_exception(e);
}

void BackgroundCheckpointWriter::submit(TrainingState snapshot, double snapshot_s) {
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return !pending_ && !writing_; });
    rethrow_locked();
    pending_ = std::move(snapshot);
    pending_snapshot_s_ = snapshot_s;
  }
  changed_.notify_all();
}

void BackgroundCheckpointWriter::wait() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return !pending_ && !writing_; });
  rethrow_locked();
}

void BackgroundCheckpointWriter::loop() {
  for (;;) {
    TrainingState state;
    double snapshot_s = 0;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [this] { return pending_ || stop_; });
      if (!pending_) return;
      state = std::move(*pending_);
      pending_.reset();
      snapshot_s = pending_snapshot_s_;
      writing_ = true;
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::exception_ptr error;
    try {
      save_checkpoint(dir_, state);
      const double write_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (on_committed_) on_committed_(state.step, snapshot_s, write_s);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard lock(mutex_);
      writing_ = false;
      if (error) error_ = error;
    }
    changed_.notify_all();
  }
}

}  // namespace paratwin::exec
