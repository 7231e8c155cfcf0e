// libFuzzer target: any bytes given as a token file (`run --data FILE.bin`) are its tokens or an
// InputError; what is allocated never exceeds what the bytes hold.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "exec/data/token_file.hpp"
#include "plan/spec/diagnostics.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto tokens = paratwin::exec::parse_token_file(
        std::string_view(reinterpret_cast<const char*>(data), size), "t.bin");
    if (tokens.size() * 2 + 1024 > size) __builtin_trap();  // more tokens than the bytes hold
  } catch (const paratwin::InputError&) {
  }
  return 0;
}
