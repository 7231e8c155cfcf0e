// libFuzzer target: any bytes given as a cluster file either load or raise InputError; nothing else.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "plan/spec/cluster.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    paratwin::Diagnostics diag;
    const paratwin::ClusterSpec c =
        paratwin::parse_cluster(paratwin::parse_yaml(text, "fuzz.yaml"), "cluster", diag);
    diag.throw_if_errors();
    c.peak(paratwin::Precision::Bf16);
    c.device_memory();
  } catch (const paratwin::InputError&) {
  }
  return 0;
}
