// libFuzzer target: any bytes given as a scenario either load (resolving catalog references and
// running every semantic check) or raise InputError; nothing else. The first line, when it starts
// with "#set ", is used as a --set override so that overrides get fuzzed too.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "plan/spec/scenario.hpp"
#include "plan/spec/summary.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    std::vector<paratwin::Override> overrides;
    if (text.starts_with("#set ")) {
      const size_t end = text.find('\n');
      overrides.push_back(
          paratwin::parse_override(std::string(text.substr(5, end == text.npos ? text.npos : end - 5))));
    }
    const paratwin::ScenarioSpec s =
        paratwin::load_scenario(paratwin::parse_yaml(text, "fuzz.yaml"), overrides);
    paratwin::to_text(paratwin::summarize(s));
  } catch (const paratwin::InputError&) {
  }
  return 0;
}
