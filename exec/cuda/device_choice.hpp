// Which GPU a rank uses, and whether NCCL can connect the ranks: NCCL refuses two ranks on one
// device, so when a node runs more ranks than it has GPUs the ranks share them round-robin and their
// collectives go through MPI with host staging instead. Plain C++, tested without a GPU.
#pragma once

namespace paratwin::exec::cuda {

struct DeviceChoice {
  int device = 0;
  bool shared = false;  // another rank of this node uses the same device
};

// local_rank of local_size ranks on this node, device_count GPUs visible. Throws std::invalid_argument
// when there is no GPU or the ranks are inconsistent.
DeviceChoice choose_device(int local_rank, int local_size, int device_count);

// This rank's place on its node, from Open MPI's environment (OMPI_COMM_WORLD_LOCAL_RANK and
// _LOCAL_SIZE); 0 of 1 outside mpirun.
int local_rank_from_environment();
int local_size_from_environment();

}  // namespace paratwin::exec::cuda
