// libFuzzer target: any bytes given as a checkpoint from elsewhere. The input holds the checkpoint's
// files one after another, separated by a line "--8<--": MANIFEST.json, weights.bin, optimizer.bin,
// state.json, plan.yaml (missing ones are left out). They are written into a directory and loaded for a
// model of 4 parameters: the result is a state or std::runtime_error, nothing else, and no more is
// allocated than the files hold.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "exec/checkpoint/checkpoint.hpp"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fs::path dir =
      fs::temp_directory_path() / ("paratwin-fuzz-ckpt-" + std::to_string(::getpid()));
  std::string_view input(reinterpret_cast<const char*>(data), size);
  // The pure parts first, on the whole input.
  try {
    paratwin::exec::parse_checkpoint_manifest(input, 4);
  } catch (const std::runtime_error&) {
  }
  try {
    paratwin::exec::parse_checkpoint_state(input);
  } catch (const std::runtime_error&) {
  }
  // Then the files.
  fs::remove_all(dir);
  fs::create_directories(dir);
  const char* names[] = {"MANIFEST.json", "weights.bin", "optimizer.bin", "state.json", "plan.yaml"};
  constexpr std::string_view kCut = "\n--8<--\n";
  for (const char* name : names) {
    if (input.empty()) break;
    const size_t cut = input.find(kCut);
    std::ofstream(dir / name, std::ios::binary) << input.substr(0, cut);
    input = cut == std::string_view::npos ? std::string_view() : input.substr(cut + kCut.size());
  }
  try {
    paratwin::exec::load_checkpoint(dir.string(), 4);
  } catch (const std::runtime_error&) {
  }
  return 0;
}
