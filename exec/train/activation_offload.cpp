// The copy stream and the activation copies between the working set and host buffers (see
// activation_offload.hpp).
#include "exec/train/activation_offload.hpp"

#include <stdexcept>
#include <string>

#include "exec/memory/memory_meter.hpp"

namespace paratwin::exec {

CopyStream::CopyStream() : thread_([this] { run(); }) {}

CopyStream::~CopyStream() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

int CopyStream::submit(std::function<void()> copy) {
  int ticket = 0;
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(copy));
    ticket = submitted_++;
  }
  changed_.notify_all();
  return ticket;
}

bool CopyStream::done(int ticket) {
  std::lock_guard lock(mutex_);
  if (error_) std::rethrow_exception(error_);
  return completed_ > ticket;
}

void CopyStream::wait(int ticket) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return completed_ > ticket || error_; });
  if (error_) std::rethrow_exception(error_);
}

void CopyStream::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, everything submitted done
    std::function<void()> copy = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    std::exception_ptr error;
    try {
      copy();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error && !error_) error_ = error;
    ++completed_;
    changed_.notify_all();
  }
}

namespace {

// A MoE layer's routing and its experts' rows (the index vectors stay: they are small).
void append_moe(MoeActivations<float>& m, std::vector<Buffer<float>*>& out) {
  for (Buffer<float>* b : {&m.probs, &m.gates, &m.x, &m.fc, &m.fc_act, &m.y}) out.push_back(b);
}

}  // namespace

std::vector<Buffer<float>*> kept_buffers(ChunkActivations& a) {
  std::vector<Buffer<float>*> out{&a.residual, &a.mid,      &a.ln1,      &a.ln1_mean, &a.ln1_rstd,
                                  &a.qkv,      &a.att,      &a.attn_out, &a.ln2,      &a.ln2_mean,
                                  &a.ln2_rstd, &a.fc,       &a.fc_act,   &a.kv,       &a.lnf,
                                  &a.lnf_mean, &a.lnf_rstd, &a.probs,    &a.losses,   &a.recomputed_out};
  for (MoeActivations<float>& m : a.moe) append_moe(m, out);
  return out;
}

int ActivationOffload::to_host(int microbatch, int chunk, std::vector<Buffer<float>*> buffers) {
  Away& away = away_[{microbatch, chunk}];
  if (!away.device.empty())
    throw std::logic_error("the activations of micro-batch " + std::to_string(microbatch) + ", chunk " +
                           std::to_string(chunk) + " are offloaded twice");
  away.device = std::move(buffers);
  return stream_.submit([&away] {
    away.host.resize(away.device.size());
    {
      MemoryUseScope use(MemoryUse::Host);
      for (size_t i = 0; i < away.device.size(); ++i)
        away.host[i].assign(away.device[i]->begin(), away.device[i]->end());
    }
    for (Buffer<float>* b : away.device) Buffer<float>().swap(*b);
  });
}

int ActivationOffload::to_device(int microbatch, int chunk) {
  auto it = away_.find({microbatch, chunk});
  if (it == away_.end() || it->second.device.empty())
    throw std::logic_error("the activations of micro-batch " + std::to_string(microbatch) + ", chunk " +
                           std::to_string(chunk) + " come back without having been offloaded");
  Away& away = it->second;
  return stream_.submit([&away] {
    {
      MemoryUseScope use(MemoryUse::Activations);
      for (size_t i = 0; i < away.device.size(); ++i)
        away.device[i]->assign(away.host[i].begin(), away.host[i].end());
    }
    std::vector<Buffer<float>>().swap(away.host);
    away.device.clear();
  });
}

}  // namespace paratwin::exec
