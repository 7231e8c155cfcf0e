// A cluster as the catalog's topology files describe it: device types, node pools, the network
// between nodes, storage, prices and power. Several pools make a heterogeneous cluster.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "plan/spec/diagnostics.hpp"
#include "plan/spec/doc.hpp"
#include "plan/spec/reader.hpp"
#include "plan/spec/units.hpp"

namespace paratwin {

enum class Precision { Fp32, Tf32, Fp16, Bf16, Fp8 };
extern const EnumNames<Precision> kPrecisionNames;

// What kernels reach of the datasheet peaks; measured figures, refined by `paratwin calibrate`.
struct EfficiencySpec {
  double gemm = 0.8;               // largest GEMM throughput / dense peak: the cap of every GEMM
  std::optional<double> gemm_fp8;  // the same for fp8 GEMMs / the fp8 peak; gemm if absent
  // What each output tile of a GEMM spends outside its main loop (filling the operand pipeline,
  // writing the result), in k-steps of the loop: a tile's time is (K / k_step + gemm_tile_k_steps)
  // k-steps, so a GEMM runs at K / (K + gemm_tile_k_steps x k_step) of its main loop's rate
  // (plan/cost/compute.hpp, gemm_k_share). 0: not modelled. gemm and gemm_fp8 are then the main
  // loop's shares, derived from the measured GEMM at its K.
  double gemm_tile_k_steps = 0;
  std::optional<double> attention;  // unfused attention's score and value products / dense peak;
                                    // costed by shape as other GEMMs if absent
  // Fused attention kernels (flash2, flash3, triton): executed FLOPs / dense 16-bit peak, in
  // FlashAttention's benchmark convention (causal masks halve the FLOPs; the backward does 2.5x the
  // forward's).
  struct FusedRates {
    double forward = 0, backward = 0;
    // The same kernel without a mask (context parallelism's ring blocks past the first); the causal
    // figures where absent.
    std::optional<double> forward_full, backward_full;
  };
  // The kernel's rates rise with the key length (fewer block rows' prologues and epilogues, a smaller
  // share of masked diagonal blocks): the figures above hold at seq_len; by_seq_len lists the same
  // kernel's figures at other key lengths (plan/cost/fused_attention_rate.hpp interpolates them).
  struct FusedCurve : FusedRates {
    int seq_len = 0;  // 0: the figures hold at every key length
    std::map<int, FusedRates> by_seq_len;
  };
  // The rates also differ by head size (a tile of 64-wide heads does half the math against the same
  // softmax, which nets out differently by kernel: FlashAttention 2 slower, the Triton kernel faster
  // at short keys): the curve above is for heads of head_dim; by_head_dim gives the same kernel's
  // curve at other head sizes, each the size the kernel computes at (fused_kernel_head_dim). A head
  // size with no curve of its own takes the one above.
  struct FusedAttention : FusedCurve {
    int head_dim = 0;  // 0: the figures hold at every head size
    std::map<int, FusedCurve> by_head_dim;
  };
  std::optional<FusedAttention> flash2, flash3;
  // The Triton FlashAttention kernel (training.attention: triton), in the same convention.
  std::optional<FusedAttention> triton;
  double memory = 0.8;              // memory-bound kernels' share of memory bandwidth
  std::optional<double> optimizer;  // the optimizer step's share of memory bandwidth; memory if absent
  // Normalization kernels' share (LayerNorm, fused RMSNorm: a reduction over each row, then a pass
  // that writes it), which reach less of the bandwidth than elementwise kernels; memory if absent.
  std::optional<double> norm;
  // Eager PyTorch's composite RMSNorm (ATen's casts, pow, mean and broadcast products, forward with its
  // autograd backward) over the bytes the twin counts for it; memory if absent.
  std::optional<double> eager_norm;
  // A gated activation's share (SwiGLU, GEGLU) where it reads the two halves of one GEMM's output,
  // the fused gate and up projection (Megatron-Core's), in strided rows; memory if absent.
  std::optional<double> gated;
  // The unfused attention core's memory-bound kernels over the s x s scores (mask, softmax, dropout,
  // ALiBi's bias, and their backward): where a head's scores stay in a cache (a CPU core's, at short
  // sequences) they run faster than kernels that stream activations; memory if absent.
  std::optional<double> scores;
  Seconds kernel_launch{5e-6};  // fixed cost per kernel
  // What each kernel costs more when its launch waits for it to end (training.launch_blocking): the
  // host's wake-up after the kernel, its dispatch of the next operation and the launch, all hidden
  // while launches run ahead of the device. 10 us on A100 (topologies/dgx-a100-80g.yaml has the
  // measurements).
  Seconds synchronous_launch{10e-6};

  double attention_or_gemm() const { return attention.value_or(gemm); }
  double optimizer_or_memory() const { return optimizer.value_or(memory); }
  // The share of memory-bound kernels of the kind whose own share is `kind` (one of kMemoryShares;
  // nullptr: elementwise kernels), memory if it has none.
  double memory_share(std::optional<double> EfficiencySpec::*kind) const {
    return kind ? (this->*kind).value_or(memory) : memory;
  }
};

// The kinds of memory-bound kernel with a share of the bandwidth of their own, by their key in a device
// file's efficiency: the one list that reading, writing and calibrating them go through.
inline constexpr std::pair<const char*, std::optional<double> EfficiencySpec::*> kMemoryShares[] = {
    {"norm", &EfficiencySpec::norm},
    {"eager_norm", &EfficiencySpec::eager_norm},
    {"gated", &EfficiencySpec::gated},
    {"scores", &EfficiencySpec::scores}};

struct DeviceSpec {
  std::string name;
  std::map<Precision, FlopsPerSecond> peak;  // dense, no sparsity
  Bytes memory;
  BytesPerSecond memory_bandwidth;
  Watts power;
  // Streaming multiprocessors (compute units): GEMMs run in waves of one tile per SM, so a GEMM whose
  // tiles do not fill the last wave wastes the rest of it. 0: no wave quantization (CPU cores).
  int sms = 0;
  // How much GPUs of this model differ in sustained speed (chip-to-chip and power-management
  // variation): the coefficient of variation of one GPU's kernel times across GPUs, each GPU keeping
  // its own factor. A job computes at the pace of its slowest GPU (plan/cost/slowest_gpu.hpp). 0: all
  // equal.
  double speed_cv = 0;
  EfficiencySpec efficiency;
};
// The largest speed_cv a device file takes (and calibration writes).
inline constexpr double kMostSpeedCv = 0.5;

enum class FabricKind { NvSwitch, NvLink, Pcie, InfinityFabric, SharedMemory };
extern const EnumNames<FabricKind> kFabricKindNames;

// Bus bandwidth a collective reaches by message size, as nccl-tests measures it (busbw: algbw x
// 2(n-1)/n for all-reduce, x (n-1)/n for all-gather and reduce-scatter, whose size is the whole
// buffer). Points sorted by size; between them busbw is interpolated on log-log axes, below the
// first the time stays the first point's (latency-bound), above the last busbw stays the last's.
struct BusbwCurve {
  std::vector<std::pair<Bytes, BytesPerSecond>> points;
  BytesPerSecond at(Bytes size) const;
};

// The GPU-to-GPU fabric inside a node; bandwidth is per GPU and direction.
struct IntraNodeSpec {
  FabricKind kind = FabricKind::NvSwitch;
  BytesPerSecond bandwidth;
  Seconds latency{1e-6};
  std::optional<BytesPerSecond> allreduce_busbw;  // measured (nccl-tests busbw), when known
  bool sharp = false;                             // in-switch reduction (NVLink SHARP)
  // Measured curves of the node's GPUs (all of them in one group), by collective; where one is
  // given, it sets the time of that collective inside a node at every size.
  std::optional<BusbwCurve> all_reduce_curve, all_gather_curve, reduce_scatter_curve;
};

enum class NicKind { InfiniBand, RoCE, Ethernet };
extern const EnumNames<NicKind> kNicKindNames;

struct NicSpec {
  NicKind kind = NicKind::InfiniBand;
  int count = 1;                             // per node
  BytesPerSecond bandwidth;                  // per NIC and direction (line rate)
  std::optional<BytesPerSecond> achievable;  // measured through NCCL, when known
  Seconds latency{2e-6};
};

struct PoolSpec {
  std::string name;
  std::string device;  // a key of ClusterSpec::devices
  int nodes = 1;
  int gpus_per_node = 1;
  IntraNodeSpec intra_node;
  NicSpec nic;
  BytesPerSecond pcie_bandwidth;  // GPU to host, per GPU and direction
  Bytes host_memory;
  // SMs a GPU's communication kernels hold while they run (NCCL runs one CTA per channel and never
  // shares an SM with a compute kernel): compute beside a collective gets the device's other SMs, and
  // collectives that run at once each hold their own. comm_sms: a collective across nodes, and a
  // send; comm_sms_in_node: a collective whose group sits in one node, whose NVLink rings NCCL runs on
  // more channels (comm_sms where 0). 0 for both: communication takes no compute from the GPU.
  int comm_sms = 0;
  int comm_sms_in_node = 0;
  std::optional<Dollars> price_per_gpu_hour;
  Watts node_power;  // beyond the GPUs: CPUs, NICs, fans

  int gpus() const { return nodes * gpus_per_node; }
};

enum class NetworkTopology { Star, FatTree, RailOptimized };
extern const EnumNames<NetworkTopology> kNetworkTopologyNames;

struct NetworkSpec {
  NetworkTopology topology = NetworkTopology::FatTree;
  double oversubscription = 1.0;  // above a pod (or above the leaves without pods); 2 means 2:1
  std::optional<int> pod_gpus;    // GPUs per full-bisection pod
  int gpus_per_leaf = 0;          // GPUs under one leaf/top-of-rack switch; 0: one node
  Seconds switch_latency{1e-6};
};

// Large enough for any cluster built so far, small enough that GPU counts fit an int.
constexpr int kMaxClusterGpus = 1 << 24;

struct ClusterSpec {
  std::string name;
  std::string description;
  std::map<std::string, DeviceSpec> devices;
  std::vector<PoolSpec> pools;  // in file order
  NetworkSpec network;
  BytesPerSecond storage_bandwidth;
  double pue = 1.0;  // data-centre power usage effectiveness, for energy

  int gpus() const;
  const DeviceSpec& device_of(const PoolSpec& pool) const { return devices.at(pool.device); }
  // The pool of that name; asking for one the cluster lacks is a programming error (std::logic_error).
  const PoolSpec& pool_named(const std::string& name) const;
  PoolSpec& pool_named(const std::string& name);
  bool homogeneous() const { return pools.size() == 1; }
  // Sum of the pools' dense peaks at `precision` (0 for devices without it).
  FlopsPerSecond peak(Precision precision) const;
  Bytes device_memory() const;
};

// Parses a cluster mapping. A top-level `nodes` resizes a cluster of one pool.
ClusterSpec parse_cluster(const DocNode& node, const std::string& path, Diagnostics& diag,
                          FieldLocations* locations = nullptr);

// The cluster as a cluster file that parse_cluster reads back to the same figures (to 10 significant
// digits). `comments` are written beside the fields they are keyed by, as dotted paths
// ("devices.a100.efficiency.gemm", "pools.dgx.intra_node.latency").
std::string to_yaml(const ClusterSpec& cluster, const std::map<std::string, std::string>& comments = {});

}  // namespace paratwin
