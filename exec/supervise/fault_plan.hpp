// Faults that a live run injects into itself, for tests and demos: `--inject KIND@STEP:RANK` (a
// rank dies, hangs, slows down or fails with an error at the end of a step) and `--chaos SEED` (the
// supervisor kills random ranks at random moments, a bounded number of times).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/spec/diagnostics.hpp"
#include "plan/util/seeded_random.hpp"

namespace paratwin::exec {

enum class FaultKind { Kill, Hang, Slow, Error };

struct Injection {
  FaultKind kind = FaultKind::Kill;
  int64_t step = 1;  // fires at the end of this step (1-based: steps done)
  int rank = 0;

  std::string text() const;  // "kill@12:3", as parse_injection reads it
};

const char* fault_name(FaultKind kind);  // "kill", "hang", "slow", "error"

// Parses KIND@STEP:RANK. RANK must be below `ranks`, STEP between 1 and `steps` (0: not known yet).
// Bad input goes into `diag` located in the argument ("<--inject kill@x:1>:1:6"), with what was
// expected and the nearest valid kind.
Injection parse_injection(const std::string& text, int ranks, int64_t steps, Diagnostics& diag);
// Every argument; throws InputError listing every problem.
std::vector<Injection> parse_injections(const std::vector<std::string>& texts, int ranks, int64_t steps);

// Chaos: the moments and victims of random kills, the same for the same seed on every machine.
class ChaosSchedule {
 public:
  ChaosSchedule(uint64_t seed, int kills, double mean_interval_s);

  int kills_left() const { return kills_left_; }
  // Seconds of running training before the next kill: exponential with the mean interval.
  double next_delay_s();
  // Which of `ranks` ranks it kills; counts the kill.
  int next_victim(int ranks);

 private:
  SeededRandom random_;
  int kills_left_;
  double mean_interval_s_;
};

}  // namespace paratwin::exec
