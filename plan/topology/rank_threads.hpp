// A rank of a live CPU run is a device of its cluster that runs on `threads` cores: a CPU topology
// (local-cpu) describes one core as its device, and a rank with T threads is T of them. The live run
// (its twin's prediction) and `paratwin calibrate` (reading a profile's threads per rank) both size the
// devices this way.
#pragma once

#include "plan/spec/cluster.hpp"

namespace paratwin {

// Whether a pool's devices are CPU cores: its devices share one memory (the intra-node fabric).
bool is_cpu_pool(const PoolSpec& pool);

// Multiplies the peaks, memory and memory bandwidth of the device types of every CPU pool by `threads`
// (the cores of one rank); threads of 1 or less change nothing.
void scale_cpu_devices(ClusterSpec& cluster, int threads);

}  // namespace paratwin
