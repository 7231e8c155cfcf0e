// libFuzzer target: any bytes given as a GEMM sweep (`calibrate --gemm-sweep`) either read into rows
// that fit dgx-h100's GEMM figures, or raise InputError.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "plan/calibrate/gemm_sweep.hpp"
#include "plan/spec/catalog.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const paratwin::GemmSweep sweep = paratwin::parse_gemm_sweep(text, "sweep.csv");
    static const paratwin::ClusterSpec cluster =
        paratwin::load_cluster_file(paratwin::Catalog::installed().root() + "/topologies/dgx-h100.yaml");
    paratwin::Calibration cal = paratwin::start_calibration(cluster, "");
    paratwin::apply_gemm_sweeps({sweep}, cal);
  } catch (const paratwin::InputError&) {
  }
  return 0;
}
