// A typed array in GPU memory, freed with its owner. Copies to and from the host are explicit and
// ordered on a stream.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "exec/cuda/check.hpp"

namespace paratwin::exec::cuda {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count) { resize(count); }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }

  // Reallocates (contents lost) when the count changes. Throws CudaError when GPU memory runs out.
  void resize(size_t count) {
    if (count == size_) return;
    release();
    if (count > 0) PARATWIN_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(T)));
    size_ = count;
  }
  void zero(cudaStream_t stream) {
    if (size_ > 0) PARATWIN_CUDA_CHECK(cudaMemsetAsync(data_, 0, size_ * sizeof(T), stream));
  }
  // Host -> device of host[0, count) into [offset, offset + count); the host memory must stay alive
  // until the stream reaches the copy (synchronize, or use pinned memory with care).
  void upload(const T* host, size_t count, cudaStream_t stream, size_t offset = 0) {
    PARATWIN_CUDA_CHECK(
        cudaMemcpyAsync(data_ + offset, host, count * sizeof(T), cudaMemcpyHostToDevice, stream));
  }
  // Device -> host, waiting for the stream (the values are there on return).
  void download(T* host, size_t count, cudaStream_t stream, size_t offset = 0) const {
    PARATWIN_CUDA_CHECK(
        cudaMemcpyAsync(host, data_ + offset, count * sizeof(T), cudaMemcpyDeviceToHost, stream));
    PARATWIN_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  std::vector<T> to_host(cudaStream_t stream) const {
    std::vector<T> out(size_);
    if (size_ > 0) download(out.data(), size_, stream);
    return out;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void release() {
    if (data_) cudaFree(data_);  // no check: destructors do not throw, and a freed pointer is gone anyway
    data_ = nullptr;
    size_ = 0;
  }
  T* data_ = nullptr;
  size_t size_ = 0;
};

// A CUDA stream and an event owned by RAII, for the compute and communication streams.
class Stream {
 public:
  Stream() { PARATWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  void synchronize() const { PARATWIN_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  explicit Event(bool timing = false) {
    PARATWIN_CUDA_CHECK(
        cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  ~Event() { cudaEventDestroy(event_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream) { PARATWIN_CUDA_CHECK(cudaEventRecord(event_, stream)); }
  // Work queued on `stream` after this call waits for what was recorded (no host wait).
  void make_wait(cudaStream_t stream) const { PARATWIN_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0)); }
  bool done() const {
    const cudaError_t err = cudaEventQuery(event_);
    if (err == cudaErrorNotReady) return false;
    PARATWIN_CUDA_CHECK(err);
    return true;
  }
  void synchronize() const { PARATWIN_CUDA_CHECK(cudaEventSynchronize(event_)); }
  // Milliseconds between `start` and this event, both recorded with timing on.
  float elapsed_ms_since(const Event& start) const {
    float ms = 0;
    PARATWIN_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
    return ms;
  }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace paratwin::exec::cuda
