// libFuzzer target: any bytes given as a scenario either load (resolving catalog references and
// running every semantic check) or raise InputError; nothing else. The first line, when it starts
// with "#set ", is used as a --set override so that overrides get fuzzed too.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "plan/spec/scenario.hpp"
#include "plan/spec/summary.hpp"
#include "plan/topology/job_placement.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    std::vector<paratwin::Override> overrides;
    if (text.starts_with("#set ")) {
      const size_t end = text.find('\n');
      overrides.push_back(
          paratwin::parse_override(std::string(text.substr(5, end == text.npos ? text.npos : end - 5))));
    }
    paratwin::DocNode doc = paratwin::parse_yaml(text, "fuzz.yaml");
    if (paratwin::holds_jobs(doc)) {  // several jobs: loaded and packed
      paratwin::JobsScenario jobs = paratwin::load_jobs_scenario(std::move(doc), overrides);
      paratwin::place_jobs(jobs);
      paratwin::to_text(jobs, paratwin::placement_costs(jobs));
      return 0;
    }
    const paratwin::ScenarioSpec s = paratwin::load_scenario(std::move(doc), overrides);
    paratwin::to_text(paratwin::summarize(s));
  } catch (const paratwin::InputError&) {
  }
  return 0;
}
