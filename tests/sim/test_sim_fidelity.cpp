// The simulator on runs of the validation set (bench/fidelity/): every mechanism the analytic evaluator
// prices is a task of the Program, so SimGrid, running the same Program with contention on the links,
// never finishes a step sooner and, on these clusters, at most a few percent later. A cost added to
// the analytic evaluator alone, or a task the simulator drops, fails here. One run per kind of
// mechanism; `bench/fidelity.sh build OUT --simulate` compares the whole set.
#define BOOST_TEST_MODULE sim_fidelity
#include <boost/test/unit_test.hpp>

#include "bench/fidelity_simulated.hpp"
#include "catalog_scenario.hpp"
#include "source_tree.hpp"

using namespace paratwin;
using namespace paratwin::fidelity;
using paratwin_test::catalog;

namespace {

const Run& run(const std::string& id) {
  static const Manifest m = load_manifest(paratwin_test::source_dir() + "/bench/fidelity/manifest.yaml");
  for (const Run& r : m.runs)
    if (r.id == id) return r;
  BOOST_FAIL("no run " << id << " in the manifest");
  throw std::logic_error("unreachable");
}

void check(const std::string& id) {
  const Run& r = run(id);
  const double analytic = evaluate_run(r, catalog()).predicted_s;
  const double simulated = simulated_iteration_time(r, catalog());
  BOOST_TEST_MESSAGE(id << ": analytic " << analytic << " s, simulated " << simulated << " s");
  BOOST_TEST(simulated >= analytic * (1 - 1e-6),
             id << ": simulated " << simulated << " s < analytic " << analytic);
  BOOST_TEST(simulated <= analytic * 1.05,
             id << ": simulated " << simulated << " s > 1.05 x analytic " << analytic);
}

}  // namespace

// FSDP: per-layer gathers and reduce-scatters, prefetched, with recomputation (llm-foundry, one node).
BOOST_AUTO_TEST_CASE(fsdp_full_shard) {
  check("MF-H03");
}

// HSDP: sharded within 12 GPUs, replicated over 8 groups (the FSDP blog).
BOOST_AUTO_TEST_CASE(hybrid_sharding) {
  check("FS-05");
}

// Interleaved pipeline with tp 8, sequence parallelism and ZeRO 3 resharded after the step (torchtitan 405B).
BOOST_AUTO_TEST_CASE(interleaved_pipeline_with_zero3) {
  check("TT-14");
}

// torch's ring attention across nodes beside tp 8 and pp 8 (torchtitan 405B at 128K tokens).
BOOST_AUTO_TEST_CASE(context_parallel_ring_across_nodes) {
  check("TT-18");
}

// Transformer Engine's p2p context-parallel ring (NeMo).
BOOST_AUTO_TEST_CASE(te_p2p_ring) {
  check("NM-11");
}

// AsyncTP's decomposed all-gathers and reduce-scatters (torchtitan 70B, tp 8).
BOOST_AUTO_TEST_CASE(async_tensor_parallel) {
  check("TT-12");
}

// Megatron's tp 8 with sequence parallelism over 48 nodes, one NIC a DP ring.
BOOST_AUTO_TEST_CASE(megatron_tp_over_many_nodes) {
  check("MG-04");
}

// MoE: the all-to-all dispatcher across nodes with ep 8 under pp 4 (GPT-OSS-120B).
BOOST_AUTO_TEST_CASE(moe_all_to_all) {
  check("NM-16");
}

// The run where the simulator finds the most contention the analytic evaluator leaves out (3%):
// Nemotron-3 22B's interleaved pipeline (pp 4, 10 virtual stages) beside tp 2 and dp 8, in fp8.
BOOST_AUTO_TEST_CASE(most_contended_run) {
  check("NM-09");
}
