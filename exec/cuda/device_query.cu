// Lists the CUDA devices visible to this process; no device is a normal answer, not an error.
#include <cuda_runtime.h>
#include <nccl.h>

#include "exec/backend_info.hpp"

namespace paratwin::exec {

CudaDevices query_cuda_devices() {
  CudaDevices out{true, 0, ""};
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  int nccl = 0;
  ncclGetVersion(&nccl);
  const std::string versions = "CUDA runtime " + std::to_string(runtime / 1000) + "." +
                               std::to_string(runtime % 1000 / 10) + ", NCCL " + std::to_string(nccl);
  const cudaError_t err = cudaGetDeviceCount(&out.count);
  if (err != cudaSuccess) {
    out.count = 0;
    out.detail = versions + "; no usable GPU: " + cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return out;
  }
  out.detail = versions;
  for (int d = 0; d < out.count; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) == cudaSuccess) out.detail += "; GPU " + std::to_string(d) + ": " + prop.name;
  }
  return out;
}

}  // namespace paratwin::exec
