// The byte counter behind exec::Buffer: a mutex-guarded tally (buffers are allocated per pass at
// most, not per element, so the lock costs nothing measurable).
#include "exec/memory/memory_meter.hpp"

#include <malloc.h>

#include <mutex>

namespace paratwin::exec {

namespace {

std::mutex meter_mutex;
MemoryReading meter;
thread_local MemoryUse use_in_scope = MemoryUse::Other;

// A micro-batch's activations are freed after its backward and allocated again by the next forward.
// By default glibc hands blocks that large back to the kernel (munmap, heap trimming) and the next
// allocation faults in fresh zeroed pages: measured, a tiny-gpt forward took 6x its CPU time. Blocks
// up to 32 MiB (glibc's limit for this setting) stay in the heap for reuse instead.
[[maybe_unused]] const bool heap_keeps_freed_buffers = [] {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  return true;
}();

}  // namespace

const char* memory_use_name(MemoryUse use) {
  static const char* const names[] = {"other",       "parameters",    "gradients", "optimizer",
                                      "activations", "communication", "host"};
  return names[size_t(use)];
}

MemoryReading read_memory() {
  std::lock_guard lock(meter_mutex);
  return meter;
}

void reset_memory_peak() {
  std::lock_guard lock(meter_mutex);
  meter.device_peak = meter.device;
  meter.at_peak = meter.current;
  meter.host_peak = meter.current[size_t(MemoryUse::Host)];
}

MemoryUseScope::MemoryUseScope(MemoryUse use) : previous_(use_in_scope) {
  use_in_scope = use;
}
MemoryUseScope::~MemoryUseScope() {
  use_in_scope = previous_;
}

namespace memory_meter {

MemoryUse current_use() {
  return use_in_scope;
}

void allocated(MemoryUse use, size_t bytes) {
  std::lock_guard lock(meter_mutex);
  meter.current[size_t(use)] += int64_t(bytes);
  if (use == MemoryUse::Host) {
    if (meter.current[size_t(use)] > meter.host_peak) meter.host_peak = meter.current[size_t(use)];
    return;
  }
  meter.device += int64_t(bytes);
  if (meter.device > meter.device_peak) {
    meter.device_peak = meter.device;
    meter.at_peak = meter.current;
  }
}

void freed(MemoryUse use, size_t bytes) {
  std::lock_guard lock(meter_mutex);
  meter.current[size_t(use)] -= int64_t(bytes);
  if (use != MemoryUse::Host) meter.device -= int64_t(bytes);
}

}  // namespace memory_meter

}  // namespace paratwin::exec
