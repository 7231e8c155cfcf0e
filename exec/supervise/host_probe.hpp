// Whether the hosts that were taken out answer again: `mpirun -np 1 --host HOST true` for each,
// started through the launch path the job uses (the rsh agent or ssh, or Slurm), so a host answers
// when a job can start on it again. Probes run beside the supervisor's loop, never blocking it.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "exec/supervise/host_pool.hpp"

namespace paratwin::exec {

class HostProber {
 public:
  HostProber() = default;
  HostProber(const HostProber&) = delete;
  HostProber& operator=(const HostProber&) = delete;
  ~HostProber();  // probes still running are killed

  // Called from the supervisor's loops: reads the end of running probes (a host that answered is
  // marked so in `pool`; one that did not is probed again after kFirstInterval_s, twice as long after
  // each further silence up to kLastInterval_s; a probe that takes over kTimeout_s is a host that does
  // not answer), and starts a probe of every host that awaits an
  // answer and has none running. What it finds is said through `say`: that a host does not answer
  // (once per outage) and that it answers again.
  void poll(HostPool& pool, double now_s, const std::function<void(const std::string&)>& say);

  // Whether every host awaiting an answer at `now_s` has had a probe end in its present outage (so
  // a relaunch decided now knows which hosts answer).
  bool settled(const HostPool& pool, double now_s) const;

  static constexpr double kTimeout_s = 5, kFirstInterval_s = 1, kLastInterval_s = 30;

 private:
  struct Probe {
    pid_t pid = -1;
    int outage = -1;           // the host's outage it was started in
    int answered_outage = -1;  // the outage of the last probe that ended
    double started_s = 0, next_s = 0;
    double interval_s = kFirstInterval_s;  // after a silence: doubles up to kLastInterval_s
    bool said_silent = false;              // "does not answer" said in this outage
  };
  void stop(Probe& probe);
  void start(const HostPool& pool, int host, double now_s);

  std::vector<Probe> probes_;  // per host
};

}  // namespace paratwin::exec
