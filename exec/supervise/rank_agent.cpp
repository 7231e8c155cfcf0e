// Heartbeats and fault injection on a rank.
#include "exec/supervise/rank_agent.hpp"

#include <unistd.h>
#include <stdexcept>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <thread>

namespace paratwin::exec {

std::unique_ptr<RankAgent> RankAgent::from_environment(int rank) {
  const char* endpoint = std::getenv(kControlEndpointVariable);
  const char* token = std::getenv(kControlTokenVariable);
  if (!endpoint || !token) return nullptr;
  std::vector<Injection> faults;
  if (const char* list = std::getenv(kFaultsVariable)) {
    std::stringstream in(list);
    for (std::string item; std::getline(in, item, ',');) {
      Diagnostics diag;  // the supervisor checked them; an item that does not parse is not ours
      const Injection f = parse_injection(item, 1 << 20, 0, diag);
      if (!diag.has_errors()) faults.push_back(f);
    }
  }
  try {
    return std::make_unique<RankAgent>(std::make_unique<ControlClient>(endpoint, token, rank), rank,
                                       std::move(faults));
  } catch (const std::exception& e) {
    std::cerr << "paratwin run: rank " << rank << ": " << e.what() << "; training on unsupervised\n";
    return nullptr;
  }
}

RankAgent::RankAgent(std::unique_ptr<ControlClient> channel, int rank, std::vector<Injection> faults)
    : channel_(std::move(channel)), rank_(rank), faults_(std::move(faults)) {}

void RankAgent::after_step(const StepReport& r, const std::function<void()>& settle) {
  channel_->send(
      {{"type", "step"}, {"step", r.step}, {"steps", r.steps}, {"loss", r.loss}, {"step_s", r.step_s}});
  // A slow rank takes twice as long as it would: it sleeps as long as its step took.
  if (slow_) std::this_thread::sleep_for(std::chrono::duration<double>(r.step_s));
  bool settled = false;
  for (const Injection& f : faults_)
    if (f.step == r.step && f.kind != FaultKind::Slow && !settled) {
      settle();
      settled = true;
    }
  for (const Injection& f : faults_) {
    if (f.step != r.step || f.rank != rank_) continue;
    channel_->send({{"type", "fault"}, {"fault", fault_name(f.kind)}, {"step", r.step}});
    switch (f.kind) {
      case FaultKind::Kill:
        std::raise(SIGKILL);  // an abrupt death: no destructor, no flush
        break;
      case FaultKind::Hang:
        for (;;) ::pause();  // alive, holding its peers up in the next collective
      case FaultKind::Slow:
        slow_ = true;
        break;
      case FaultKind::Error:  // what a bug in the rank does: an exception out of its step loop
        throw std::runtime_error("injected error after step " + std::to_string(r.step));
    }
  }
}

void RankAgent::checkpoint_done(int64_t step, double snapshot_s, double write_s) {
  channel_->send({{"type", "checkpoint"}, {"step", step}, {"snapshot_s", snapshot_s}, {"write_s", write_s}});
}

void RankAgent::done() {
  channel_->send({{"type", "done"}});
}

void RankAgent::refused(const std::string& reason) {
  // Within the channel's line limit, whatever the message.
  channel_->send({{"type", "refused"}, {"reason", reason.substr(0, kMaxControlLine / 2)}});
}

}  // namespace paratwin::exec
