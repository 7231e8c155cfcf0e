// libFuzzer target: any bytes given as a live run's failure trace (`simulate --failure-trace`) either
// read into a trace applied to a scenario, or raise InputError.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "plan/io/failure_trace.hpp"
#include "plan/spec/catalog.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const paratwin::ScenarioSpec base =
      paratwin::load_scenario(paratwin::Catalog::installed().root() + "/scenarios/live-cpu-tiny.yaml");
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const paratwin::FailureTrace trace =
        paratwin::parse_failure_trace(paratwin::parse_yaml(text, "trace.json"));
    paratwin::ScenarioSpec scenario = base;
    paratwin::apply_failure_trace(trace, scenario);
  } catch (const paratwin::InputError&) {
  }
  return 0;
}
