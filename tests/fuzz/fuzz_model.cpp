// libFuzzer target: any bytes given as a model file either load or raise InputError; nothing else.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "plan/spec/model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    paratwin::Diagnostics diag;
    const paratwin::ModelSpec m =
        paratwin::parse_model(paratwin::parse_yaml(text, "fuzz.yaml"), "model", diag);
    diag.throw_if_errors();
    paratwin::count_parameters(m);
    paratwin::training_flops_per_token(m, m.seq_len);
  } catch (const paratwin::InputError&) {
  }
  return 0;
}
