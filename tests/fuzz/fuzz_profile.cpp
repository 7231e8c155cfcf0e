// libFuzzer target: any bytes given as a live run's profile (`calibrate`'s input) either read into a
// profile whose inputs are lowered on local-cpu and matched task by task, or raise InputError.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "plan/calibrate/profile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const paratwin::Profile profile =
        paratwin::parse_profile(paratwin::parse_yaml(text, "profile.json"), "profile.json");
    paratwin::lower_profile(profile, "local-cpu");
  } catch (const paratwin::InputError&) {
  }
  return 0;
}
