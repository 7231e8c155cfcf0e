// Probing hosts that are out with a one-process mpirun job each.
#include "exec/supervise/host_probe.hpp"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <stdexcept>

#include "exec/supervise/job_process.hpp"
#include "plan/util/child_process.hpp"

namespace paratwin::exec {

HostProber::~HostProber() {
  for (Probe& p : probes_) stop(p);
}

void HostProber::stop(Probe& probe) {
  if (probe.pid <= 0) return;
  ::kill(-probe.pid, SIGKILL);  // mpirun leads its group: its rsh agent goes too
  wait_for_process(probe.pid);
  probe.pid = -1;
}

void HostProber::start(const HostPool& pool, int host, double now_s) {
  Probe& p = probes_[size_t(host)];
  std::vector<std::string> argv = {"mpirun", "-np", "1", "--host", pool.host(host).name};
  if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
  argv.insert(argv.end(), {"--bind-to", "none", "true"});
  try {
    p.pid = spawn_process(argv, {.search_path = true,
                                 .own_process_group = true,
                                 .input = ChildStream::Null,
                                 .output = ChildStream::Null,
                                 .errors = ChildStream::Null})
                .pid;
  } catch (const std::runtime_error&) {
    p.pid = -1;  // no mpirun: the launch says so
  }
  if (p.outage != pool.outages(host)) p.interval_s = kFirstInterval_s;  // a new outage
  p.outage = pool.outages(host);
  p.started_s = now_s;
}

void HostProber::poll(HostPool& pool, double now_s, const std::function<void(const std::string&)>& say) {
  probes_.resize(size_t(pool.size()));
  for (int h = 0; h < pool.size(); ++h) {
    Probe& p = probes_[size_t(h)];
    if (p.pid <= 0) continue;
    const std::optional<int> status = exit_status_if_ended(p.pid);
    if (!status && now_s - p.started_s < kTimeout_s) continue;
    if (!status) stop(p);
    p.pid = -1;
    p.answered_outage = p.outage;
    if (p.outage != pool.outages(h)) continue;  // taken out again meanwhile: probe anew
    if (status == 0) {
      pool.answered(h);
      say("host " + pool.host(h).name + (p.said_silent ? " answers again" : " answers"));
      p.said_silent = false;
    } else {
      if (!p.said_silent)
        say("host " + pool.host(h).name + " does not answer (" +
            (status ? "mpirun there exits with status " + std::to_string(*status)
                    : "no answer in " + std::to_string(int(kTimeout_s)) + " s") +
            "); probing it again after 1 s, then at most every " + std::to_string(int(kLastInterval_s)) +
            " s");
      p.said_silent = true;
      p.next_s = now_s + p.interval_s;
      p.interval_s = std::min(kLastInterval_s, 2 * p.interval_s);
    }
  }
  for (int h : pool.awaiting_answer(now_s)) {
    Probe& p = probes_[size_t(h)];
    const bool new_outage = p.answered_outage != pool.outages(h) && p.outage != pool.outages(h);
    if (p.pid <= 0 && (now_s >= p.next_s || new_outage)) start(pool, h, now_s);
  }
}

bool HostProber::settled(const HostPool& pool, double now_s) const {
  for (int h : pool.awaiting_answer(now_s))
    if (size_t(h) >= probes_.size() || probes_[size_t(h)].answered_outage != pool.outages(h)) return false;
  return true;
}

}  // namespace paratwin::exec
