// Counts the bytes this process holds in the live engine's buffers (every exec::Buffer), by what they
// hold: the measured memory of a rank that `paratwin run` reports beside the twin's prediction. A
// buffer is charged to the use in scope on its thread when it is allocated (MemoryUseScope), and
// given back to that use when it is freed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace paratwin::exec {

enum class MemoryUse { Other, Parameters, Gradients, Optimizer, Activations, Communication, Host, Count };
inline constexpr size_t kMemoryUses = size_t(MemoryUse::Count);
const char* memory_use_name(MemoryUse use);  // "parameters", "gradients", ...

struct MemoryReading {
  std::array<int64_t, kMemoryUses> current{};  // bytes held now, by use
  std::array<int64_t, kMemoryUses> at_peak{};  // by use, when the device total last peaked
  int64_t device = 0;                          // held now, all uses but Host
  int64_t device_peak = 0;                     // the most ever held since reset_peak()
  int64_t host_peak = 0;                       // the most held in Host buffers since reset_peak()
};

// Process-wide (one rank per process under mpirun); thread safe.
MemoryReading read_memory();
void reset_memory_peak();  // the peaks restart from what is held now

// Charges the buffers allocated on this thread while it lives to `use` (restores the previous use).
class MemoryUseScope {
 public:
  explicit MemoryUseScope(MemoryUse use);
  ~MemoryUseScope();
  MemoryUseScope(const MemoryUseScope&) = delete;
  MemoryUseScope& operator=(const MemoryUseScope&) = delete;

 private:
  MemoryUse previous_;
};

namespace memory_meter {
MemoryUse current_use();
void allocated(MemoryUse use, size_t bytes);
void freed(MemoryUse use, size_t bytes);
}  // namespace memory_meter

}  // namespace paratwin::exec
