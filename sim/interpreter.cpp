// Actors that interpret the Program: dependency waits on a per-rank condition variable, collectives
// started by their last-arriving member, sends that credit the receiving rank's matching receive.
#include "sim/interpreter.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <utility>

#include <simgrid/s4u.hpp>

#include "plan/ir/transfer_key.hpp"
#include "sim/flows.hpp"
#include "sim/platform.hpp"

namespace sg4 = simgrid::s4u;

namespace paratwin::sim {
namespace {

constexpr int kStreams = kStreamKinds;

struct Collective {
  size_t arrived = 0;
  bool done = false;
};

struct RankState {
  int role = 0;
  std::vector<unsigned short> done;  // per task: iterations in which it has ended
  long long completed = 0;           // tasks ended, all iterations
  // Sends received (all iterations), and the last one's start.
  std::map<TransferKey, std::pair<int, double>> arrivals;
  sg4::ConditionVariablePtr changed;
  int waiting = 0;  // actors of this rank blocked on `changed`
  bool observed = false;
  std::vector<TaskTiming> timings;  // observed ranks, last iteration
  double iteration_start_s = 0;
  double end_s = 0;
  // The share of the SMs the communication kernels running on this rank hold and, while any runs, the
  // activity that holds them: it shares the GPU host with compute at the weight that leaves compute
  // 1 - share of it.
  double comm_share = 0;
  int comm_kernels = 0;
  sg4::ExecPtr comm_sms;
};

class Interpreter {
 public:
  Interpreter(const Program& program, const ClusterSpec& cluster, const TrainingSpec& training,
              const RankLayout& layout, const InterpretOptions& options, const Platform& platform)
      : program_(program), cluster_(cluster), layout_(layout), options_(options), platform_(platform) {
    mutex_ = sg4::Mutex::create();
    sm_mutex_ = sg4::Mutex::create();
    queues_.resize(program.roles.size());
    durations_ = task_durations(program, cluster, training, options.at_slowest_gpu);
    for (size_t r = 0; r < program.roles.size(); ++r) {
      const Role& role = program.roles[r];
      const PoolSpec& pool = cluster.pool_named(role.pool);
      pools_.push_back(&pool);
      sm_shares_.emplace_back();
      for (size_t i = 0; i < role.tasks.size(); ++i) {
        sm_shares_[r].push_back(comm_sm_share(role.tasks[i], pool, cluster.device_of(pool)));
        queues_[r][static_cast<int>(role.tasks[i].stream)].push_back(static_cast<int>(i));
      }
    }
    // Collectives whose members play different roles (the embedding pair of the first and last
    // pipeline ranks, the step's all-reduces over every rank) meet under the first role's task of the
    // same name.
    for (size_t r = 0; r < program.roles.size(); ++r)
      for (size_t i = 0; i < program.roles[r].tasks.size(); ++i) {
        const Task& t = program.roles[r].tasks[i];
        if (t.kind != TaskKind::Collective || !spans_roles(t.group)) continue;
        for (size_t j = 0; j < program.roles.front().tasks.size(); ++j)
          if (program.roles.front().tasks[j].name == t.name) cross_role_index_[{int(r), int(i)}] = int(j);
      }
    role_of_pp_.assign(program.plan.pp, 0);
    for (size_t r = 0; r < program.roles.size(); ++r) role_of_pp_[program.roles[r].pipeline_rank] = int(r);

    ranks_.resize(layout.world());
    gpu_simulated_.assign(layout.gpus(), 0);
    const std::vector<double> role_slowest = slowest_of_each_role();
    for (int rank = 0; rank < layout.world(); ++rank) {
      if (!layout.simulated(rank)) continue;
      gpu_simulated_[layout.gpu_of(rank)] = 1;
      RankState& rs = ranks_[rank];
      const RankCoords& c = layout.coords(rank);
      rs.role = role_of_pp_[c.pp];
      rs.done.assign(program.roles[rs.role].tasks.size(), 0);
      rs.changed = sg4::ConditionVariable::create();
      const double slowdown = options.gpu_slowdown.empty() ? 1.0 : options.gpu_slowdown[layout.gpu_of(rank)];
      const bool slow = options.slowdown_drawn ? slowdown == role_slowest[rs.role] : slowdown != 1.0;
      rs.observed = (c.tp == 0 && c.cp == 0 && c.dp == 0) || slow;
      if (rs.observed) rs.timings.resize(rs.done.size());
    }
  }

  // Runs of several jobs: this interpreter's actors are job `job`'s, and its flows count in `tally`.
  void share_platform(int job, LinkTally* tally) {
    job_ = job;
    tally_ = tally;
  }

  void start_actors() {
    ranks_done_.assign(options_.iterations, 0);
    for (int rank = 0; rank < layout_.world(); ++rank) simulated_ranks_ += layout_.simulated(rank) ? 1 : 0;
    for (int rank = 0; rank < layout_.world(); ++rank) {
      if (!layout_.simulated(rank)) continue;
      const int role = ranks_[rank].role;
      for (int s = 0; s < kStreams; ++s) {
        if (queues_[role][s].empty()) continue;
        sg4::Actor::create("j" + std::to_string(job_) + "r" + std::to_string(rank) + "s" + std::to_string(s),
                           platform_.gpus[layout_.gpu_of(rank)], [this, rank, s] { run_stream(rank, s); });
      }
    }
    if (options_.sample_period_s > 0) {
      series_.resize(platform_.watched.size());
      for (size_t l = 0; l < platform_.watched.size(); ++l) {
        series_[l].link = platform_.watched[l]->get_name();
        series_[l].capacity_Bps = platform_.watched[l]->get_bandwidth();
      }
      sg4::Actor::create("link-sampler", platform_.gpus.front(), [this] {
        for (;;) {
          for (size_t l = 0; l < platform_.watched.size(); ++l)
            series_[l].usage_Bps.push_back({sg4::Engine::get_clock(), platform_.watched[l]->get_usage()});
          sg4::this_actor::sleep_for(options_.sample_period_s);
        }
      })->daemonize();
    }
  }

  // Per role, the largest slowdown among its simulated ranks' GPUs (1 when none is slowed).
  std::vector<double> slowest_of_each_role() const {
    std::vector<double> out(program_.roles.size(), 1.0);
    if (options_.gpu_slowdown.empty()) return out;
    for (int rank = 0; rank < layout_.world(); ++rank)
      if (layout_.simulated(rank)) {
        double& slowest = out[role_of_pp_[layout_.coords(rank).pp]];
        slowest = std::max(slowest, options_.gpu_slowdown[layout_.gpu_of(rank)]);
      }
    return out;
  }

  Interpretation result() {
    Interpretation out;
    out.iteration_end_s = iteration_end_;
    out.activities = activities_;
    out.links = std::move(series_);
    out.role_timings.resize(program_.roles.size());
    out.role_rank.assign(program_.roles.size(), -1);
    std::vector<double> best(program_.roles.size(), -1);
    for (int rank = 0; rank < layout_.world(); ++rank) {
      const RankState& rs = ranks_[rank];
      if (!rs.observed || rs.end_s - rs.iteration_start_s <= best[rs.role]) continue;
      best[rs.role] = rs.end_s - rs.iteration_start_s;
      out.role_rank[rs.role] = rank;
      out.role_timings[rs.role] = rs.timings;
    }
    return out;
  }

 private:
  // Actors run one at a time and only yield inside simcalls, so a condition is checked without the lock
  // first: most tasks are ready when their stream reaches them, and a lock is two simcalls.
  template <class Ready>
  void wait_until(int rank, Ready ready) {
    if (ready()) return;
    RankState& rs = ranks_[rank];
    std::unique_lock lock(*mutex_);
    ++rs.waiting;
    while (!ready()) rs.changed->wait(lock);
    --rs.waiting;
  }

  void notify(int rank) {
    if (ranks_[rank].waiting > 0) ranks_[rank].changed->notify_all();
  }

  void run_phase(const Phase& phase) {
    activities_ += sim::run_phase(phase, platform_, layout_, gpu_simulated_, tally_, job_);
  }

  void collective(int rank, int task_index, const Task& t) {
    std::vector<int> members = layout_.group(rank, t.group);
    std::erase_if(members, [this](int m) { return !layout_.simulated(m); });
    const int leader = members.front();
    int leader_task = task_index;
    if (spans_roles(t.group)) leader_task = cross_role_index_.at({ranks_[rank].role, task_index});
    const auto key = std::make_tuple(static_cast<int>(t.group), leader, leader_task);
    // Decide who drives the collective from this actor's own arrival number, not from the shared
    // count, which other members change as soon as this actor yields.
    std::shared_ptr<Collective> c;
    size_t arrival = 0;
    {
      auto& slot = instances_[key];
      if (!slot) slot = std::make_shared<Collective>();
      c = slot;
      arrival = ++c->arrived;
      if (arrival == members.size()) instances_.erase(key);
    }
    if (arrival < members.size()) {
      wait_until(rank, [&] { return c->done; });
      return;
    }
    // The last member to arrive drives the collective's flows for the whole group.
    std::vector<int> gpus;  // every member's GPU, folded lanes included: their ports are where flows go
    for (int m : layout_.group(rank, t.group)) gpus.push_back(layout_.gpu_of(m));
    for (const Phase& phase : collective_phases(t, gpus, layout_, *pools_[ranks_[rank].role], cluster_))
      run_phase(phase);
    c->done = true;
    for (int m : members) notify(m);
  }

  void run_stream(int rank, int stream) {
    RankState& rs = ranks_[rank];
    const Role& role = program_.roles[rs.role];
    const long long tasks = static_cast<long long>(role.tasks.size());
    for (int it = 0; it < options_.iterations; ++it) {
      wait_until(rank, [&] { return rs.completed >= it * tasks; });
      if (stream_starts_iteration(rs.role, stream)) {
        rs.iteration_start_s = sg4::Engine::get_clock();
      }
      for (int i : queues_[rs.role][stream]) {
        const Task& t = role.tasks[i];
        wait_until(rank, [&] {
          for (int d : t.deps)
            if (rs.done[d] < it + 1) return false;
          return true;
        });
        double start = sg4::Engine::get_clock();
        run_task(rank, i, t, it, start);
        const double end = sg4::Engine::get_clock();
        if (rs.observed && it + 1 == options_.iterations)
          rs.timings[i] = {start - rs.iteration_start_s, end - rs.iteration_start_s};
        rs.done[i] = static_cast<unsigned short>(it + 1);
        ++rs.completed;
        rs.end_s = std::max(rs.end_s, end);
        if (rs.completed == (it + 1) * tasks) record_iteration_end(it, end);
        notify(rank);
      }
    }
  }

  // The compute stream marks the iteration's start (every role has compute tasks).
  bool stream_starts_iteration(int role, int stream) const {
    return stream == static_cast<int>(StreamKind::Compute) || queues_[role][0].empty();
  }

  void record_iteration_end(int it, double end) {
    if (iteration_end_.size() <= static_cast<size_t>(it)) iteration_end_.resize(it + 1, 0);
    iteration_end_[it] = std::max(iteration_end_[it], end);
    if (options_.progress && ++ranks_done_[it] == simulated_ranks_) report_progress(it + 1);
  }

  // Every tenth of the run, on standard error (the parent's terminal: the child shares it).
  void report_progress(int done) const {
    const int n = options_.iterations;
    if (done == n || (done * 10) / n != ((done - 1) * 10) / n)
      std::fprintf(stderr, "simulated %d of %d iterations (%.0f s simulated)\n", done, n,
                   sg4::Engine::get_clock());
  }

  // Compute beside a collective or a send off the compute stream progresses on the SMs NCCL leaves,
  // as in the analytic evaluator (comm_sm_share, summed over the kernels running at once): an activity
  // of endless work at priority share / (1 - share) runs on the rank's GPU while any runs, started
  // again at the new share whenever one begins or ends.
  void hold_comm_sms(int rank, double share) {
    // cancel() and start() yield to other actors, which may hold or release SMs of the same rank
    // meanwhile: one at a time, so that no activity is dropped still running.
    const std::scoped_lock lock(*sm_mutex_);
    RankState& rs = ranks_[rank];
    rs.comm_share += share;
    rs.comm_kernels += share > 0 ? 1 : -1;
    if (rs.comm_kernels == 0) rs.comm_share = 0;  // no rounding left over
    if (const sg4::ExecPtr old = std::exchange(rs.comm_sms, nullptr)) old->cancel();
    if (rs.comm_kernels == 0) return;
    const double held = std::min(rs.comm_share, kMostHeldSms);
    rs.comm_sms = sg4::Exec::init()
                      ->set_flops_amount(1e300)
                      ->set_host(platform_.gpus[layout_.gpu_of(rank)])
                      ->set_priority(held / (1 - held));
    rs.comm_sms->start();
  }

  void run_task(int rank, int i, const Task& t, int it, double& start) {
    const double share = sm_shares_[ranks_[rank].role][i];
    if (share > 0) {
      hold_comm_sms(rank, share);
      run_task_alone(rank, i, t, it, start);
      hold_comm_sms(rank, -share);
    } else {
      run_task_alone(rank, i, t, it, start);
    }
  }

  void run_task_alone(int rank, int i, const Task& t, int it, double& start) {
    RankState& rs = ranks_[rank];
    const double duration =
        durations_[rs.role][i] * options_.kernel_noise.factor(t.kind, layout_.gpu_of(rank), i, it);
    switch (t.kind) {
      case TaskKind::Forward:
      case TaskKind::Backward:
      case TaskKind::Recompute:
      case TaskKind::Optimizer:
        if (duration > 0) {
          sg4::this_actor::execute(duration * kWorkPerSecond);
          ++activities_;
        }
        break;
      case TaskKind::Copy:  // host copies ride PCIe, which nothing else uses here
        if (duration > 0) {
          sg4::this_actor::sleep_for(duration);
          ++activities_;
        }
        break;
      case TaskKind::Send: {
        const double send_start = sg4::Engine::get_clock();
        const int peer = layout_.pipeline_peer(rank, t.peer);
        run_phase(p2p_phase(t.bytes.value(), layout_.gpu_of(rank), layout_.gpu_of(peer), layout_,
                            *pools_[rs.role], cluster_));
        {
          auto& arrival = ranks_[peer].arrivals[transfer_key(t)];
          ++arrival.first;
          arrival.second = send_start;
        }
        notify(peer);
        break;
      }
      case TaskKind::Recv: {
        const TransferKey key = transfer_key(t);
        wait_until(rank, [&] {
          auto found = rs.arrivals.find(key);
          return found != rs.arrivals.end() && found->second.first >= it + 1;
        });
        // As in the analytic evaluator, a receive starts no earlier than its send.
        start = std::max(start, rs.arrivals[key].second);
        break;
      }
      case TaskKind::Collective:
        collective(rank, i, t);
        break;
    }
  }

  const Program& program_;
  const ClusterSpec& cluster_;
  const RankLayout& layout_;
  const InterpretOptions& options_;
  const Platform& platform_;
  sg4::MutexPtr mutex_;
  sg4::MutexPtr sm_mutex_;                                      // hold_comm_sms, one actor at a time
  std::vector<std::array<std::vector<int>, kStreams>> queues_;  // per role and stream: task indices
  std::vector<std::vector<double>> durations_;                  // per role and task: cost-model time
  std::vector<const PoolSpec*> pools_;
  std::vector<std::vector<double>> sm_shares_;  // [role][task]: comm_sm_share
  std::map<std::pair<int, int>, int> cross_role_index_;
  std::vector<int> role_of_pp_;
  std::vector<RankState> ranks_;  // simulated ranks only are set up
  std::vector<char> gpu_simulated_;
  std::map<std::tuple<int, int, int>, std::shared_ptr<Collective>> instances_;
  std::vector<double> iteration_end_;
  std::vector<int> ranks_done_;  // per iteration: simulated ranks that ended it (progress)
  int simulated_ranks_ = 0;
  long long activities_ = 0;
  std::vector<LinkSeries> series_;
  int job_ = 0;
  LinkTally* tally_ = nullptr;
};

}  // namespace

Interpretation interpret(const Program& program, const ClusterSpec& cluster, const TrainingSpec& training,
                         const RankLayout& layout, const InterpretOptions& options) {
  int argc = 1;
  char name[] = "paratwin-simulate";
  char* argv[] = {name, nullptr};
  sg4::Engine engine(&argc, argv);
  configure_engine();
  const Platform platform = build_platform(cluster, layout, options.gpu_slowdown);
  Interpreter interpreter(program, cluster, training, layout, options, platform);
  interpreter.start_actors();
  engine.run();
  return interpreter.result();
}

JobsInterpretation interpret_jobs(const std::vector<JobProgram>& jobs, const ClusterSpec& cluster) {
  int argc = 1;
  char name[] = "paratwin-simulate";
  char* argv[] = {name, nullptr};
  sg4::Engine engine(&argc, argv);
  configure_engine();
  std::vector<const RankLayout*> layouts;
  for (const JobProgram& j : jobs) layouts.push_back(j.layout);
  const Platform platform = build_platform(cluster, layouts, {});
  LinkTally tally(static_cast<int>(jobs.size()));
  std::vector<InterpretOptions> options(jobs.size());
  std::vector<std::unique_ptr<Interpreter>> interpreters;
  for (size_t j = 0; j < jobs.size(); ++j) {
    options[j].iterations = jobs[j].iterations;
    interpreters.push_back(std::make_unique<Interpreter>(*jobs[j].program, cluster, *jobs[j].training,
                                                         *jobs[j].layout, options[j], platform));
    interpreters.back()->share_platform(static_cast<int>(j), &tally);
    interpreters.back()->start_actors();
  }
  engine.run();
  JobsInterpretation out;
  for (auto& in : interpreters) out.jobs.push_back(in->result());
  out.links = tally.links();
  return out;
}

}  // namespace paratwin::sim
