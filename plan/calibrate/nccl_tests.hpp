// nccl-tests output (NVIDIA/nccl-tests: all_reduce_perf, all_gather_perf, reduce_scatter_perf,
// alltoall_perf) as `paratwin calibrate --nccl-tests` reads it, and what it sets in the calibrated
// cluster: a run inside one host of all the node's GPUs gives the node's measured curve of that
// collective (pools.<pool>.intra_node.busbw.<kind>), which the cost model then times that collective
// inside a node by at every size (an all-to-all has no curve of its own: it moves an all-gather's
// volume); runs across hosts give the NIC's achievable bandwidth and latency, fitted as the cost model
// times such a collective (plan/calibrate/inter_host_fit.hpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "plan/calibrate/fit.hpp"
#include "plan/cost/collectives.hpp"

namespace paratwin {

// One message size of a run: nccl-tests' size column (the whole buffer: an all-gather's output, a
// reduce-scatter's input) and its out-of-place time.
struct NcclTestsRow {
  Bytes size;
  Seconds time;
  int line = 0;
};

struct NcclTestsRun {
  std::string path;
  cost::CollectiveKind kind = cost::CollectiveKind::AllReduce;
  int ranks = 0;                   // the "#  Rank" lines
  int hosts = 0;                   // distinct host names among them
  std::string device;              // as the first rank names it ("NVIDIA H100 80GB HBM3")
  std::vector<NcclTestsRow> rows;  // sizes above 0, in file order
};

// Parses nccl-tests' standard output. The collective comes from its "# Collective test starting:"
// line, else from a file name that contains all_reduce, all_gather, reduce_scatter or alltoall. Throws
// InputError (file:line:col, what was expected) when the text is not such an output: no rank lines,
// no result rows, a row whose size or time is not a number, another collective, ranks spread unevenly
// over the hosts.
NcclTestsRun parse_nccl_tests(std::string_view text, const std::string& path);
NcclTestsRun load_nccl_tests(const std::string& path);

// nccl-tests' bus bandwidth of a row: size / time x 2 (n - 1) / n for an all-reduce, x (n - 1) / n
// for the others (n ranks).
BytesPerSecond bus_bandwidth(const NcclTestsRun& run, const NcclTestsRow& row);

// Sets in `cal.cluster`'s pool `cal.pool` what the runs measured, and lists each figure in
// `cal.figures` (replacing a fit of the same figure from profiles). Throws InputError when a run does
// not fit the pool: more ranks on a host than the pool's nodes have GPUs.
void apply_nccl_tests(const std::vector<NcclTestsRun>& runs, Calibration& cal);

}  // namespace paratwin
