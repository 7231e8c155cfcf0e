// What the live backends can use on this machine: the MPI library, CUDA devices.
#pragma once

#include <string>

namespace paratwin::exec {

// The MPI library the live backend is built against, e.g. "Open MPI 4.1.4 (MPI 3.1)".
std::string mpi_library_version();

struct CudaDevices {
  bool built = false;  // the CUDA backend was compiled in
  int count = 0;       // GPUs visible now
  std::string detail;  // driver/runtime versions and device names, or why there are none
};

CudaDevices query_cuda_devices();

}  // namespace paratwin::exec
