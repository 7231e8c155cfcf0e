// Activation offload: the Program's "copy d2h act" after a forward moves what that pass kept for its
// backward into host buffers, freeing it from the rank's working set, and "copy h2d act" brings it
// back (allocated again) before the backward. The copies run in the Program's order on a thread of
// their own, the copy stream, so they overlap the compute stream as a GPU's copy engine would. On the
// CPU backend both sides are host memory, but the bytes really move and the meter charges them to
// host memory while they are away.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "exec/gpt/model.hpp"
#include "exec/gpt/tensor_parallel.hpp"

namespace paratwin::exec {

// A thread that runs copies one after another in the order submitted.
class CopyStream {
 public:
  CopyStream();
  ~CopyStream();  // waits for the copies submitted
  CopyStream(const CopyStream&) = delete;
  CopyStream& operator=(const CopyStream&) = delete;

  int submit(std::function<void()> copy);  // returns its ticket
  bool done(int ticket);                   // rethrows what the copy threw
  void wait(int ticket);

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> queue_;
  int submitted_ = 0, completed_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

// The buffers a forward keeps for its backward, the ones offload moves. Not the gradient buffer between
// passes (dresidual: a pipeline receive may be writing it), nor the tokens and targets.
std::vector<Buffer<float>*> kept_buffers(ChunkActivations& a);

// Moves the kept buffers of each (micro-batch, chunk) to host and back on a copy stream. Between
// to_host() and the end of to_device() the caller must leave those buffers alone (the Program's
// dependencies see to it: the backward waits for the h2d copy).
class ActivationOffload {
 public:
  // Copies `buffers` to host buffers, then frees them; returns the copy's ticket.
  int to_host(int microbatch, int chunk, std::vector<Buffer<float>*> buffers);
  // Allocates the buffers given to to_host() again (as activations) and copies the host values back.
  int to_device(int microbatch, int chunk);
  bool done(int ticket) { return stream_.done(ticket); }
  void wait(int ticket) { stream_.wait(ticket); }

 private:
  struct Away {
    std::vector<Buffer<float>*> device;
    std::vector<Buffer<float>> host;
  };
  std::map<std::pair<int, int>, Away> away_;  // nodes stay put while the copy thread fills them
  CopyStream stream_;                         // last: joined before the buffers it copies go
};

}  // namespace paratwin::exec
