// List scheduling of the Program over all roles at once: a task starts when its stream is free,
// its dependencies have ended and, for a receive, its matching send has started.
#include "plan/analytic/evaluate.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <stdexcept>
#include <tuple>

#include "plan/cost/slowest_gpu.hpp"
#include "plan/ir/transfer_key.hpp"

namespace paratwin {
namespace {

// Total length of a union of intervals, and of its part outside another union.
using Intervals = std::vector<std::pair<double, double>>;

Intervals merged(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals out;
  for (const auto& iv : v) {
    if (iv.second <= iv.first) continue;
    if (!out.empty() && iv.first <= out.back().second)
      out.back().second = std::max(out.back().second, iv.second);
    else
      out.push_back(iv);
  }
  return out;
}

double length(const Intervals& v) {
  double s = 0;
  for (const auto& iv : v) s += iv.second - iv.first;
  return s;
}

// Length of `a` not covered by `b` (both merged). The first of `b` that can matter is found by binary
// search, so that one interval against a role's communication costs log n (the SM fixed point asks
// this of every compute task).
double uncovered(const Intervals& a, const Intervals& b) {
  if (a.empty()) return 0;
  double s = 0;
  size_t j = std::upper_bound(b.begin(), b.end(), a.front().first,
                              [](double x, const auto& iv) { return x < iv.second; }) -
             b.begin();
  for (const auto& [lo, hi] : a) {
    double cursor = lo;
    while (j < b.size() && b[j].second <= cursor) ++j;
    for (size_t k = j; k < b.size() && b[k].first < hi; ++k) {
      if (b[k].first > cursor) s += b[k].first - cursor;
      cursor = std::max(cursor, b[k].second);
      if (cursor >= hi) break;
    }
    if (cursor < hi) s += hi - cursor;
  }
  return s;
}

Intervals united(const Intervals& a, const Intervals& b) {
  Intervals all = a;
  all.insert(all.end(), b.begin(), b.end());
  return merged(all);
}

// A role's tasks' times alone on its pool, what the role repeats costed once: its passes' GEMM lists
// (cost::KernelTimer) and its collectives, by kind, size and group.
class TaskCoster {
 public:
  TaskCoster(const PoolSpec& pool, const ClusterSpec& cluster, Precision precision)
      : pool_(pool), cluster_(cluster), compute_(cluster.device_of(pool), precision) {}

  double operator()(const Task& t) {
    switch (t.kind) {
      case TaskKind::Forward:
      case TaskKind::Backward:
      case TaskKind::Recompute:
      case TaskKind::Optimizer:
        return compute_(t.work).total();
      case TaskKind::Collective: {
        const auto key = std::tuple{t.collective, t.bytes.value(), t.placement.size, t.placement.per_node,
                                    t.placement.crosses_pods};
        auto [it, fresh] = collectives_.try_emplace(key);
        if (fresh)
          it->second =
              cost::collective_time(t.collective, t.bytes, t.placement, pool_, cluster_).time.value();
        return it->second * t.count;
      }
      case TaskKind::Send:
        return cost::p2p_time(t.bytes, t.peer_same_node, pool_, cluster_).value();
      case TaskKind::Recv:
        return 0;
      case TaskKind::Copy:
        return t.bytes.value() / pool_.pcie_bandwidth.value();
    }
    return 0;
  }

 private:
  const PoolSpec& pool_;
  const ClusterSpec& cluster_;
  cost::KernelTimer compute_;
  std::map<std::tuple<cost::CollectiveKind, double, int, int, bool>, double> collectives_;
};

bool is_compute(TaskKind k) {
  return k == TaskKind::Forward || k == TaskKind::Backward || k == TaskKind::Recompute ||
         k == TaskKind::Optimizer;
}

}  // namespace

double task_duration_s(const Task& t, const PoolSpec& pool, const ClusterSpec& cluster, Precision precision) {
  return TaskCoster(pool, cluster, precision)(t);
}

Evaluation evaluate(const Program& program, const ClusterSpec& cluster, const TrainingSpec& training) {
  Evaluation ev = summarize_timings(program, cluster, training, schedule_tasks(program, cluster, training));
  ev.compute_pace = compute_pace(program, cluster, program.roles[size_t(ev.critical_role)]);
  return ev;
}

double compute_pace(const Program& program, const ClusterSpec& cluster, const Role& role) {
  return cost::expected_slowest(program.world, cluster.device_of(cluster.pool_named(role.pool)).speed_cv);
}

Bytes activations_peak(const Role& role, const std::vector<TaskTiming>& timings) {
  std::vector<std::pair<double, double>> memory_events;  // (time, +alloc / -free)
  for (size_t i = 0; i < role.tasks.size(); ++i) {
    const Task& t = role.tasks[i];
    if (t.alloc.value() > 0) memory_events.push_back({timings[i].start_s, t.alloc.value()});
    if (t.free.value() > 0) memory_events.push_back({timings[i].end_s, -t.free.value()});
  }
  // Frees before allocations at the same instant: a buffer handed over is not held twice.
  std::sort(memory_events.begin(), memory_events.end());
  double held = 0, peak = 0;
  for (const auto& [time, delta] : memory_events) {
    held += delta;
    peak = std::max(peak, held);
  }
  return Bytes(peak);
}

Bytes peak_memory(const Role& role, Bytes activations_peak) {
  return role.state.total() + role.buffers + activations_peak;
}

namespace {

// List schedules of every role at once, one per set of task durations ([role][task]). What
// scheduling reads is laid out once per Program in flat arrays (dependencies in one list with offsets,
// each stream's queue, each receive's and send's slot): a large Program's tasks do not fit in cache,
// list scheduling visits them out of order, and the SM fixed point schedules the same Program again.
class ListScheduler {
 public:
  explicit ListScheduler(const Program& program) : program_(program), flat_(program.roles.size()) {
    for (size_t r = 0; r < flat_.size(); ++r) {
      const Role& role = program.roles[r];
      Flat& f = flat_[r];
      const size_t n = role.tasks.size();
      f.dep_offset.reserve(n + 1);
      f.dep_offset.push_back(0);
      f.kind.reserve(n);
      f.slot.assign(n, 0);
      for (size_t i = 0; i < n; ++i) {
        const Task& t = role.tasks[i];
        f.kind.push_back(t.kind);
        if (t.kind == TaskKind::Send || t.kind == TaskKind::Recv) f.slot[i] = transfer_index(t, program.plan);
        f.deps.insert(f.deps.end(), t.deps.begin(), t.deps.end());
        f.dep_offset.push_back(static_cast<int>(f.deps.size()));
        f.queue[static_cast<int>(t.stream)].push_back(static_cast<int>(i));
      }
    }
    const size_t slots = 2 * static_cast<size_t>(program.plan.num_microbatches) * program.plan.chunks();
    sends_.resize(slots);
    sent_.resize(slots);
  }

  std::vector<std::vector<TaskTiming>> run(const std::vector<std::vector<double>>& durations) {
    const size_t roles = flat_.size();
    std::vector<std::vector<TaskTiming>> timing(roles);
    // Per stream: the head's position, when it is free, and what the head waits for -- a dependency's
    // index, a send not yet scheduled (looked up again only once more sends are known), or nothing (-1).
    for (size_t r = 0; r < roles; ++r) {
      Flat& f = flat_[r];
      timing[r].resize(f.kind.size());
      f.done.assign(f.kind.size(), 0);
      f.head.fill(0);
      f.stream_free.fill(0);
      f.waiting_for.fill(-1);
      f.sends_seen.fill(0);
    }
    std::fill(sent_.begin(), sent_.end(), 0);
    size_t sends_known = 0;
    size_t remaining = program_.task_count();
    // Sweeps alternate between ascending and descending pipeline ranks: activations flow up and
    // gradients down, so either chain advances through every rank in one sweep.
    for (bool ascending = true; remaining > 0; ascending = !ascending) {
      bool progress = false;
      for (size_t k = 0; k < roles; ++k) {
        const size_t r = ascending ? k : roles - 1 - k;
        Flat& f = flat_[r];
        const std::vector<double>& duration = durations[r];
        for (int s = 0; s < kStreamKinds; ++s) {
          while (f.head[s] < f.queue[s].size()) {
            // A head that was blocked stays blocked until what it waited for is done.
            int& waits = f.waiting_for[s];
            if (waits >= 0 && !f.done[waits]) break;
            if (waits == kWaitsForSend && sends_known == f.sends_seen[s]) break;
            waits = -1;
            const int i = f.queue[s][f.head[s]];
            double start = f.stream_free[s];
            for (int j = f.dep_offset[i]; j < f.dep_offset[i + 1]; ++j) {
              const int d = f.deps[j];
              if (!f.done[d]) {
                waits = d;
                break;
              }
              start = std::max(start, timing[r][d].end_s);
            }
            if (waits >= 0) break;
            double end = start + duration[i];
            if (f.kind[i] == TaskKind::Recv) {
              const size_t slot = f.slot[i];
              if (!sent_[slot]) {
                waits = kWaitsForSend;
                f.sends_seen[s] = sends_known;
                break;
              }
              start = std::max(start, sends_[slot].start_s);
              end = std::max(start, sends_[slot].end_s);
            }
            timing[r][i] = {start, end};
            if (f.kind[i] == TaskKind::Send) {
              const size_t slot = f.slot[i];
              sends_known += sent_[slot] ? 0 : 1;
              sent_[slot] = 1;
              sends_[slot] = {start, end};
            }
            f.stream_free[s] = end;
            f.done[i] = 1;
            ++f.head[s];
            --remaining;
            progress = true;
          }
        }
      }
      if (!progress)
        throw std::logic_error("analytic evaluation deadlocked: the Program's schedule is inconsistent");
    }
    return timing;
  }

 private:
  static constexpr int kWaitsForSend = -2;
  struct Flat {
    std::vector<int> dep_offset, deps;
    std::vector<TaskKind> kind;
    std::vector<size_t> slot;  // a send's or receive's transfer (transfer_index)
    std::array<std::vector<int>, kStreamKinds> queue;
    std::vector<char> done;
    std::array<size_t, kStreamKinds> head{};
    std::array<double, kStreamKinds> stream_free{};
    std::array<int, kStreamKinds> waiting_for{};
    std::array<size_t, kStreamKinds> sends_seen{};
  };
  const Program& program_;
  std::vector<Flat> flat_;
  // Sends scheduled so far, by (direction, micro-batch, receiving chunk): the receiving chunk names the
  // receiving pipeline rank too.
  std::vector<TaskTiming> sends_;
  std::vector<char> sent_;
};

}  // namespace

std::vector<std::vector<double>> task_durations(const Program& program, const ClusterSpec& cluster,
                                                const TrainingSpec& training) {
  return task_durations(program, cluster, training, true);
}

std::vector<std::vector<double>> task_durations(const Program& program, const ClusterSpec& cluster,
                                                const TrainingSpec& training, bool at_slowest_gpu) {
  std::vector<std::vector<double>> out(program.roles.size());
  for (size_t r = 0; r < program.roles.size(); ++r) {
    const Role& role = program.roles[r];
    const double pace = at_slowest_gpu ? compute_pace(program, cluster, role) : 1;
    TaskCoster duration(cluster.pool_named(role.pool), cluster, training.precision);
    out[r].reserve(role.tasks.size());
    for (const Task& t : role.tasks) out[r].push_back(duration(t) * (is_compute(t.kind) ? pace : 1));
  }
  return out;
}

namespace {

// Whether a task runs communication kernels on its rank's SMs: collectives, and sends off the compute
// stream (a send on the compute stream is the compute kernel's own copy).
bool uses_sms_for_comm(const Task& t) {
  return t.kind == TaskKind::Collective || (t.kind == TaskKind::Send && t.stream != StreamKind::Compute);
}

double sm_share(int sms, const DeviceSpec& device) {
  return sms > 0 && sms < device.sms ? double(sms) / device.sms : 0;
}

// The SMs a NCCL collective holds: comm_sms_in_node for a group inside one node where the pool gives it,
// else comm_sms.
int collective_sms(const PoolSpec& pool, bool in_node) {
  return in_node && pool.comm_sms_in_node > 0 ? pool.comm_sms_in_node : pool.comm_sms;
}

}  // namespace

double comm_sm_share(const Task& t, const PoolSpec& pool, const DeviceSpec& device) {
  if (!uses_sms_for_comm(t) || device.sms <= 0) return 0;
  // NCCL's channel counts are known for collectives (docs/catalog.md); a send keeps comm_sms.
  const bool in_node = t.kind == TaskKind::Collective && t.placement.size <= t.placement.per_node;
  int sms = collective_sms(pool, in_node);
  if (t.sms >= 0) sms = t.sms;  // the framework's own transfers (TP overlap), not NCCL's
  return sm_share(sms, device);
}

double least_collective_sm_share(const PoolSpec& pool, const DeviceSpec& device) {
  return std::min(sm_share(collective_sms(pool, false), device),
                  sm_share(collective_sms(pool, true), device));
}

namespace {

double span_of(const std::vector<std::vector<TaskTiming>>& timing) {
  double end = 0;
  for (const auto& role : timing)
    for (const TaskTiming& t : role) end = std::max(end, t.end_s);
  return end;
}

// A role's communication kernels, what the SM fixed point reads of them every round (gathered once: the
// Program's tasks do not fit in cache).
struct CommKernel {
  int task;
  StreamKind stream;
  double share;  // comm_sm_share
};

// A role's communication kernels in one round of the schedule, by stream, each stream's in time order
// (a stream runs its tasks one at a time, in issue order): when each runs and the share of the SMs it
// holds.
class HeldSms {
 public:
  HeldSms(const std::vector<CommKernel>& kernels, const std::vector<TaskTiming>& timing) {
    for (const CommKernel& k : kernels)
      if (const TaskTiming& t = timing[size_t(k.task)]; t.end_s > t.start_s)
        streams_[static_cast<size_t>(k.stream)].push_back({t.start_s, t.end_s, k.share});
  }

  // The SM-seconds communication holds over [start, end), as a share of the device: each kernel's
  // overlap with it times its share (kernels of different streams that run at once hold SMs each),
  // at most kMostHeldSms of the span. Asked in order of start (the compute stream's), each stream's
  // kernels that ended before are skipped once.
  double seconds(double start, double end) {
    if (start < last_start_) first_.fill(0);
    last_start_ = start;
    double sum = 0;
    for (size_t k = 0; k < streams_.size(); ++k) {
      const std::vector<Kernel>& held = streams_[k];
      size_t& i = first_[k];
      while (i < held.size() && held[i].end_s <= start) ++i;
      for (size_t j = i; j < held.size() && held[j].start_s < end; ++j)
        sum += (std::min(end, held[j].end_s) - std::max(start, held[j].start_s)) * held[j].share;
    }
    return std::min(sum, kMostHeldSms * (end - start));
  }

 private:
  struct Kernel {
    double start_s, end_s, share;
  };
  std::array<std::vector<Kernel>, kStreamKinds> streams_;
  std::array<size_t, kStreamKinds> first_{};
  double last_start_ = 0;
};

}  // namespace

std::vector<std::vector<TaskTiming>> schedule_tasks(const Program& program, const ClusterSpec& cluster,
                                                    const TrainingSpec& training) {
  const std::vector<std::vector<double>> nominal = task_durations(program, cluster, training);
  ListScheduler scheduler(program);
  std::vector<std::vector<TaskTiming>> timing = scheduler.run(nominal);
  // Compute beside communication runs on the SMs the communication kernels leave: a task of d seconds
  // alone takes d plus, for each kernel beside it, their overlap o times the kernel's share of the SMs
  // (comm_sm_share), its progress slowed while they run. The overlaps depend on the durations: iterate
  // the list schedule to the fixed point (it settles in a few rounds; durations only grow, so neither
  // do the ends shrink, and the optimizer's bounds of the nominal schedule stay bounds).
  std::vector<std::vector<CommKernel>> comm(program.roles.size());
  std::vector<std::vector<int>> compute(program.roles.size());  // the compute tasks with work
  bool contended = false;
  for (size_t r = 0; r < program.roles.size(); ++r) {
    const Role& role = program.roles[r];
    const PoolSpec& pool = cluster.pool_named(role.pool);
    for (size_t i = 0; i < role.tasks.size(); ++i) {
      const Task& t = role.tasks[i];
      if (const double share = comm_sm_share(t, pool, cluster.device_of(pool)); share > 0)
        comm[r].push_back({int(i), t.stream, share});
      if (is_compute(t.kind) && nominal[r][i] > 0) compute[r].push_back(int(i));
    }
    contended |= !comm[r].empty();
  }
  if (!contended) return timing;
  std::vector<std::vector<double>> durations = nominal;
  // Settled when no task moves by more than a millionth of the step (the ends shrink by about 10x
  // a round).
  constexpr int kRounds = 6;
  constexpr double kSettled = 1e-6;
  for (int round = 0; round < kRounds; ++round) {
    double change = 0;
    for (size_t r = 0; r < program.roles.size(); ++r) {
      HeldSms held(comm[r], timing[r]);
      for (const int i : compute[r]) {
        const double d = nominal[r][i] + held.seconds(timing[r][i].start_s, timing[r][i].end_s);
        change = std::max(change, std::abs(d - durations[r][i]));
        durations[r][i] = d;
      }
    }
    if (change <= kSettled * span_of(timing)) break;
    timing = scheduler.run(durations);
  }
  return timing;
}

Evaluation summarize_timings(const Program& program, const ClusterSpec& cluster, const TrainingSpec& training,
                             std::vector<std::vector<TaskTiming>> timings) {
  const size_t roles = program.roles.size();
  Evaluation ev;
  ev.roles.resize(roles);
  for (size_t r = 0; r < roles; ++r) ev.roles[r].tasks = std::move(timings[r]);
  // Per role: end, breakdown, memory.
  for (size_t r = 0; r < roles; ++r) {
    const Role& role = program.roles[r];
    RoleEvaluation& re = ev.roles[r];
    const PoolSpec& pool = cluster.pool_named(role.pool);
    const DeviceSpec& device = cluster.device_of(pool);
    Intervals compute, tp, pp, dp, copy, batch;
    Flops executed;
    for (size_t i = 0; i < role.tasks.size(); ++i) {
      const Task& t = role.tasks[i];
      const TaskTiming& tm = re.tasks[i];
      const double d = tm.end_s - tm.start_s;
      re.end_s = std::max(re.end_s, tm.end_s);
      executed += t.work.gemm_flops;
      switch (t.kind) {
        case TaskKind::Forward:
        case TaskKind::Backward:
        case TaskKind::Recompute: {
          (t.kind == TaskKind::Recompute ? re.breakdown.recompute_s : re.breakdown.compute_s) += d;
          const cost::KernelTimes costed = cost::kernel_times(t.work, device, training.precision);
          if (costed.total() > 0) re.breakdown.kernels += costed.scaled(d / costed.total());
          break;
        }
        case TaskKind::Optimizer:
          re.breakdown.optimizer_s += d;
          break;
        default:
          break;
      }
      const auto iv = std::make_pair(tm.start_s, tm.end_s);
      if (t.kind == TaskKind::Send || t.kind == TaskKind::Recv) {
        pp.push_back(iv);  // on the compute, PP or (combined 1F1B's sends) Ep stream
      } else if (t.stream == StreamKind::Compute) {
        compute.push_back(iv);
      } else if (t.stream == StreamKind::Tp || t.stream == StreamKind::Ep) {
        tp.push_back(iv);
      } else if (t.stream == StreamKind::Pp) {
        pp.push_back(iv);
      } else if (t.stream == StreamKind::Dp || t.stream == StreamKind::DpReplicate) {
        dp.push_back(iv);
      } else if (t.purpose == Purpose::InputBatch) {
        batch.push_back(iv);  // not an offload: counted where it leaves the compute stream waiting
      } else {
        copy.push_back(iv);
      }
    }
    compute = merged(compute);
    tp = merged(tp);
    pp = merged(pp);
    dp = merged(dp);
    copy = merged(copy);
    TimeBreakdown& b = re.breakdown;
    b.tp_comm_s = length(tp);
    b.pp_comm_s = length(pp);
    b.dp_comm_s = length(dp);
    b.offload_s = length(copy);
    // Exposed: communication while the compute stream idles, counted once however many streams are busy.
    const Intervals comm = united(united(united(tp, pp), united(dp, copy)), batch);
    b.exposed_comm_s = uncovered(comm, compute);
    b.bubble_s = std::max(0.0, re.end_s - length(compute) - b.exposed_comm_s);
    if (b.bubble_s < 1e-9 * re.end_s) b.bubble_s = 0;  // rounding residue of the interval sums

    re.activations_peak = activations_peak(role, re.tasks);
    re.peak_memory = peak_memory(role, re.activations_peak);
    re.capacity = device.memory;
    ev.hardware_flops += executed * role.instances;
    const auto& peaks = device.peak;
    if (auto it = peaks.find(training.precision); it != peaks.end()) ev.peak += it->second * role.instances;
    if (re.end_s > ev.iteration_time_s) {
      ev.iteration_time_s = re.end_s;
      ev.critical_role = static_cast<int>(r);
    }
  }
  return ev;
}

}  // namespace paratwin
