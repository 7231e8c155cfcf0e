// libFuzzer target: any bytes given as nccl-tests output (`calibrate --nccl-tests`) either read into a
// run that sets a node's curve or the NIC of dgx-h100's pool, or raise InputError.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "plan/calibrate/nccl_tests.hpp"
#include "plan/spec/catalog.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const paratwin::NcclTestsRun run = paratwin::parse_nccl_tests(text, "all_reduce.out");
    static const paratwin::ClusterSpec cluster =
        paratwin::load_cluster_file(paratwin::Catalog::installed().root() + "/topologies/dgx-h100.yaml");
    paratwin::Calibration cal = paratwin::start_calibration(cluster, "");
    paratwin::apply_nccl_tests({run}, cal);
  } catch (const paratwin::InputError&) {
  }
  return 0;
}
