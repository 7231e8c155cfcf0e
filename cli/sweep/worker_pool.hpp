// Local worker processes for a sweep: each runs `paratwin sweep ... --worker`, reads point indices
// on its standard input and answers one line of JSON per point on its standard output. A worker that
// dies is reported and replaced.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "cli/sweep/channel.hpp"

namespace paratwin::cli {

class WorkerPool : public PointChannel {
 public:
  // `command`: the worker's argv (argv[0] an executable path). Throws std::runtime_error when a
  // worker cannot be started.
  WorkerPool(std::vector<std::string> command, int workers);
  ~WorkerPool() override;  // ends the workers (closes their input, then SIGTERM for the stubborn)
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int slots() const override { return static_cast<int>(workers_.size()); }
  void assign(int slot, int index) override;
  std::vector<Finished> poll(int timeout_ms) override;
  void finish() override;

 private:
  struct Worker {
    pid_t pid = -1;
    int to = -1;          // its standard input
    int from = -1;        // its standard output
    std::string pending;  // output read but not yet a whole line
    int index = -1;       // the point it is evaluating, -1 when idle
  };
  void start(Worker& w);
  void stop(Worker& w);
  // The worker's output ended: collects its exit status and reports its point as failed.
  Finished ended(int slot);

  std::vector<std::string> command_;
  std::vector<Worker> workers_;
  int deaths_without_result_ = 0;
};

}  // namespace paratwin::cli
