// Fitting a cluster's efficiency figures to what live runs measured: each figure is fitted against
// exactly the work the cost model divides by it (plan/cost/compute.hpp, collectives.hpp), task by task.
//
//   measured (per task)               model term                       figure
//   time inside dense GEMMs           (gemm - attention FLOPs) / rate  efficiency.gemm x peak
//   time inside attention's products  attention FLOPs / rate           efficiency.attention x peak
//   the rest of a forward or backward elementwise bytes / bandwidth    efficiency.memory x memory_bandwidth
//                                     + launches x kernel_launch       efficiency.kernel_launch
//   the optimizer step                optimizer bytes / bandwidth      efficiency.optimizer x memory bw
//   a collective inside one node      steps x latency + bytes / busbw  intra_node.latency, allreduce_busbw
//   a collective across nodes         the model's algorithm, linear    nic.latency, nic.achievable
//                                     in latency and 1 / bandwidth     (plan/calibrate/inter_host_fit.hpp)
//
// A figure that the profiles do not determine (no such work, or two figures whose work is in the same
// proportion in every task) keeps the cluster's value and says so.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "plan/calibrate/kernel_variability.hpp"
#include "plan/calibrate/profile.hpp"

namespace paratwin {

struct FittedFigure {
  std::string field;     // dotted path in the cluster file ("devices.cpu-core.efficiency.gemm")
  std::string what;      // "dense GEMMs"
  std::string measured;  // the fitted rate in words ("131.2 GFLOP/s"), or why it was kept
  bool fitted = false;
  int samples = 0;          // tasks it was fitted on
  double rms_residual = 0;  // relative, of those tasks' terms against their measurements; < 0: no fit
                            // to task times (a spread measured directly)
};

// "dense GEMMs                  96.8 GFLOP/s  (4 samples, rms residual 1.8%)"
std::string to_text(const FittedFigure& figure);

// One measured task against the calibrated cost model.
struct TaskResidual {
  std::string profile, task;
  double measured_s = 0;   // compute: CPU time; collective: the transfer alone
  double predicted_s = 0;  // task_duration_s on the calibrated cluster
};

struct Calibration {
  ClusterSpec cluster;  // the input cluster with the fitted figures
  std::string device, pool;
  std::vector<FittedFigure> figures;
  std::vector<TaskResidual> tasks;
  std::vector<std::string> notes;  // peaks raised to what was measured, and the like
  KernelVariability variability;   // the spread of kernel times from step to step (profiles only)
  // The microbenchmark files it was fitted to besides profiles, one line each ("all_gather.out:
  // nccl-tests all_gather, 8 ranks on 1 host (NVIDIA H100 80GB HBM3), 33 sizes").
  std::vector<std::string> inputs;
};

// A calibration of `cluster` with nothing fitted yet, for microbenchmarks alone: of pool `pool`, or of
// the cluster's only pool when `pool` is empty. Throws InputError naming the pools when `pool` is not
// one of them or is needed to choose.
Calibration start_calibration(const ClusterSpec& cluster, const std::string& pool);

// Adds `figure` to `calibration.figures`, replacing an earlier one of the same field: a figure fitted
// from microbenchmarks replaces the same figure fitted from profiles.
void set_figure(Calibration& calibration, FittedFigure figure);

// Fits `cluster` (the cluster as given, not resized) to the runs, which must have run on one device
// type of it. Throws InputError when they ran on different device types or pools, or measured no
// compute task at all.
Calibration calibrate(const std::vector<ProfiledRun>& runs, const ClusterSpec& cluster);

// The calibrated cluster file: a header saying from which profiles and when, the fitted figures with
// their residuals and the per-task comparison, then the cluster with a comment beside each figure.
std::string calibrated_cluster_yaml(const Calibration& calibration, const std::vector<ProfiledRun>& runs,
                                    const std::string& cluster_argument, const std::string& timestamp);

}  // namespace paratwin
