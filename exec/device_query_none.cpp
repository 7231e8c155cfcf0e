// Built when the CUDA toolkit is absent: the CUDA backend is not available.
#include "exec/backend_info.hpp"

namespace paratwin::exec {

CudaDevices query_cuda_devices() {
  return {false, 0, "CUDA backend not built (no CUDA toolkit at configure time)"};
}

}  // namespace paratwin::exec
