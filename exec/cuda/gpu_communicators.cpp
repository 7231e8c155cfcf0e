// NCCL and host-staging communicators over GPU memory.
#include "exec/cuda/gpu_communicators.hpp"

#include <nccl.h>

#include <map>
#include <vector>

#include "exec/cuda/check.hpp"
#include "exec/cuda/device_buffer.hpp"

namespace paratwin::exec::cuda {

namespace {

// Delegates what does not touch device memory to the host communicator.
class HostDelegating : public Communicator {
 public:
  explicit HostDelegating(std::unique_ptr<Communicator> host) : host_(std::move(host)) {}
  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  double allreduce_sum(double value) override { return host_->allreduce_sum(value); }
  double allreduce_max(double value) override { return host_->allreduce_max(value); }
  void broadcast(void* data, size_t bytes, int root) override { host_->broadcast(data, bytes, root); }
  std::vector<double> gather(const std::vector<double>& values, int root) override {
    return host_->gather(values, root);
  }
  void barrier() override { host_->barrier(); }

 protected:
  std::unique_ptr<Communicator> host_;
};

class NcclCommunicator final : public HostDelegating {
 public:
  NcclCommunicator(std::unique_ptr<Communicator> host, cudaStream_t producer)
      : HostDelegating(std::move(host)), producer_(producer) {
    ncclUniqueId id{};
    if (host_->rank() == 0) PARATWIN_NCCL_CHECK(ncclGetUniqueId(&id));
    host_->broadcast(&id, sizeof id, 0);
    PARATWIN_NCCL_CHECK(ncclCommInitRank(&comm_, host_->size(), id, host_->rank()));
  }
  ~NcclCommunicator() override {
    cudaStreamSynchronize(stream_.get());
    ncclCommDestroy(comm_);
  }

  Handle start_allreduce_sum(float* data, size_t count) override {
    order_after_producer();
    PARATWIN_NCCL_CHECK(ncclAllReduce(data, data, count, ncclFloat, ncclSum, comm_, stream_.get()));
    return finish_start();
  }
  // Blocks of different sizes: one reduce per block to its owner, grouped into one launch.
  Handle start_reduce_scatter_sum(float* data, const std::vector<size_t>& counts) override {
    order_after_producer();
    PARATWIN_NCCL_CHECK(ncclGroupStart());
    size_t offset = 0;
    for (size_t r = 0; r < counts.size(); ++r) {
      if (counts[r] > 0)
        PARATWIN_NCCL_CHECK(ncclReduce(data + offset, data + offset, counts[r], ncclFloat, ncclSum, int(r),
                                       comm_, stream_.get()));
      offset += counts[r];
    }
    PARATWIN_NCCL_CHECK(ncclGroupEnd());
    return finish_start();
  }
  // Each block from its owner to everyone: one broadcast per block, grouped.
  Handle start_allgather(float* data, const std::vector<size_t>& counts) override {
    order_after_producer();
    PARATWIN_NCCL_CHECK(ncclGroupStart());
    size_t offset = 0;
    for (size_t r = 0; r < counts.size(); ++r) {
      if (counts[r] > 0)
        PARATWIN_NCCL_CHECK(
            ncclBroadcast(data + offset, data + offset, counts[r], ncclFloat, int(r), comm_, stream_.get()));
      offset += counts[r];
    }
    PARATWIN_NCCL_CHECK(ncclGroupEnd());
    return finish_start();
  }
  // NCCL matches a pair's sends and receives in the order they are issued, not by tag: the pipeline
  // issues them in the Program's order on both sides.
  Handle start_send(const float* data, size_t count, int peer, int) override {
    order_after_producer();
    PARATWIN_NCCL_CHECK(ncclSend(data, count, ncclFloat, peer, comm_, stream_.get()));
    return finish_start();
  }
  Handle start_recv(float* data, size_t count, int peer, int) override {
    order_after_producer();
    PARATWIN_NCCL_CHECK(ncclRecv(data, count, ncclFloat, peer, comm_, stream_.get()));
    return finish_start();
  }
  void allreduce_max(float* data, size_t count) override {
    order_after_producer();
    PARATWIN_NCCL_CHECK(ncclAllReduce(data, data, count, ncclFloat, ncclMax, comm_, stream_.get()));
    wait(finish_start());
  }
  bool test(Handle handle) override {
    auto it = done_.find(handle);
    if (it == done_.end()) return true;
    if (!it->second->done()) return false;
    done_.erase(it);
    return true;
  }
  void wait(Handle handle) override {
    auto it = done_.find(handle);
    if (it == done_.end()) return;
    it->second->synchronize();
    done_.erase(it);
  }
  std::unique_ptr<Communicator> split(int color) override {
    auto sub = host_->split(color);
    return sub ? std::make_unique<NcclCommunicator>(std::move(sub), producer_) : nullptr;
  }

 private:
  // The communication stream waits (on the GPU, not the host) for the compute stream's work so far.
  void order_after_producer() {
    ready_.record(producer_);
    ready_.make_wait(stream_.get());
  }
  Handle finish_start() {
    auto event = std::make_unique<Event>();
    event->record(stream_.get());
    done_.emplace(next_, std::move(event));
    return next_++;
  }

  cudaStream_t producer_;
  ncclComm_t comm_ = nullptr;
  Stream stream_;
  Event ready_;
  std::map<Handle, std::unique_ptr<Event>> done_;
  Handle next_ = 0;
};

class StagingCommunicator final : public HostDelegating {
 public:
  StagingCommunicator(std::unique_ptr<Communicator> host, cudaStream_t producer)
      : HostDelegating(std::move(host)), producer_(producer) {}

  Handle start_allreduce_sum(float* data, size_t count) override {
    Staged& s = stage(data, count);
    s.host_handle = host_->start_allreduce_sum(s.host.data(), count);
    return last_;
  }
  Handle start_reduce_scatter_sum(float* data, const std::vector<size_t>& counts) override {
    Staged& s = stage(data, total(counts));
    s.host_handle = host_->start_reduce_scatter_sum(s.host.data(), counts);
    return last_;
  }
  Handle start_allgather(float* data, const std::vector<size_t>& counts) override {
    Staged& s = stage(data, total(counts));
    s.host_handle = host_->start_allgather(s.host.data(), counts);
    return last_;
  }
  Handle start_send(const float* data, size_t count, int peer, int tag) override {
    Staged& s = stage(const_cast<float*>(data), count);
    s.device = nullptr;  // nothing comes back
    s.host_handle = host_->start_send(s.host.data(), count, peer, tag);
    return last_;
  }
  Handle start_recv(float* data, size_t count, int peer, int tag) override {
    Staged& s = stage(data, count);
    s.host_handle = host_->start_recv(s.host.data(), count, peer, tag);
    return last_;
  }
  void allreduce_max(float* data, size_t count) override {
    Staged& s = stage(data, count);
    host_->allreduce_max(s.host.data(), count);
    copy_back(staged_.find(last_));
  }
  bool test(Handle handle) override {
    auto it = staged_.find(handle);
    if (it == staged_.end()) return true;
    if (!host_->test(it->second.host_handle)) return false;
    copy_back(it);
    return true;
  }
  void wait(Handle handle) override {
    auto it = staged_.find(handle);
    if (it == staged_.end()) return;
    host_->wait(it->second.host_handle);
    copy_back(it);
  }
  std::unique_ptr<Communicator> split(int color) override {
    auto sub = host_->split(color);
    return sub ? std::make_unique<StagingCommunicator>(std::move(sub), producer_) : nullptr;
  }

 private:
  static size_t total(const std::vector<size_t>& counts) {
    size_t n = 0;
    for (size_t c : counts) n += c;
    return n;
  }
  struct Staged {
    float* device = nullptr;
    std::vector<float> host;
    Handle host_handle = 0;
  };
  Staged& stage(float* data, size_t count) {
    PARATWIN_CUDA_CHECK(cudaStreamSynchronize(producer_));  // the data is final
    Staged s;
    s.device = data;
    s.host.resize(count);
    if (count > 0)
      PARATWIN_CUDA_CHECK(cudaMemcpy(s.host.data(), data, count * sizeof(float), cudaMemcpyDeviceToHost));
    last_ = next_++;
    return staged_.emplace(last_, std::move(s)).first->second;
  }
  void copy_back(std::map<Handle, Staged>::iterator it) {
    const Staged& s = it->second;
    if (s.device && !s.host.empty())
      PARATWIN_CUDA_CHECK(
          cudaMemcpy(s.device, s.host.data(), s.host.size() * sizeof(float), cudaMemcpyHostToDevice));
    staged_.erase(it);
  }

  cudaStream_t producer_;
  std::map<Handle, Staged> staged_;
  Handle next_ = 0, last_ = 0;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> host,
                                                     cudaStream_t producer) {
  return std::make_unique<NcclCommunicator>(std::move(host), producer);
}

std::unique_ptr<Communicator> make_staging_communicator(std::unique_ptr<Communicator> host,
                                                        cudaStream_t producer) {
  return std::make_unique<StagingCommunicator>(std::move(host), producer);
}

std::unique_ptr<Communicator> make_gpu_communicator(Communicator& host, bool shared, cudaStream_t producer,
                                                    bool* uses_nccl) {
  const bool any_shared = host.allreduce_max(shared ? 1.0 : 0.0) > 0;
  auto own = host.split(0);
  if (uses_nccl) *uses_nccl = !any_shared;
  return any_shared ? make_staging_communicator(std::move(own), producer)
                    : make_nccl_communicator(std::move(own), producer);
}

}  // namespace paratwin::exec::cuda
