// Parsing injected faults, and the chaos schedule's random draws.
#include "exec/supervise/fault_plan.hpp"

#include <charconv>
#include <cmath>
#include <optional>

#include "plan/spec/suggest.hpp"

namespace paratwin::exec {

const char* fault_name(FaultKind kind) {
  switch (kind) {
    case FaultKind::Kill:
      return "kill";
    case FaultKind::Hang:
      return "hang";
    case FaultKind::Slow:
      return "slow";
    case FaultKind::Error:
      return "error";
  }
  return "?";
}

std::string Injection::text() const {
  return std::string(fault_name(kind)) + "@" + std::to_string(step) + ":" + std::to_string(rank);
}

namespace {

// A whole decimal number in text[begin, end); nullopt when it is not one.
std::optional<int64_t> whole_number(const std::string& text, size_t begin, size_t end) {
  int64_t v = 0;
  const char* first = text.data() + begin;
  const char* last = text.data() + end;
  auto [ptr, ec] = std::from_chars(first, last, v);
  if (begin == end || ec != std::errc() || ptr != last) return std::nullopt;
  return v;
}

}  // namespace

Injection parse_injection(const std::string& text, int ranks, int64_t steps, Diagnostics& diag) {
  const auto at = [&text](size_t column0) {
    return Location{"<--inject " + text + ">", 1, int(column0) + 1};
  };
  const std::string form = "expected KIND@STEP:RANK such as kill@12:1, with KIND kill, hang, slow or error";
  Injection out;
  const size_t sign = text.find('@'), colon = text.find(':', sign == std::string::npos ? 0 : sign);
  if (sign == std::string::npos || colon == std::string::npos) {
    diag.error(at(0), form);
    return out;
  }
  const std::string kind = text.substr(0, sign);
  const std::vector<std::string> kinds = {"kill", "hang", "slow", "error"};
  if (kind == "kill")
    out.kind = FaultKind::Kill;
  else if (kind == "hang")
    out.kind = FaultKind::Hang;
  else if (kind == "slow")
    out.kind = FaultKind::Slow;
  else if (kind == "error")
    out.kind = FaultKind::Error;
  else
    diag.error(at(0), "unknown fault kind '" + kind + "'; expected kill, hang, slow or error" +
                          did_you_mean(kind, kinds));
  const auto step = whole_number(text, sign + 1, colon);
  if (!step || *step < 1 || (steps > 0 && *step > steps))
    diag.error(at(sign + 1), "expected a step from 1 to " +
                                 (steps > 0 ? std::to_string(steps) : "the run's last") +
                                 " after '@', found '" + text.substr(sign + 1, colon - sign - 1) + "'");
  else
    out.step = *step;
  const auto rank = whole_number(text, colon + 1, text.size());
  if (!rank || *rank < 0 || *rank >= ranks)
    diag.error(at(colon + 1), "expected a rank from 0 to " + std::to_string(ranks - 1) +
                                  " after ':', found '" + text.substr(colon + 1) + "'");
  else
    out.rank = int(*rank);
  return out;
}

std::vector<Injection> parse_injections(const std::vector<std::string>& texts, int ranks, int64_t steps) {
  Diagnostics diag;
  std::vector<Injection> out;
  for (const auto& t : texts) out.push_back(parse_injection(t, ranks, steps, diag));
  diag.throw_if_errors();
  return out;
}

ChaosSchedule::ChaosSchedule(uint64_t seed, int kills, double mean_interval_s)
    : random_(seed), kills_left_(kills), mean_interval_s_(mean_interval_s) {}

double ChaosSchedule::next_delay_s() {
  return -mean_interval_s_ * std::log(random_.uniform_open());
}

int ChaosSchedule::next_victim(int ranks) {
  --kills_left_;
  return int(random_.below(uint64_t(ranks)));
}

}  // namespace paratwin::exec
