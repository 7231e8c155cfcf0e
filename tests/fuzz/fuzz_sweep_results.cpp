// libFuzzer target: any bytes given as a sweep's results (`sweep --resume --json FILE`) are read a
// point at a time or refused with std::runtime_error; nothing else.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "plan/sweep/results.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  paratwin::SweepResults results;
  try {
    paratwin::read_results(
        in, [&](const paratwin::SweepHeader& h) { static_cast<paratwin::SweepHeader&>(results) = h; },
        [&](const paratwin::PointResult& p) { paratwin::add_point(results, p); });
    (void)paratwin::to_csv(results);
  } catch (const std::runtime_error&) {
  }
  return 0;
}
