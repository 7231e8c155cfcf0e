// The fuzz targets' inputs replayed in the ordinary build, for `make test`: each target's committed
// corpus, its regressions (what fuzzing once found) and the catalog go through the very function
// libFuzzer calls, once each. Fuzzing itself, with ASan and UBSan, is `make fuzz`
// (tests/fuzz/CMakeLists.txt). An input that crashes, or lets an exception out of the target, ends this
// program with a failure. Each fuzz_TARGET.cpp is compiled here with its LLVMFuzzerTestOneInput renamed
// paratwin_fuzz_TARGET.
//   fuzz_replay TARGET FILE_OR_DIRECTORY...
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

// Each target's entry point; fuzz_targets.inc (written by tests/CMakeLists.txt from its list of
// targets) has an X(target) line for each.
#define X(name) extern "C" int paratwin_fuzz_##name(const std::uint8_t* data, std::size_t size);
#include "fuzz_targets.inc"
#undef X

namespace fs = std::filesystem;

namespace {

using Target = int (*)(const std::uint8_t*, std::size_t);

struct Named {
  std::string_view name;
  Target target;
};

constexpr Named kTargets[] = {
#define X(name) Named{#name, paratwin_fuzz_##name},
#include "fuzz_targets.inc"
#undef X
};

// The files of each argument (a directory's, sorted, or the file itself).
std::vector<fs::path> inputs_of(int argc, char** argv) {
  std::vector<fs::path> out;
  for (int i = 2; i < argc; ++i) {
    const fs::path p = argv[i];
    if (!fs::is_directory(p)) {
      out.push_back(p);
      continue;
    }
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(p))
      if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    out.insert(out.end(), files.begin(), files.end());
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Target target = nullptr;
  for (const Named& t : kTargets)
    if (argc > 1 && t.name == argv[1]) target = t.target;
  if (!target) {
    std::fprintf(stderr, "usage: fuzz_replay TARGET FILE_OR_DIRECTORY... (TARGET: model, cluster, ...)\n");
    return 2;
  }
  const std::vector<fs::path> inputs = inputs_of(argc, argv);
  for (const fs::path& input : inputs) {
    std::ifstream in(input, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "fuzz_replay: cannot read %s\n", input.c_str());
      return 1;
    }
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    // Named before it runs: a crash leaves the name of the input that made it as the last line.
    std::fprintf(stderr, "%s\n", input.c_str());
    target(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("fuzz_replay %s: %zu inputs, none crashed\n", argv[1], inputs.size());
  return inputs.empty() ? 1 : 0;
}
