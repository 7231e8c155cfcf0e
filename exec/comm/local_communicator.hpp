// A communicator of one rank, without MPI: every collective is the identity. For single-process runs
// and unit tests.
#pragma once

#include <algorithm>
#include <stdexcept>

#include "exec/comm/communicator.hpp"

namespace paratwin::exec {

class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Handle start_allreduce_sum(float*, size_t) override { return 0; }
  Handle start_reduce_scatter_sum(float*, const std::vector<size_t>&) override { return 0; }
  Handle start_allgather(float*, const std::vector<size_t>&) override { return 0; }
  // One rank has no peer to talk to.
  Handle start_send(const float*, size_t, int, int) override {
    throw std::logic_error("a communicator of one rank cannot send");
  }
  Handle start_recv(float*, size_t, int, int) override {
    throw std::logic_error("a communicator of one rank cannot receive");
  }
  void allreduce_max(float*, size_t) override {}
  void alltoallv(const float* send, const std::vector<size_t>& send_counts, float* recv,
                 const std::vector<size_t>&) override {
    std::copy(send, send + send_counts.at(0), recv);
  }
  bool test(Handle) override { return true; }
  void wait(Handle) override {}
  double allreduce_sum(double value) override { return value; }
  double allreduce_max(double value) override { return value; }
  void broadcast(void*, size_t, int) override {}
  std::vector<double> gather(const std::vector<double>& values, int) override { return values; }
  void barrier() override {}
  std::unique_ptr<Communicator> split(int color) override {
    return color < 0 ? nullptr : std::make_unique<LocalCommunicator>();
  }
};

}  // namespace paratwin::exec
