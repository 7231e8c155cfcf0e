// Device assignment of the ranks of one node.
#include "exec/cuda/device_choice.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace paratwin::exec::cuda {

namespace {

int environment_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return *end == '\0' && x >= 0 ? int(x) : fallback;
}

}  // namespace

DeviceChoice choose_device(int local_rank, int local_size, int device_count) {
  if (device_count <= 0)
    throw std::invalid_argument("--backend cuda needs a GPU, and this machine shows none");
  if (local_size <= 0 || local_rank < 0 || local_rank >= local_size)
    throw std::invalid_argument("local rank " + std::to_string(local_rank) + " of " +
                                std::to_string(local_size) + " ranks on this node");
  return {local_rank % device_count, local_size > device_count};
}

int local_rank_from_environment() {
  return environment_int("OMPI_COMM_WORLD_LOCAL_RANK", 0);
}
int local_size_from_environment() {
  return environment_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
}

}  // namespace paratwin::exec::cuda
