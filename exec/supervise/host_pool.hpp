// The hosts of a supervised run across machines: which are up, which a launch of some ranks uses and
// where its ranks go. A host is the unit of failure: a rank lost takes its host out (its other ranks
// went with the job) for at least the down time and then until it answers a probe (host_probe.hpp),
// and the job shrinks to whole hosts that are up.
#pragma once

#include <string>
#include <vector>

#include "exec/supervise/hosts.hpp"

namespace paratwin::exec {

class HostPool {
 public:
  HostPool() = default;  // this machine only
  // `host_of_rank`: the full job's placement (host_of_ranks); `slot_of_rank`: each rank's
  // data-parallel replica, the supervisor's slot.
  HostPool(std::vector<Host> hosts, const std::vector<int>& host_of_rank,
           const std::vector<int>& slot_of_rank);

  bool empty() const { return hosts_.empty(); }
  int size() const { return int(hosts_.size()); }
  const Host& host(int i) const { return hosts_[size_t(i)]; }
  // Hosts a launch of `world` processes spans: whole hosts of the full job's ranks per host; 0 when
  // `world` is not a whole number of them.
  int nodes_for(int world) const;
  // Whether every host of replica `slot` (of the full job) is up at time `t`.
  bool slot_up(int slot, double t) const;
  // The hosts up at `t`, in the order given.
  std::vector<Host> up(double t, std::vector<int>& indices) const;
  // Out until `until_s` at least, and then until answered() says it answers again.
  void take_out(int host, double until_s) {
    down_until_[size_t(host)] = until_s;
    answering_[size_t(host)] = false;
    ++outages_[size_t(host)];
  }
  // How many times `host` was taken out: a probe's answer counts for the outage it was started in.
  int outages(int host) const { return outages_[size_t(host)]; }
  // The hosts out whose down time is over at `t` and that have not answered yet: to be probed.
  std::vector<int> awaiting_answer(double t) const;
  void answered(int host) { answering_[size_t(host)] = true; }

 private:
  bool is_up(size_t host, double t) const { return down_until_[host] <= t && answering_[host]; }

  std::vector<Host> hosts_;
  std::vector<std::vector<int>> hosts_of_slot_;
  std::vector<double> down_until_;
  std::vector<bool> answering_;
  std::vector<int> outages_;
  int ranks_per_host_ = 0;
};

}  // namespace paratwin::exec
