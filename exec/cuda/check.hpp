// Error checks for CUDA, cuBLASLt and NCCL calls: a failed call throws CudaError naming the call, the
// file and line, the library's message and a hint at the usual cause. Library code never exit()s.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <stdexcept>
#include <string>

namespace paratwin::exec::cuda {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Builds the message and throws; out of line so that the macros stay small.
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line);
[[noreturn]] void throw_nccl_error(ncclResult_t result, const char* call, const char* file, int line);

}  // namespace paratwin::exec::cuda

#define PARATWIN_CUDA_CHECK(call)                                                         \
  do {                                                                                    \
    const cudaError_t paratwin_err_ = (call);                                             \
    if (paratwin_err_ != cudaSuccess)                                                     \
      ::paratwin::exec::cuda::throw_cuda_error(paratwin_err_, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: a bad launch configuration shows here, at once; a fault inside the kernel
// shows at the next synchronizing call.
#define PARATWIN_CUDA_CHECK_LAUNCH(kernel_name)                                                              \
  do {                                                                                                       \
    const cudaError_t paratwin_err_ = cudaGetLastError();                                                    \
    if (paratwin_err_ != cudaSuccess)                                                                        \
      ::paratwin::exec::cuda::throw_cuda_error(paratwin_err_, "launch of " kernel_name, __FILE__, __LINE__); \
  } while (0)

#define PARATWIN_CUBLAS_CHECK(call)                                                            \
  do {                                                                                         \
    const cublasStatus_t paratwin_status_ = (call);                                            \
    if (paratwin_status_ != CUBLAS_STATUS_SUCCESS)                                             \
      ::paratwin::exec::cuda::throw_cublas_error(paratwin_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define PARATWIN_NCCL_CHECK(call)                                                            \
  do {                                                                                       \
    const ncclResult_t paratwin_result_ = (call);                                            \
    if (paratwin_result_ != ncclSuccess)                                                     \
      ::paratwin::exec::cuda::throw_nccl_error(paratwin_result_, #call, __FILE__, __LINE__); \
  } while (0)
