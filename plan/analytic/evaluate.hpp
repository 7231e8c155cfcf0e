// The analytic evaluator: the Program's critical path with every task costed by the cost model,
// streams running their tasks in order and overlapping each other, and no contention (every flow
// has its links to itself). Fast enough for the optimizer; the simulator adds contention and faults.
#pragma once

#include <vector>

#include "plan/ir/program.hpp"

namespace paratwin {

struct TaskTiming {
  double start_s = 0;
  double end_s = 0;
};

// Where one role's iteration time goes. Communication totals are stream busy time; exposed_comm_s
// is the part of it during which the compute stream is idle; bubble_s is the idle rest.
struct TimeBreakdown {
  double compute_s = 0;  // forward and backward
  double recompute_s = 0;
  double optimizer_s = 0;
  double tp_comm_s = 0;  // TP, CP and EP collectives
  double pp_comm_s = 0;  // pipeline transfers
  double dp_comm_s = 0;  // gradient buckets, ZeRO gathers, tied-embedding gradients
  double offload_s = 0;  // host copies
  double exposed_comm_s = 0;
  double bubble_s = 0;
  // compute_s + recompute_s by kind of kernel: each task's time shared out as its kernels' costed
  // times are (cost::kernel_times), so for timings simulated or measured the twin's split of them.
  cost::KernelTimes kernels;
};

struct RoleEvaluation {
  std::vector<TaskTiming> tasks;  // by task index
  double end_s = 0;
  TimeBreakdown breakdown;
  Bytes activations_peak;  // most activation memory held at once
  Bytes peak_memory;       // model states + buffers + activations at their peak
  Bytes capacity;
};

struct Evaluation {
  double iteration_time_s = 0;
  std::vector<RoleEvaluation> roles;
  int critical_role = 0;  // the role that finishes last
  Flops hardware_flops;   // executed by all ranks, recompute included
  FlopsPerSecond peak;    // of the ranks the plan uses, at the training precision
  // Compute's time against one GPU's nominal speed on the critical role's pool: the job's expected
  // slowest GPU where the timings assumed it (task_durations); 1 for timings measured or drawn.
  double compute_pace = 1;
};

// Duration of one task on one GPU of its role's hardware at the device's nominal speed (a receive
// takes no time of its own: it ends with its send).
double task_duration_s(const Task& task, const PoolSpec& pool, const ClusterSpec& cluster,
                       Precision precision);

Evaluation evaluate(const Program& program, const ClusterSpec& cluster, const TrainingSpec& training);

// Every task's duration on its role's hardware, alone (no communication beside it): [role][task].
// Compute runs at the pace of the job's expected slowest GPU (cost::expected_slowest over the
// Program's world at the device's speed_cv); `at_slowest_gpu` false: at the nominal speed, for a
// simulation that draws each GPU's own factor instead (variability.ranks).
std::vector<std::vector<double>> task_durations(const Program& program, const ClusterSpec& cluster,
                                                const TrainingSpec& training);
std::vector<std::vector<double>> task_durations(const Program& program, const ClusterSpec& cluster,
                                                const TrainingSpec& training, bool at_slowest_gpu);
// The pace of a role's compute tasks in task_durations: cost::expected_slowest over the Program's world
// at the role's device's speed_cv.
double compute_pace(const Program& program, const ClusterSpec& cluster, const Role& role);

// The share of a device's SMs a task's communication kernels hold while they run: the task's own
// Task::sms where lowering set it (TP overlap's transfers), else the pool's comm_sms_in_node for a
// collective whose group sits in one node, else (sends too) comm_sms, of DeviceSpec::sms; 0 for a task
// that runs none (only collectives and sends off the compute stream do) or when the figures are not
// given. Compute beside communication progresses at 1 - the sum of the shares of the kernels running.
double comm_sm_share(const Task& task, const PoolSpec& pool, const DeviceSpec& device);
// The least share any NCCL collective on `pool` holds (the smaller of comm_sms and comm_sms_in_node):
// what the optimizer's bounds may charge compute for each second a collective runs beside it.
double least_collective_sm_share(const PoolSpec& pool, const DeviceSpec& device);
// The most of a GPU's SMs the communication kernels running at once are taken to hold (the simulator:
// at each instant; the analytic evaluator: over each compute task's span): a guard, not a measurement.
// Their sum passes it only with more collectives in flight than frameworks run (four streams of
// one-node collectives on a 108-SM A100 hold 0.89), and compute must keep progressing.
inline constexpr double kMostHeldSms = 0.9;

// The list schedule alone, timings[role][task]: what evaluate() summarizes. Compute that overlaps its
// rank's communication is slowed by the kernels' comm_sm_share while it does (iterated to a fixed point). The
// optimizer reads the iteration time and memory from it and summarizes only the plans that can still enter
// its top list.
std::vector<std::vector<TaskTiming>> schedule_tasks(const Program& program, const ClusterSpec& cluster,
                                                    const TrainingSpec& training);

// Most activation memory a role holds at once under the timings (frees before allocations at the
// same instant), and its peak: model states + buffers + that.
Bytes activations_peak(const Role& role, const std::vector<TaskTiming>& timings);
Bytes peak_memory(const Role& role, Bytes activations_peak);

// Breakdown, memory peaks and FLOP totals from task timings obtained any way (this evaluator, the
// simulator, a live run's profile): timings[role][task]. The iteration time is the latest task end.
Evaluation summarize_timings(const Program& program, const ClusterSpec& cluster, const TrainingSpec& training,
                             std::vector<std::vector<TaskTiming>> timings);

}  // namespace paratwin
