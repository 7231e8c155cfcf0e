// The supervisor's loop: plan for the slots that are up, launch, watch, stop, recover; then the
// failure trace, the twin's prediction and the report.
#include "exec/supervise/supervisor.hpp"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include "exec/checkpoint/checkpoint.hpp"
#include "exec/launch.hpp"
#include "exec/supervise/control_channel.hpp"
#include "exec/supervise/fault_plan.hpp"
#include "exec/supervise/host_pool.hpp"
#include "exec/supervise/host_probe.hpp"
#include "exec/supervise/job_process.hpp"
#include "exec/supervise/rank_agent.hpp"
#include "exec/supervise/run_record.hpp"
#include "exec/supervise/supervise_options.hpp"
#include "exec/train/parallel_runner.hpp"
#include "plan/io/atomic_file.hpp"
#include "plan/spec/units.hpp"

namespace paratwin::exec {

namespace fs = std::filesystem;

namespace {

std::string random_token() {
  std::random_device device;
  char buf[33];
  std::snprintf(buf, sizeof buf, "%08x%08x%08x%08x", device(), device(), device(), device());
  return buf;
}

volatile std::sig_atomic_t interrupted = 0;
void on_interrupt(int) {
  interrupted = 1;
}

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr double kStartupGrace_s = 60;  // MPI start-up, lowering, loading: before the first step

// One launch of the job: mpirun and its ranks, from start to stop.
struct Launch {
  pid_t mpirun = 0;
  int ranks = 0;
  std::vector<int> slots;  // rank -> slot
  std::vector<int> hosts;  // rank -> host (of HostPool), on several hosts
  std::string hostfile;    // mpirun's placement of the ranks, removed when the launch ends
  double started_s = 0;
  bool training = false;  // a step arrived
  int64_t max_step = -1;  // the furthest step a rank reported
  double last_progress_s = 0;
  int steps0 = 0;  // heartbeats of rank 0
  std::vector<bool> done;
  std::map<int, std::pair<std::string, double>> faults;  // rank -> injected kill/hang and when
  int chaos_victim = -1;
  double chaos_at_s = kInfinity, chaos_killed_s = 0;
  bool grow_announced = false;
};

// Refused: a rank cannot run the job (bad input it found, exit status 2); restarting would fail alike.
enum class Outcome { Finished, Failed, Grow, Refused, Interrupted };

class Supervisor {
 public:
  Supervisor(const LiveRunOptions& live, const LiveRunSetup& setup, const SuperviseOptions& options,
             const std::vector<std::string>& args, const std::vector<Host>& hosts)
      : live_(live),
        setup_(setup),
        options_(options),
        args_(rank_arguments(args)),
        out_(live.json == "-" ? std::cerr : std::cout) {
    max_ranks_ = setup.plan.dp;
    min_ranks_ = options.min_ranks > 0 ? options.min_ranks : max_ranks_;
    if (min_ranks_ > max_ranks_)
      throw InputError(Location{"<--min-ranks " + std::to_string(options.min_ranks) + ">", 1, 1},
                       "--min-ranks " + std::to_string(min_ranks_) + " exceeds the job's " +
                           std::to_string(max_ranks_) + " ranks; expected 1 to " +
                           std::to_string(max_ranks_));
    down_s_ = duration_flag("--down-time", options.down_time, true);
    hang_s_ = duration_flag("--hang-timeout", options.hang_timeout, false);
    const double chaos_s = duration_flag("--chaos-mtbf", options.chaos_mtbf, false);
    steps_ = live.steps > 0 ? live.steps : setup.scenario.training.steps.value_or(0);
    faults_ = parse_injections(options.inject, max_ranks_, steps_);
    fired_.assign(faults_.size(), false);
    if (options.chaos_seed) chaos_.emplace(*options.chaos_seed, options.chaos_kills, chaos_s);
    if (!hosts.empty()) place_on(hosts);
    std::string address = options.control_address;
    if (address.empty() && !hosts.empty()) {
      // The supervisor runs on the first host: its address there is one every host reaches.
      address = local_address_of(hosts.front().name).value_or("");
      if (address.empty())
        throw InputError(Location{"<host " + hosts.front().name + ">", 1, 1},
                         "the first host, " + hosts.front().name +
                             ", is not this machine; run paratwin there or give --control-address with an "
                             "address of this machine that every host reaches");
    }
    if (address.empty()) address = "127.0.0.1";
    try {
      server_ = std::make_unique<ControlServer>(address, [this](const std::string& m) { say(m); });
    } catch (const std::invalid_argument& e) {
      throw InputError(Location{"<--control-address " + address + ">", 1, 1}, e.what());
    }
    down_until_.assign(size_t(max_ranks_), -kInfinity);
    record_.max_ranks = max_ranks_;
    record_.min_ranks = min_ranks_;
    if (!live.json.empty())
      report_tmp_ =
          (fs::temp_directory_path() / ("paratwin-run-" + std::to_string(::getpid()) + ".json")).string();
  }

  int run();

 private:
  void say(const std::string& m) { out_ << "paratwin run: " << m << "\n" << std::flush; }
  void probe_hosts(double now) {
    if (!hosts_.empty()) prober_.poll(hosts_, now, [this](const std::string& m) { say(m); });
  }
  void place_on(const std::vector<Host>& hosts);
  LiveRunOptions options_for(int ranks) const;
  int plan_ranks(size_t slots_up);
  int replica_of(int world_rank, int replicas) const;
  std::vector<int> slots_up(double t) const;
  bool wait_for_capacity(int& ranks);
  Launch launch(int ranks, bool resume);
  Outcome watch(Launch& l, Recovery& failure);
  void on_step(Launch& l, const ControlMessage& m);
  int finish(int status);

  const LiveRunOptions& live_;
  const LiveRunSetup& setup_;
  const SuperviseOptions& options_;
  const std::vector<std::string> args_;
  std::ostream& out_;
  int max_ranks_ = 0, min_ranks_ = 0;
  double down_s_ = 0, hang_s_ = 0;
  int64_t steps_ = 0;               // of the run; 0: set by a token budget
  double last_training_end_s_ = 0;  // the last step's end in any launch so far
  std::vector<Injection> faults_;
  std::vector<bool> fired_;
  std::optional<ChaosSchedule> chaos_;
  std::unique_ptr<ControlServer> server_;
  std::vector<double> down_until_;  // per slot
  HostPool hosts_;
  HostProber prober_;             // asks the hosts that are out whether they answer again
  std::map<int, bool> runnable_;  // DP degree -> the plan can run on it
  RunRecord record_;
  std::string report_tmp_;
  // What the next launch's first step settles: the recovery in progress, or a planned stop's loss.
  int64_t previous_max_step_ = -1;
  bool recovering_ = false, regrowing_ = false;
};

// The full job's placement on the hosts (refused when the plan's nodes are not the hosts).
void Supervisor::place_on(const std::vector<Host>& hosts) {
  const std::vector<int> host = host_of_ranks(setup_.plan, setup_.scenario.cluster, hosts, live_.scenario);
  std::vector<int> slot;
  for (int r = 0; r < int(host.size()); ++r) slot.push_back(rank_coordinates(setup_.plan, r).dp);
  hosts_ = HostPool(hosts, host, slot);
}

// The job on `ranks` data-parallel ranks, on the whole hosts they need (nodes 0 when they need part
// of one).
LiveRunOptions Supervisor::options_for(int ranks) const {
  LiveRunOptions o = live_;
  o.ranks = ranks;
  if (!hosts_.empty()) o.nodes = hosts_.nodes_for(ranks * setup_.plan.tp * setup_.plan.pp * setup_.plan.cp);
  return o;
}

int Supervisor::plan_ranks(size_t up) {
  for (int d = std::min(int(up), max_ranks_); d >= min_ranks_; --d) {
    if (!runnable_.count(d)) {
      const LiveRunOptions o = options_for(d);
      if (!hosts_.empty() && o.nodes == 0) {
        runnable_[d] = false;
        continue;
      }
      try {
        prepare_live_run(o);  // the global batch must split over d ranks in whole micro-batches
        runnable_[d] = true;
      } catch (const InputError&) {
        runnable_[d] = false;
      }
    }
    if (runnable_[d]) return d;
  }
  return 0;
}

std::vector<int> Supervisor::slots_up(double t) const {
  std::vector<int> up;
  for (int s = 0; s < max_ranks_; ++s)
    if (down_until_[size_t(s)] <= t && hosts_.slot_up(s, t)) up.push_back(s);
  return up;
}

// Until the slots that are up can run the plan; false when interrupted.
bool Supervisor::wait_for_capacity(int& ranks) {
  bool said = false;
  for (;;) {
    const double now = server_->now();
    probe_hosts(now);
    // On hosts, not before every host that was out has answered a probe or failed one.
    const bool settled = prober_.settled(hosts_, now);
    if (settled && (ranks = plan_ranks(slots_up(now).size())) > 0) return true;
    if (interrupted) return false;
    if (settled && !said)
      say("waiting for capacity: " + std::to_string(slots_up(now).size()) + " of " +
          std::to_string(max_ranks_) + " slots up, the plan needs at least " + std::to_string(min_ranks_));
    said = said || settled;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// The data-parallel replica of a world rank when the plan runs on `replicas` of them.
int Supervisor::replica_of(int world_rank, int replicas) const {
  Plan p = setup_.plan;
  p.dp = replicas;
  return rank_coordinates(p, world_rank).dp;
}

Launch Supervisor::launch(int ranks, bool resume) {
  Launch l;
  l.ranks = ranks;
  const std::vector<int> up = slots_up(server_->now());
  l.slots.assign(up.begin(), up.begin() + ranks);
  // Each data-parallel replica is tp x pp x cp processes; shrink and grow change the replicas only.
  const int world = ranks * setup_.plan.tp * setup_.plan.pp * setup_.plan.cp;
  l.done.assign(size_t(world), false);
  if (!live_.checkpoint_dir.empty())
    if (const int n = remove_unfinished_checkpoints(live_.checkpoint_dir); n > 0)
      say("removed " + std::to_string(n) + " unfinished checkpoint write(s) of the stopped job");
  const std::string token = random_token();
  server_->expect(token, world);
  std::string armed;  // injected faults not fired yet, on ranks this launch has
  for (size_t i = 0; i < faults_.size(); ++i)
    if (!fired_[i] && faults_[i].rank < ranks) armed += (armed.empty() ? "" : ",") + faults_[i].text();
  std::vector<std::string> args = args_;
  args.insert(args.end(), {"--ranks", std::to_string(ranks)});
  if (!report_tmp_.empty()) args.insert(args.end(), {"--json", report_tmp_});
  if (resume) args.push_back("--resume");
  if (!hosts_.empty()) {
    // The first hosts that are up, as many as the ranks fill; the plan's layout places the ranks.
    const LiveRunOptions o = options_for(ranks);
    std::vector<int> index;
    std::vector<Host> up = hosts_.up(server_->now(), index);
    up.resize(size_t(o.nodes));
    const LiveRunSetup s = prepare_live_run(o);
    const std::vector<int> placed = host_of_ranks(s.plan, s.scenario.cluster, up, live_.scenario);
    for (int h : placed) l.hosts.push_back(index[size_t(h)]);
    l.hostfile =
        (fs::temp_directory_path() / ("paratwin-hosts-" + std::to_string(::getpid()) + "-" + token)).string();
    write_file_atomically(l.hostfile, sequential_hostfile(up, placed));
    args.insert(args.end(), {"--nodes", std::to_string(o.nodes)});
  }
  l.mpirun = start_ranks(world, args,
                         {{kControlEndpointVariable, server_->endpoint()},
                          {kControlTokenVariable, token},
                          {kFaultsVariable, armed}},
                         live_.json == "-", l.hostfile);
  l.started_s = server_->now();
  return l;
}

void Supervisor::on_step(Launch& l, const ControlMessage& m) {
  if (!l.training) {
    // The first step of this launch: training again, from the checkpoint at step - 1.
    l.training = true;
    const int64_t from = m.step - 1;
    if (record_.first_step_s < 0) {
      record_.first_step_s = m.received_s;
      record_.first_step = from;
    }
    const int64_t lost = std::max<int64_t>(0, previous_max_step_ - from);
    if (recovering_) {
      Recovery& r = record_.recoveries.back();
      r.first_step_s = m.received_s;
      r.resumed_from = from;
      r.lost_steps = lost;
      char buf[200];
      std::snprintf(
          buf, sizeof buf,
          "recovered: a first step on %d ranks from step %lld, %.2f s after the failure (%lld steps lost)",
          l.ranks, static_cast<long long>(from), m.received_s - r.failed_s, static_cast<long long>(lost));
      say(buf);
    }
    if (recovering_ || regrowing_) record_.lost_steps += lost;
    recovering_ = regrowing_ = false;
    if (chaos_ && chaos_->kills_left() > 0) l.chaos_at_s = m.received_s + chaos_->next_delay_s();
  }
  if (m.step > l.max_step) {
    l.max_step = m.step;
    l.last_progress_s = m.received_s;
  }
  if (m.rank == 0) {
    if (l.ranks == max_ranks_ && l.steps0++ > 0) record_.full_step_s.push_back(m.step_s);
    record_.step_s += m.step_s;
    record_.total_steps = m.steps;
  }
}

Outcome Supervisor::watch(Launch& l, Recovery& failure) {
  // A rank or mpirun ended: a rank killed on purpose is to blame, whichever connection closed first.
  const auto ended = [&](int rank, double at) {
    failure.kind = "exit";
    failure.rank = rank;
    failure.failed_s = at;
    if (l.chaos_victim >= 0) {
      failure.kind = "chaos";
      failure.rank = l.chaos_victim;
      failure.failed_s = l.chaos_killed_s;
    }
    for (const auto& [r, fault] : l.faults)
      if (fault.first == "kill") {
        failure.kind = "kill";
        failure.rank = r;
        failure.failed_s = fault.second;
      }
    return Outcome::Failed;
  };
  for (;;) {
    if (interrupted) return Outcome::Interrupted;
    const std::optional<int> status = exit_status_if_ended(l.mpirun);
    // After mpirun ends, what its ranks said last still counts.
    for (const ControlMessage& m : server_->poll(status ? 0.0 : 0.05)) {
      switch (m.kind) {
        case ControlMessage::Kind::Step:
          on_step(l, m);
          break;
        case ControlMessage::Kind::Checkpoint:
          record_.snapshot_s += m.snapshot_s;
          record_.write_s += m.write_s;
          ++record_.checkpoints;
          if (m.step < record_.total_steps && plan_ranks(slots_up(server_->now()).size()) > l.ranks)
            return Outcome::Grow;
          break;
        case ControlMessage::Kind::Fault: {
          l.faults[m.rank] = {m.fault, m.received_s};
          for (size_t i = 0; i < faults_.size(); ++i)
            if (!fired_[i] && faults_[i].rank == m.rank && faults_[i].step == m.step &&
                fault_name(faults_[i].kind) == m.fault)
              fired_[i] = true;
          say("rank " + std::to_string(m.rank) + ": injected " + m.fault + " after step " +
              std::to_string(m.step));
          break;
        }
        case ControlMessage::Kind::Refused:
          say("rank " + std::to_string(m.rank) + " cannot run the job: " + m.reason);
          return Outcome::Refused;
        case ControlMessage::Kind::Done:
          l.done[size_t(m.rank)] = true;
          break;
        case ControlMessage::Kind::Closed:
          if (!l.done[size_t(m.rank)]) return ended(m.rank, m.received_s);
          break;
      }
    }
    const double now = server_->now();
    probe_hosts(now);
    // Exit status 2 is a rank's InputError (one it could not report over the channel).
    if (status) return *status == 0 ? Outcome::Finished : *status == 2 ? Outcome::Refused : ended(-1, now);
    // The watchdog: no rank got further for the hang timeout (start-up has a grace period).
    const double deadline =
        l.training ? l.last_progress_s + hang_s_ : l.started_s + hang_s_ + kStartupGrace_s;
    if (now > deadline) {
      failure.kind = "hang";
      failure.failed_s = l.training ? l.last_progress_s : l.started_s;
      for (const auto& [rank, fault] : l.faults)
        if (fault.first == "hang") {
          failure.rank = rank;
          failure.failed_s = fault.second;
        }
      return Outcome::Failed;
    }
    // An injected fault under way (a hang the watchdog has yet to see) is not struck again by chaos:
    // a kill on top would hide it. Nor is a job past its last step: there is nothing left to recover.
    const bool trained_out = steps_ > 0 && l.max_step >= steps_;
    if (chaos_ && l.training && l.faults.empty() && !trained_out && now >= l.chaos_at_s) {
      l.chaos_at_s = kInfinity;
      const int victim = chaos_->next_victim(int(l.done.size()));
      if (kill_rank(server_->pids()[size_t(victim)])) {
        l.chaos_victim = victim;
        l.chaos_killed_s = now;
        say("chaos: killed rank " + std::to_string(victim) + " after step " + std::to_string(l.max_step));
      }
    }
    if (!l.grow_announced && !live_.checkpoint_dir.empty()) {
      const int more = plan_ranks(slots_up(now).size());
      if (more > l.ranks) {
        l.grow_announced = true;
        say(std::to_string(slots_up(now).size()) + " slots up again: growing to " + std::to_string(more) +
            " ranks at the next checkpoint");
      }
    }
  }
}

int Supervisor::run() {
  if (!hosts_.empty()) {
    std::string names;
    for (int h = 0; h < hosts_.size(); ++h) names += (h ? ", " : "") + hosts_.host(h).name;
    say("on " + std::to_string(hosts_.size()) + " hosts: " + names);
  }
  say("supervising " + std::to_string(max_ranks_) + " ranks" +
      (min_ranks_ < max_ranks_ ? " (at least " + std::to_string(min_ranks_) + ")" : "") + "; heartbeats on " +
      server_->endpoint() + ", hang timeout " + options_.hang_timeout);
  if (live_.checkpoint_dir.empty() && (chaos_ || !faults_.empty()))
    say("no --checkpoint-dir: a failure restarts the run from step 0");
  bool resume = live_.resume;
  int restarts = 0, launches_without_a_step = 0, ranks_before = 0;
  for (;;) {
    int ranks = 0;
    const double waiting_since = server_->now();
    if (!wait_for_capacity(ranks)) return finish(130);
    if (recovering_) {
      record_.recoveries.back().waited_s = server_->now() - waiting_since;
      record_.recoveries.back().ranks_after = ranks;
    }
    if (ranks_before > 0 && ranks < ranks_before) {
      ++record_.shrinks;
      LiveRunOptions o = live_;
      o.ranks = ranks;
      const Plan p = prepare_live_run(o).plan;
      say("shrinking to " + std::to_string(ranks) + " ranks; the global batch stays " +
          std::to_string(setup_.scenario.training.global_batch) + " sequences (" +
          std::to_string(p.num_microbatches) + " micro-batches of " + std::to_string(p.micro_batch) +
          " per rank)");
    } else if (ranks_before > 0 && ranks > ranks_before) {
      ++record_.grows;
      say("growing back to " + std::to_string(ranks) + " ranks");
    }
    ranks_before = ranks;
    Launch l = launch(ranks, resume);
    Recovery failure;
    const Outcome outcome = watch(l, failure);
    const double stopped_at = server_->now();
    // mpirun stops other hosts' ranks through their daemons: slower than its own (a signal meanwhile
    // makes it crash).
    if (outcome != Outcome::Finished) stop_job(l.mpirun, server_->pids(), hosts_.empty() ? 1.0 : 5.0);
    if (!l.hostfile.empty()) {
      std::error_code ec;
      fs::remove(l.hostfile, ec);
    }
    record_.last_step = std::max(record_.last_step, l.max_step);
    previous_max_step_ = l.max_step;
    if (l.training) last_training_end_s_ = l.last_progress_s;
    launches_without_a_step = l.training ? 0 : launches_without_a_step + 1;
    switch (outcome) {
      case Outcome::Finished:
        // The last step's end: what follows is no training time (a launch that resumed from the final
        // checkpoint, after a failure past the last step, trained no step).
        record_.end_s = last_training_end_s_;
        return finish(0);
      case Outcome::Interrupted:
        say("interrupted: the job is stopped");
        return finish(130);
      case Outcome::Refused:
        say("not restarting: the job's input is bad (see above); a restart would fail the same way");
        return finish(2);
      case Outcome::Grow:
        say("checkpoint written with slots to spare: restarting on more ranks");
        regrowing_ = true;
        resume = true;
        continue;
      case Outcome::Failed:
        break;
    }
    failure.detected_s = stopped_at;
    failure.step = std::max<int64_t>(0, l.max_step);
    failure.ranks_before = l.ranks;
    // A slot is a data-parallel replica: the failed rank's.
    failure.slot = failure.rank >= 0 ? l.slots[size_t(replica_of(failure.rank, l.ranks))] : -1;
    if (failure.slot >= 0) down_until_[size_t(failure.slot)] = failure.failed_s + down_s_;
    if (!l.hosts.empty()) {
      // Its other ranks went with the job: the host is out as a whole, for the down time and then until
      // it answers. A host that stopped answering may not be the one whose rank was seen to fail first
      // (its ranks' connections hang while the others' end): each host of the job answers before the
      // next launch decides where to run.
      const int failed_host = failure.rank >= 0 ? l.hosts[size_t(failure.rank)] : -1;
      for (int host : std::set<int>(l.hosts.begin(), l.hosts.end()))
        hosts_.take_out(host, host == failed_host ? failure.failed_s + down_s_ : failure.failed_s);
      say("probing the hosts of the stopped job before the next launch" +
          (failed_host >= 0 && down_s_ > 0
               ? " (" + hosts_.host(failed_host).name + ", where it failed, after " + options_.down_time + ")"
               : std::string()));
    }
    const std::string who = failure.rank >= 0 ? "rank " + std::to_string(failure.rank) : "a rank";
    const std::string what = failure.kind == "hang"
                                 ? who + " hangs (no progress for " + options_.hang_timeout + ")"
                             : failure.kind == "exit" ? who + " exited"
                                                      : who + " was killed";
    say(what + " after step " + std::to_string(failure.step) + "; the job is stopped");
    record_.recoveries.push_back(failure);
    record_.end_s = stopped_at;
    if (++restarts > options_.max_restarts) {
      say("not restarting: " + std::to_string(options_.max_restarts) + " restarts allowed (--max-restarts)");
      return finish(1);
    }
    if (launches_without_a_step >= 3) {
      say("not restarting: the last 3 launches failed before their first step");
      return finish(1);
    }
    recovering_ = true;
    resume = !live_.checkpoint_dir.empty();
  }
}

int Supervisor::finish(int status) {
  std::optional<nlohmann::json> predicted;
  if (!record_.recoveries.empty() || !options_.failure_trace.empty()) {
    double interval_s = 0;
    if (!live_.checkpoint_dir.empty())
      interval_s = live_.checkpoint_every > 0        ? double(live_.checkpoint_every) * record_.mean_step_s()
                   : setup_.plan.checkpoint_interval ? setup_.plan.checkpoint_interval->value()
                                                     : 0;
    std::vector<std::string> sets = live_.sets;
    std::vector<Override> parsed;
    for (const auto& s : live_.sets) parsed.push_back(parse_override(s));
    for (auto& s : live_rank_overrides(live_.scenario, max_ranks_, parsed, hosts_.size())) sets.push_back(s);
    const FailureTrace trace =
        failure_trace(record_, fs::absolute(live_.scenario).string(), sets, interval_s, down_s_);
    const std::string path =
        !options_.failure_trace.empty()
            ? options_.failure_trace
            : (fs::temp_directory_path() / ("paratwin-trace-" + std::to_string(::getpid()) + ".json"))
                  .string();
    write_file_atomically(path, to_json(trace).dump(1) + "\n");
    if (!record_.recoveries.empty() && record_.first_step_s >= 0) {
      std::string error;
      predicted = predict_with_twin(path, live_.plan_file, error);
      if (!predicted) say("no prediction from the twin: " + error);
    }
    std::error_code ec;
    if (options_.failure_trace.empty()) fs::remove(path, ec);
  }
  const nlohmann::json reliability = reliability_json(record_, predicted);
  if (!record_.recoveries.empty()) {
    char buf[400];
    std::snprintf(buf, sizeof buf,
                  "fault tolerance: %zu failures, %d recovered (%.2f s to recover on average), %d shrinks, "
                  "%d grows; %lld steps lost (%.2f s of work)",
                  record_.recoveries.size(), reliability["restarts"].get<int>(),
                  reliability["time_to_recover_s"].get<double>(), record_.shrinks, record_.grows,
                  static_cast<long long>(record_.lost_steps), record_.lost_work_s());
    say(buf);
  }
  if (record_.checkpoints > 0) {
    char buf[300];
    std::snprintf(
        buf, sizeof buf,
        "checkpoints: %d, each holding training up %.1f ms (%.2f%% of step time) and written behind "
        "in %.1f ms",
        record_.checkpoints, 1e3 * record_.snapshot_s / record_.checkpoints,
        100 * record_.checkpoint_overhead(), 1e3 * record_.write_s / record_.checkpoints);
    say(buf);
  }
  if (predicted) {
    char buf[300];
    std::snprintf(
        buf, sizeof buf,
        "goodput %.3f measured, %.3f predicted by the twin from the failure trace (lost work %.2f s "
        "measured, %.2f s predicted)",
        record_.goodput(), (*predicted)["goodput"].get<double>(), record_.lost_work_s(),
        (*predicted)["lost_work_s"].get<double>());
    say(buf);
  }
  if (!report_tmp_.empty()) {
    std::ifstream in(report_tmp_);
    nlohmann::json report = nlohmann::json::parse(in, nullptr, false);
    std::error_code ec;
    fs::remove(report_tmp_, ec);
    if (!report.is_discarded()) {
      // One launch: the rank's restarts and lost steps (a --resume by hand) stand.
      const bool one_launch = record_.recoveries.empty() && record_.grows == 0;
      for (const auto& [key, value] : reliability.items())
        if (!one_launch || (key != "restarts" && key != "lost_steps")) report["reliability"][key] = value;
      write_file_atomically(live_.json, report.dump(2) + "\n");
    }
  }
  return status;
}

}  // namespace

int supervise_run(const LiveRunOptions& live, const LiveRunSetup& setup, const SuperviseOptions& options,
                  const std::vector<std::string>& args, const std::vector<Host>& hosts) {
  Supervisor supervisor(live, setup, options, args, hosts);
  struct sigaction action {
  }, old_int{}, old_term{};
  action.sa_handler = on_interrupt;
  ::sigaction(SIGINT, &action, &old_int);
  ::sigaction(SIGTERM, &action, &old_term);
  interrupted = 0;
  const int status = supervisor.run();
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  return status;
}

}  // namespace paratwin::exec
