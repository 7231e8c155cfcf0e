// Where a sweep's points are evaluated: slots that each take one point at a time. Local worker
// processes are one kind (worker_pool.hpp), the ranks of an MPI job another (rank_main.cpp).
#pragma once

#include <string>
#include <vector>

namespace paratwin::cli {

struct Finished {
  int slot = 0;
  int index = 0;             // the point
  std::string result;        // the point's result as one line of JSON; empty when it failed
  std::string failure;       // why there is no result (the worker process died, ...)
  bool interrupted = false;  // the worker was stopped by SIGINT/SIGTERM/SIGHUP: not the point's fault
};

class PointChannel {
 public:
  virtual ~PointChannel() = default;
  virtual int slots() const = 0;
  // Gives an idle slot a point.
  virtual void assign(int slot, int index) = 0;
  // Points finished since the last call, waiting up to `timeout_ms` for the first one.
  virtual std::vector<Finished> poll(int timeout_ms) = 0;
  // No more points: every slot is idle and stops.
  virtual void finish() = 0;
};

}  // namespace paratwin::cli
