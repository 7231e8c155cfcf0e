// Communicators over GPU memory (the Communicator interface, with device pointers in the start_*
// collectives): NCCL, bootstrapped through MPI, on a communication stream ordered after the compute
// stream by CUDA events; and MPI with host staging for ranks that share a GPU. Scalars, broadcasts of
// host data and gathers go through the host (MPI) communicator in both.
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "exec/comm/communicator.hpp"

namespace paratwin::exec::cuda {

// Collective over `host`'s ranks: rank 0 creates the NCCL unique id and broadcasts it through
// `host`. Collectives wait (on the GPU) for what `producer` (the compute stream) has queued when they
// start. Throws CudaError when NCCL cannot connect the ranks.
std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> host,
                                                     cudaStream_t producer);

// The host communicator's collectives on device data: each start copies the data to host memory (after
// the producer stream's work), runs the MPI collective, and copies the result back when it is tested
// done or waited for.
std::unique_ptr<Communicator> make_staging_communicator(std::unique_ptr<Communicator> host,
                                                        cudaStream_t producer);

// NCCL when every rank has a GPU of its own, else staging; decided together by all ranks of `host`
// (`shared`: this rank shares its GPU).
std::unique_ptr<Communicator> make_gpu_communicator(Communicator& host, bool shared, cudaStream_t producer,
                                                    bool* uses_nccl = nullptr);

}  // namespace paratwin::exec::cuda
