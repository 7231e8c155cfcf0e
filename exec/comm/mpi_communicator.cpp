// The Communicator over MPI: non-blocking all-reduce (MPI_Iallreduce) for gradient buckets, so a
// bucket's reduction runs while the backward of earlier layers continues.
#include <algorithm>
#include <cstdlib>
#include <exception>
#include <map>

#include "exec/comm/communicator.hpp"
#include "exec/comm/mpi_check.hpp"

namespace paratwin::exec {

namespace {

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
    // Errors come back as codes, which PARATWIN_MPI_CHECK turns into exceptions.
    PARATWIN_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    PARATWIN_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    PARATWIN_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  }
  ~MpiCommunicator() override {
    // Unwinding from an error (as MpiSession): its transfers in flight may wait for ranks that are still
    // training, so they and the communicator are left to the process's exit, which reports the error.
    if (std::uncaught_exceptions() > 0) return;
    for (auto& [h, pending] : in_flight_) MPI_Wait(&pending.request, MPI_STATUS_IGNORE);
    if (owned_) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Handle start_allreduce_sum(float* data, size_t count) override {
    Pending pending;
    PARATWIN_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm_,
                                      &pending.request));
    return add(std::move(pending));
  }

  Handle start_reduce_scatter_sum(float* data, const std::vector<size_t>& counts) override {
    // Ireduce_scatter writes the block at the start of its receive buffer; a scratch buffer per
    // request takes it, and finish() copies it to the block's place.
    std::vector<int> c(counts.begin(), counts.end());
    size_t offset = 0;
    for (int r = 0; r < rank_; ++r) offset += counts[r];
    Pending pending;
    pending.scratch.resize(std::max<size_t>(1, counts[rank_]));
    pending.copy_to = data + offset;
    pending.copy_count = counts[rank_];
    PARATWIN_MPI_CHECK(MPI_Ireduce_scatter(data, pending.scratch.data(), c.data(), MPI_FLOAT, MPI_SUM, comm_,
                                           &pending.request));
    return add(std::move(pending));
  }

  Handle start_allgather(float* data, const std::vector<size_t>& counts) override {
    std::vector<int> c(counts.begin(), counts.end()), displacements(counts.size(), 0);
    for (size_t r = 1; r < counts.size(); ++r) displacements[r] = displacements[r - 1] + c[r - 1];
    Pending pending;
    pending.counts = std::move(c);
    pending.displacements = std::move(displacements);
    PARATWIN_MPI_CHECK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, pending.counts.data(),
                                       pending.displacements.data(), MPI_FLOAT, comm_, &pending.request));
    return add(std::move(pending));
  }

  Handle start_send(const float* data, size_t count, int peer, int tag) override {
    Pending pending;
    PARATWIN_MPI_CHECK(
        MPI_Isend(data, static_cast<int>(count), MPI_FLOAT, peer, tag, comm_, &pending.request));
    return add(std::move(pending));
  }

  Handle start_recv(float* data, size_t count, int peer, int tag) override {
    Pending pending;
    PARATWIN_MPI_CHECK(
        MPI_Irecv(data, static_cast<int>(count), MPI_FLOAT, peer, tag, comm_, &pending.request));
    return add(std::move(pending));
  }

  void allreduce_max(float* data, size_t count) override {
    PARATWIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_MAX, comm_));
  }

  void alltoallv(const float* send, const std::vector<size_t>& send_counts, float* recv,
                 const std::vector<size_t>& recv_counts) override {
    const size_t n = static_cast<size_t>(size_);
    std::vector<int> sc(n), sd(n), rc(n), rd(n);
    int s_off = 0, r_off = 0;
    for (size_t r = 0; r < n; ++r) {
      sc[r] = static_cast<int>(send_counts.at(r));
      rc[r] = static_cast<int>(recv_counts.at(r));
      sd[r] = s_off;
      rd[r] = r_off;
      s_off += sc[r];
      r_off += rc[r];
    }
    PARATWIN_MPI_CHECK(
        MPI_Alltoallv(send, sc.data(), sd.data(), MPI_FLOAT, recv, rc.data(), rd.data(), MPI_FLOAT, comm_));
  }

  bool test(Handle h) override {
    auto it = in_flight_.find(h);
    if (it == in_flight_.end()) return true;
    int done = 0;
    PARATWIN_MPI_CHECK(MPI_Test(&it->second.request, &done, MPI_STATUS_IGNORE));
    if (done) complete(it);
    return done != 0;
  }

  void wait(Handle h) override {
    auto it = in_flight_.find(h);
    if (it == in_flight_.end()) return;
    PARATWIN_MPI_CHECK(MPI_Wait(&it->second.request, MPI_STATUS_IGNORE));
    complete(it);
  }

  double allreduce_sum(double value) override {
    double out = 0;
    PARATWIN_MPI_CHECK(MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, MPI_SUM, comm_));
    return out;
  }
  double allreduce_max(double value) override {
    double out = 0;
    PARATWIN_MPI_CHECK(MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, MPI_MAX, comm_));
    return out;
  }
  void broadcast(void* data, size_t bytes, int root) override {
    PARATWIN_MPI_CHECK(MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, comm_));
  }
  std::vector<double> gather(const std::vector<double>& values, int root) override {
    std::vector<double> out(rank_ == root ? values.size() * size_ : 0);
    PARATWIN_MPI_CHECK(MPI_Gather(values.data(), static_cast<int>(values.size()), MPI_DOUBLE, out.data(),
                                  static_cast<int>(values.size()), MPI_DOUBLE, root, comm_));
    return out;
  }
  void barrier() override { PARATWIN_MPI_CHECK(MPI_Barrier(comm_)); }

  std::unique_ptr<Communicator> split(int color) override {
    MPI_Comm sub;
    PARATWIN_MPI_CHECK(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, rank_, &sub));
    if (sub == MPI_COMM_NULL) return nullptr;
    return std::make_unique<MpiCommunicator>(sub, true);
  }

 private:
  // A request in flight and what its completion must still do.
  struct Pending {
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<float> scratch;  // reduce-scatter: the block, until copied into place
    float* copy_to = nullptr;
    size_t copy_count = 0;
    std::vector<int> counts, displacements;  // all-gather: must outlive the request
  };
  Handle add(Pending pending) {
    const Handle h = next_++;
    in_flight_.emplace(h, std::move(pending));
    return h;
  }
  void complete(std::map<Handle, Pending>::iterator it) {
    if (it->second.copy_to) std::copy_n(it->second.scratch.data(), it->second.copy_count, it->second.copy_to);
    in_flight_.erase(it);
  }

  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0, size_ = 1;
  Handle next_ = 0;
  std::map<Handle, Pending> in_flight_;
};

}  // namespace

MpiSession::MpiSession() {
  int initialized = 0;
  PARATWIN_MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized) {
    int provided = 0;
    PARATWIN_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided));
    owns_ = true;
  }
}

MpiSession::~MpiSession() {
  // Unwinding from an error: no MPI_Finalize, which could wait for ranks that are still training.
  // The process then exits without it, and mpirun ends the other ranks of the job.
  if (std::uncaught_exceptions() > 0) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_ && !finalized) MPI_Finalize();
}

std::unique_ptr<Communicator> mpi_world() {
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, false);
}

bool under_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
}

}  // namespace paratwin::exec
