// The messages of CudaError: what failed, where, and what usually causes it.
#include "exec/cuda/check.hpp"

namespace paratwin::exec::cuda {

namespace {

std::string where(const char* call, const char* file, int line) {
  return std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: ";
}

const char* cuda_hint(cudaError_t err) {
  switch (err) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return "no usable GPU: check nvidia-smi, the driver version and CUDA_VISIBLE_DEVICES";
    case cudaErrorMemoryAllocation:
      return "out of GPU memory: lower plan.micro_batch or training.seq_len, or use more ranks";
    case cudaErrorInvalidConfiguration:
    case cudaErrorInvalidValue:
      return "a launch configuration or argument is out of range: a bug in the launcher, please report it";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
      return "a kernel read or wrote out of bounds: rerun under compute-sanitizer to find which";
    case cudaErrorNoKernelImageForDevice:
      return "this GPU's architecture was not compiled in: reconfigure with -DCMAKE_CUDA_ARCHITECTURES=<sm>";
    default:
      return "see the CUDA runtime documentation for this error";
  }
}

const char* cublas_hint(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "no cuBLASLt algorithm for these shapes, types or alignments (leading dimensions of bf16 "
             "matrices should be multiples of 8)";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "out of GPU memory for cuBLASLt's workspace";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "a matrix layout does not fit its shape: a bug in the GEMM description, please report it";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "cuBLASLt could not start: check that a GPU is visible";
    default:
      return "see the cuBLAS documentation for this status";
  }
}

const char* nccl_hint(ncclResult_t result) {
  switch (result) {
    case ncclInvalidUsage:
      return "NCCL refuses this use; two ranks on one GPU cannot share an NCCL communicator (the MPI "
             "communicator with host staging is used then)";
    case ncclSystemError:
      return "a system call failed: check shared memory (/dev/shm) and the network interfaces "
             "(NCCL_SOCKET_IFNAME)";
    case ncclRemoteError:
      return "another rank failed or went away";
    default:
      return "rerun with NCCL_DEBUG=INFO for details";
  }
}

}  // namespace

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  throw CudaError(where(call, file, line) + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) +
                  "); hint: " + cuda_hint(err));
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw CudaError(where(call, file, line) + "cuBLAS status " + std::to_string(int(status)) + " (" +
                  cublasLtGetStatusString(status) + "); hint: " + cublas_hint(status));
}

void throw_nccl_error(ncclResult_t result, const char* call, const char* file, int line) {
  throw CudaError(where(call, file, line) + ncclGetErrorString(result) + "; hint: " + nccl_hint(result));
}

}  // namespace paratwin::exec::cuda
