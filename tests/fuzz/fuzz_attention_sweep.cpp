// libFuzzer target: any bytes given as an attention-kernel sweep (`calibrate --attention-sweep`, CSV or
// flash-attention's benchmark output) either read into rows that replace dgx-a100-80g's fused-attention
// figures, or raise InputError.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "plan/calibrate/attention_sweep.hpp"
#include "plan/spec/catalog.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const paratwin::AttentionSweep sweep = paratwin::parse_attention_sweep(text, "sweep.txt");
    static const paratwin::ClusterSpec cluster =
        paratwin::load_cluster_file(paratwin::Catalog::installed().root() + "/topologies/dgx-a100-80g.yaml");
    paratwin::Calibration cal = paratwin::start_calibration(cluster, "");
    paratwin::apply_attention_sweeps({sweep}, cal);
  } catch (const paratwin::InputError&) {
  }
  return 0;
}
