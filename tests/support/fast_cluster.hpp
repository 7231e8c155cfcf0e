// A cluster for tests whose communication is nearly free, so that timing is compute alone: one pool
// of `nodes` x 2 GPUs of 100 TFLOP/s bf16 at GEMM efficiency 0.5, no launch cost, and
// `memory_bandwidth` (a huge one makes every kernel compute-bound).
#pragma once

#include <string>

namespace paratwin_test {

inline std::string fast_cluster(int nodes = 2, const std::string& memory_bandwidth = "2000GBps") {
  return R"(
cluster:
  name: fast
  devices:
    gpu: {peak: {bf16: 100Tflops}, memory: 80GiB, memory_bandwidth: )" +
         memory_bandwidth + R"(,
          efficiency: {gemm: 0.5, memory: 0.5, kernel_launch: 0us}}
  pools:
    main:
      device: gpu
      nodes: )" +
         std::to_string(nodes) +
         R"(
      gpus_per_node: 2
      intra_node: {kind: nvswitch, bandwidth: 1000000TBps, latency: 0us}
      nic: {kind: infiniband, count: 8, bandwidth: 8000000Tbps, latency: 0us}
      pcie_bandwidth: 1000000TBps
      host_memory: 1TiB
      price_per_gpu_hour: $1
  network: {topology: fat_tree, switch_latency: 0us}
)";
}

}  // namespace paratwin_test
