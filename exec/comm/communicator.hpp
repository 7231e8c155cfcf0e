// How the live engine talks to the other ranks of its data-parallel group. MPI implements it on CPU
// (mpi_communicator.cpp); an NCCL one will implement it on GPUs. No MPI type appears here, so code
// outside exec/comm/ never includes mpi.h.
#pragma once

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace paratwin::exec {

class Communicator {
 public:
  using Handle = int;  // a collective in flight

  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Starts an in-place sum over all ranks of data[0, count) and returns at once; the result is there
  // after wait() or a test() that returned true.
  virtual Handle start_allreduce_sum(float* data, size_t count) = 0;
  // Starts a sum over all ranks of data[0, sum(counts)) of which each rank keeps only its block: rank
  // r's block (counts[r] values after the blocks of ranks before it) holds the sum after completion;
  // the rest of `data` is unspecified.
  virtual Handle start_reduce_scatter_sum(float* data, const std::vector<size_t>& counts) = 0;
  // Starts an in-place all-gather: each rank's block of data (laid out as above) reaches every rank.
  virtual Handle start_allgather(float* data, const std::vector<size_t>& counts) = 0;
  // Point to point (pipeline stages): starts sending data[0, count) to `peer`, or receiving that many
  // values from it, under `tag`; a send's buffer must stay untouched until it completes.
  virtual Handle start_send(const float* data, size_t count, int peer, int tag) = 0;
  virtual Handle start_recv(float* data, size_t count, int peer, int tag) = 0;
  // Blocking element-wise maximum over all ranks of data[0, count), in place (vocabulary-parallel
  // cross-entropy: the row maxima of the logits).
  virtual void allreduce_max(float* data, size_t count) = 0;
  // Blocking all-to-all of blocks of different sizes (expert parallelism's token dispatch): send holds
  // send_counts[r] values for each rank r in rank order; recv receives recv_counts[r] values from each
  // rank r in rank order. Each rank's recv_counts[r] must equal rank r's send_counts[this rank]. The
  // base class throws std::logic_error: communicators that expert parallelism does not use (the GPU
  // ones) have none.
  virtual void alltoallv(const float* send, const std::vector<size_t>& send_counts, float* recv,
                         const std::vector<size_t>& recv_counts);
  virtual bool test(Handle handle) = 0;
  virtual void wait(Handle handle) = 0;

  // Blocking helpers for reporting and checks.
  virtual double allreduce_sum(double value) = 0;
  virtual double allreduce_max(double value) = 0;
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  // Every rank's `values` (the same count on each), concatenated in rank order, on `root` (empty
  // elsewhere).
  virtual std::vector<double> gather(const std::vector<double>& values, int root) = 0;
  virtual void barrier() = 0;

  // A communicator over the ranks that pass the same `color` (ordered by rank); ranks that pass a
  // negative color take part in the split and get nullptr.
  virtual std::unique_ptr<Communicator> split(int color) = 0;
};

inline void Communicator::alltoallv(const float*, const std::vector<size_t>&, float*,
                                    const std::vector<size_t>&) {
  throw std::logic_error("this communicator has no all-to-all (expert parallelism runs on the CPU backend)");
}

// Keeps MPI initialized while alive: initializes it unless already initialized, finalizes it on
// destruction if it initialized it, except while an exception unwinds (then mpirun ends the job's
// other ranks instead of this one waiting for them). One per process.
class MpiSession {
 public:
  MpiSession();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

 private:
  bool owns_ = false;
};

// All ranks of the job (MPI_COMM_WORLD); needs a live MpiSession.
std::unique_ptr<Communicator> mpi_world();

// Whether this process was started by mpirun (Open MPI's environment says so).
bool under_mpirun();

}  // namespace paratwin::exec
