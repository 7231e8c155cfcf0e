// Calibration from microbenchmarks: nccl-tests output and GEMM sweeps read as their tools write them,
// refused with file:line:col when they are not, and the fits recovering the figures that produced
// synthetic measurements; `paratwin calibrate` writing a cluster file from them alone.
#define BOOST_TEST_MODULE microbenchmarks
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "paratwin_process.hpp"
#include "plan/calibrate/attention_sweep.hpp"
#include "plan/calibrate/gemm_sweep.hpp"
#include "plan/calibrate/nccl_tests.hpp"
#include "plan/spec/cluster.hpp"
#include "source_tree.hpp"

using namespace paratwin;
using paratwin_test::run_paratwin;
namespace fs = std::filesystem;

namespace {

const std::string kDgxH100 = paratwin_test::source_dir() + "/topologies/dgx-h100.yaml";
const std::string kDgxA100 = paratwin_test::source_dir() + "/topologies/dgx-a100-80g.yaml";

// nccl-tests' header for `ranks` ranks, `per_host` to a host; `group` writes the "Group" field of
// nccl-tests 2.10 and later.
std::string header(const std::string& test, int ranks, int per_host, bool group = true) {
  std::string h = "# nccl-tests version 2.17.9 nccl-headers=22602 nccl-library=22602\n";
  if (!test.empty()) h += "# Collective test starting: " + test + "\n";
  h += "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1073741824 step: 2(factor) warmup iters: 5\n#\n";
  h += "# Using devices\n";
  for (int r = 0; r < ranks; ++r)
    h += "#  Rank " + std::to_string(r) + (group ? " Group  0" : "") + " Pid 4242 on node" +
         std::to_string(r / per_host) + " device  " + std::to_string(r % per_host) +
         " [0x07] NVIDIA H100 80GB HBM3\n";
  h += "#\n#       size         count      type   redop    root     time   algbw   busbw  #wrong     time  "
       " algbw   busbw  #wrong\n";
  return h;
}

// A result row as nccl-tests prints it (the algbw and busbw columns are not read).
std::string row(double size, double time_s) {
  char line[256];
  std::snprintf(line, sizeof line,
                "%12.0f %13.0f     float     sum      -1 %8.2f    0.00    0.00       0 %8.2f"
                "    0.00    0.00       0\n",
                size, size / 4, time_s * 1e6, time_s * 1e6);
  return line;
}

PoolSpec& only_pool(ClusterSpec& c) {
  return c.pools.front();
}

}  // namespace

BOOST_AUTO_TEST_CASE(nccl_tests_output_is_read_as_the_tool_writes_it) {
  const std::string text = header("all_gather_perf", 8, 8) +
                           "node0:4242:4242 [0] NCCL INFO Bootstrap : Using eth0\n" + row(0, 1e-6) +
                           row(1 << 20, 40e-6) + row(1 << 30, 2.7e-3) + "# Avg bus bandwidth    : 110.98\n";
  const NcclTestsRun run = parse_nccl_tests(text, "ag.out");
  BOOST_TEST((run.kind == cost::CollectiveKind::AllGather));
  BOOST_TEST(run.ranks == 8);
  BOOST_TEST(run.hosts == 1);
  BOOST_TEST(run.device == "NVIDIA H100 80GB HBM3");
  BOOST_TEST_REQUIRE(run.rows.size() == 2u);  // size 0 left out, NCCL's log line skipped
  BOOST_TEST(run.rows[1].size.value() == double(1 << 30));
  BOOST_TEST(run.rows[1].time.value() == 2.7e-3, boost::test_tools::tolerance(1e-9));
  // nccl-tests' busbw: algbw x (n - 1) / n for an all-gather.
  BOOST_TEST(bus_bandwidth(run, run.rows[1]).value() == double(1 << 30) / 2.7e-3 * 7 / 8,
             boost::test_tools::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(older_nccl_tests_output_names_its_collective_by_file_name) {
  const NcclTestsRun run =
      parse_nccl_tests(header("", 16, 8, /*group=*/false) + row(1 << 20, 1e-4), "/logs/all_reduce_perf.log");
  BOOST_TEST((run.kind == cost::CollectiveKind::AllReduce));
  BOOST_TEST(run.ranks == 16);
  BOOST_TEST(run.hosts == 2);
}

BOOST_AUTO_TEST_CASE(what_is_not_nccl_tests_output_is_refused_where_it_goes_wrong) {
  auto message = [](const std::string& text, const std::string& path) {
    try {
      parse_nccl_tests(text, path);
    } catch (const InputError& e) {
      return e.diagnostics().front().where.str() + ": " + e.diagnostics().front().message;
    }
    return std::string("accepted");
  };
  // A row whose time is not a number: its line and the time's column.
  const std::string head = header("all_reduce_perf", 8, 8);
  const std::string bad = head + "     1048576        262144     float     sum      -1    fast\n";
  const int line = int(std::count(head.begin(), head.end(), '\n')) + 1;
  BOOST_TEST(
      message(bad, "ar.out").starts_with("ar.out:" + std::to_string(line) + ":57: expected a result row"));
  const std::string other = message(header("broadcast_perf", 8, 8) + row(1 << 20, 1e-4), "b.out");
  BOOST_TEST(other.find("nccl-tests of broadcast_perf: calibrate reads all_reduce_perf") !=
             std::string::npos);
  BOOST_TEST(message(row(1 << 20, 1e-4), "results.txt").find("which collective") != std::string::npos);
  BOOST_TEST(message("# Collective test starting: all_gather_perf\n" + row(1 << 20, 1e-4), "x")
                 .find("no '#  Rank") != std::string::npos);
  BOOST_TEST(message(header("all_gather_perf", 8, 8), "x").find("no result rows") != std::string::npos);
  // Ranks spread unevenly over hosts: not a placement the cost model has.
  const std::string uneven =
      header("all_reduce_perf", 8, 8) +
      "#  Rank  8 Group  0 Pid 4242 on node1 device  0 [0x07] NVIDIA H100 80GB HBM3\n" + row(1 << 20, 1e-4);
  BOOST_TEST(message(uneven, "x").find("1 ranks on node1, 8 on node0") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(one_hosts_run_becomes_the_nodes_curve_of_that_collective) {
  Calibration cal = start_calibration(load_cluster_file(kDgxH100), "");
  std::string text = header("reduce_scatter_perf", 8, 8);
  for (double size : {1 << 20, 1 << 24, 1 << 28}) text += row(size, 5e-6 + size / 300e9);
  apply_nccl_tests({parse_nccl_tests(text, "rs.out")}, cal);
  const PoolSpec& pool = only_pool(cal.cluster);
  BOOST_TEST_REQUIRE(pool.intra_node.reduce_scatter_curve.has_value());
  BOOST_TEST(pool.intra_node.reduce_scatter_curve->points.size() == 3u);
  // The cost model now times each measured size as measured.
  for (double size : {1 << 20, 1 << 24, 1 << 28}) {
    const double model =
        cost::collective_time(cost::CollectiveKind::ReduceScatter, Bytes(size), {8, 8}, pool, cal.cluster)
            .time.value();
    // nccl-tests prints times to 10 ns.
    BOOST_TEST(model == 5e-6 + size / 300e9, boost::test_tools::tolerance(1e-3));
  }
  BOOST_TEST(cal.figures.back().field == "pools.dgx.intra_node.busbw.reduce_scatter");
  BOOST_TEST(cal.figures.back().fitted);
  // A run on half a node is not the node's curve: kept, and said so.
  Calibration half = start_calibration(load_cluster_file(kDgxH100), "dgx");
  apply_nccl_tests({parse_nccl_tests(header("all_reduce_perf", 4, 4) + row(1 << 20, 1e-4), "ar4.out")}, half);
  BOOST_TEST(!half.figures.back().fitted);
  BOOST_TEST(half.figures.back().measured.find("ran on 4 of a node's 8 GPUs") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(runs_across_hosts_recover_the_nics_bandwidth_and_latency) {
  // The truth: NICs at 37 GB/s with 7 us; the catalog's figures are the fit's starting point.
  ClusterSpec truth = load_cluster_file(kDgxH100);
  only_pool(truth).nic.achievable = BytesPerSecond(37e9);
  only_pool(truth).nic.latency = Seconds(7e-6);
  std::string text = header("all_reduce_perf", 32, 8);
  for (double size = 1 << 16; size <= double(1 << 30); size *= 4)
    text += row(size, cost::collective_time(cost::CollectiveKind::AllReduce, Bytes(size), {32, 8},
                                            only_pool(truth), truth)
                          .time.value());
  Calibration cal = start_calibration(load_cluster_file(kDgxH100), "");
  apply_nccl_tests({parse_nccl_tests(text, "ar32.out")}, cal);
  BOOST_TEST(only_pool(cal.cluster).nic.achievable->value() == 37e9, boost::test_tools::tolerance(0.01));
  BOOST_TEST(only_pool(cal.cluster).nic.latency.value() == 7e-6, boost::test_tools::tolerance(0.05));
  // All-to-alls across hosts (MoE's expert parallelism) time the same NICs.
  std::string a2a = header("alltoall_perf", 16, 8);
  for (double size = 1 << 16; size <= double(1 << 30); size *= 4)
    a2a += row(size, cost::collective_time(cost::CollectiveKind::AllToAll, Bytes(size), {16, 8},
                                           only_pool(truth), truth)
                         .time.value());
  // Calibrating a cluster file of fewer nodes than the run had hosts: the run's own size is fitted.
  ClusterSpec one_node = load_cluster_file(kDgxH100);
  only_pool(one_node).nodes = 1;
  Calibration by_a2a = start_calibration(one_node, "");
  apply_nccl_tests({parse_nccl_tests(a2a, "a2a16.out")}, by_a2a);
  BOOST_TEST(only_pool(by_a2a.cluster).nic.achievable->value() == 37e9, boost::test_tools::tolerance(0.01));
}

BOOST_AUTO_TEST_CASE(a_gemm_sweep_recovers_the_shares_and_the_tiles_fixed_cost) {
  ClusterSpec truth = load_cluster_file(kDgxH100);
  DeviceSpec& d = truth.devices.at("h100-sxm-80g");
  d.efficiency.gemm = 0.70, d.efficiency.gemm_fp8 = 0.65, d.efficiency.gemm_tile_k_steps = 3;
  std::string csv = "# synthetic: the cost model's own times\ntflops,dtype,m,n,k\n";
  for (const char* dtype : {"bf16", "fp8"})
    for (double k : {512, 1024, 4096, 8192})
      for (double mn : {2048, 6144}) {
        GemmSweepRow r;
        r.shape.m = r.shape.n = mn, r.shape.k = k;
        r.dtype = std::string(dtype) == "fp8" ? Precision::Fp8 : Precision::Bf16;
        r.shape.fp8 = r.dtype == Precision::Fp8;
        const double s = cost::gemm_time(r.shape, d, r.dtype).value() + d.efficiency.kernel_launch.value();
        char line[128];
        std::snprintf(line, sizeof line, "%.6f,%s,%.0f,%.0f,%.0f\n", r.shape.flops() / s / 1e12, dtype, mn,
                      mn, k);
        csv += line;
      }
  Calibration cal = start_calibration(load_cluster_file(kDgxH100), "");
  apply_gemm_sweeps({parse_gemm_sweep(csv, "sweep.csv")}, cal);
  const EfficiencySpec& e = cal.cluster.devices.at("h100-sxm-80g").efficiency;
  BOOST_TEST(e.gemm == 0.70, boost::test_tools::tolerance(0.002));
  BOOST_TEST(*e.gemm_fp8 == 0.65, boost::test_tools::tolerance(0.002));
  BOOST_TEST(e.gemm_tile_k_steps == 3.0);
  // One K cannot tell the fixed cost from the share: kept, and said so.
  Calibration one_k = start_calibration(load_cluster_file(kDgxH100), "");
  apply_gemm_sweeps({parse_gemm_sweep("m,n,k,dtype,tflops\n8192,8192,8192,bf16,700\n", "one.csv")}, one_k);
  BOOST_TEST(one_k.cluster.devices.at("h100-sxm-80g").efficiency.gemm_tile_k_steps == 2.0);
  BOOST_TEST(one_k.figures.back().measured.starts_with("kept"));
}

BOOST_AUTO_TEST_CASE(the_500_w_h100s_gemm_shares_are_the_fit_of_its_measured_sweep) {
  // The catalog's figures for a part measured in public are what calibrate makes of the measurement
  // (topologies/sweeps/, issue 19's rule): change one without the other and this fails.
  const std::string cluster = paratwin_test::source_dir() + "/topologies/grand-teton-h100.yaml";
  const std::string sweep = paratwin_test::source_dir() + "/topologies/sweeps/grand-teton-h100-gemm.csv";
  std::ifstream in(sweep);
  const std::string csv((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Calibration cal = start_calibration(load_cluster_file(cluster), "");
  apply_gemm_sweeps({parse_gemm_sweep(csv, sweep)}, cal);
  const EfficiencySpec& fitted = cal.cluster.devices.at("h100-sxm-96g-500w").efficiency;
  const EfficiencySpec& catalog = load_cluster_file(cluster).devices.at("h100-sxm-96g-500w").efficiency;
  BOOST_TEST(catalog.gemm == fitted.gemm, boost::test_tools::tolerance(0.001));
  BOOST_TEST(*catalog.gemm_fp8 == *fitted.gemm_fp8, boost::test_tools::tolerance(0.001));
  BOOST_TEST(catalog.gemm_tile_k_steps == fitted.gemm_tile_k_steps);
}

BOOST_AUTO_TEST_CASE(a_gemm_sweep_that_is_not_one_is_refused_cell_by_cell) {
  try {
    parse_gemm_sweep("m,n,k,dtype,tflops\n8192,8192,-1,bf17,700\n", "s.csv");
    BOOST_FAIL("accepted");
  } catch (const InputError& e) {
    BOOST_TEST_REQUIRE(e.diagnostics().size() == 2u);
    BOOST_TEST(e.diagnostics()[0].where.str() == "s.csv:2:11");
    BOOST_TEST(e.diagnostics()[1].message.find("did you mean 'bf16'") != std::string::npos);
  }
  try {
    parse_gemm_sweep("m,n,kk,dtype,tflops\n", "s.csv");
    BOOST_FAIL("accepted");
  } catch (const InputError& e) {
    BOOST_TEST(e.diagnostics().front().message.find("did you mean 'k'") != std::string::npos);
  }
  try {
    parse_gemm_sweep("m,n,n,k,dtype,tflops\n8192,8192,8192,fp8,1300\n", "s.csv");
    BOOST_FAIL("accepted");
  } catch (const InputError& e) {
    BOOST_TEST(e.diagnostics().front().where.str() == "s.csv:1:5");
    BOOST_TEST(e.diagnostics().front().message == "column 'n' a second time");
  }
}

BOOST_AUTO_TEST_CASE(an_attention_sweep_replaces_the_kernels_figures_by_key_length_and_head_size) {
  // Two rows at 8192 keys average; the head-dim-64 row becomes the curve of that head size.
  const std::string csv =
      "# flash_attn_triton.py on an A100 (synthetic)\n"
      "kernel,causal,head_dim,seq_len,dtype,fwd_tflops,bwd_tflops\n"
      "triton,true,128,8192,bf16,120,80\n"
      "triton,true,128,8192,bf16,130,90\n"
      "triton,false,128,8192,bf16,150,100\n"
      "triton,true,128,2048,bf16,90,60\n"
      "triton,true,64,2048,bf16,200,150\n"
      "triton,false,128,1024,bf16,110,70\n";
  Calibration cal = start_calibration(load_cluster_file(kDgxA100), "");
  const double flash2_before = cal.cluster.devices.at("a100-sxm-80g").efficiency.flash2->forward;
  apply_attention_sweeps({parse_attention_sweep(csv, "triton.csv")}, cal);
  const EfficiencySpec& e = cal.cluster.devices.at("a100-sxm-80g").efficiency;
  BOOST_TEST_REQUIRE(e.triton.has_value());
  const auto& f = *e.triton;
  BOOST_TEST(f.seq_len == 8192);
  BOOST_TEST(f.forward == 125.0 / 312, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(f.backward == 85.0 / 312, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(*f.forward_full == 150.0 / 312, boost::test_tools::tolerance(1e-9));
  BOOST_TEST_REQUIRE(f.by_seq_len.size() == 1u);  // 2048; 1024 has no causal row
  BOOST_TEST(f.by_seq_len.at(2048).forward == 90.0 / 312, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(!f.by_seq_len.at(2048).forward_full.has_value());
  // What the cost model reads between the lengths measured: log-linear, as for the catalog's figures.
  BOOST_TEST(cost::fused_rates_at(f, 4096).forward == (90.0 + 125.0) / 2 / 312,
             boost::test_tools::tolerance(1e-9));
  BOOST_TEST(e.flash2->forward == flash2_before);  // another kernel's figures untouched
  BOOST_TEST(cal.figures.back().field == "devices.a100-sxm-80g.efficiency.triton");
  BOOST_TEST(cal.figures.back().samples == 6);
  BOOST_TEST(cal.figures.back().measured.find("head dims 64 by_head_dim") != std::string::npos);
  BOOST_TEST_REQUIRE(cal.notes.size() == 1u);
  BOOST_TEST(cal.notes[0].find("without a mask at 1024 keys, head dim 128, not used") != std::string::npos);
  // Heads of 64 read their own curve, at every key length (it has one); other sizes the figures'.
  BOOST_TEST(f.head_dim == 128);
  BOOST_TEST_REQUIRE(f.by_head_dim.size() == 1u);
  BOOST_TEST(cost::fused_rates_at(cost::fused_curve_for(f, 64), 8192).forward == 200.0 / 312,
             boost::test_tools::tolerance(1e-9));
  BOOST_TEST(&cost::fused_curve_for(f, 96) == static_cast<const EfficiencySpec::FusedCurve*>(&f));
}

BOOST_AUTO_TEST_CASE(flash_attentions_benchmark_output_is_read_as_it_prints_it) {
  // benchmarks/benchmark_flash_attention.py's lines (verbose output between them ignored); its
  // "Triton" is another kernel than flash_attn_triton.py, and 0.00 is a configuration that did not run.
  const std::string text =
      "### causal=False, headdim=128, batch_size=2, seqlen=8192 ###\n"
      "Flash2 fwd: 187.12 TFLOPs/s, bwd: 176.48 TFLOPs/s, fwd + bwd: 179.37 TFLOPs/s\n"
      "Pytorch fwd: 0.00 TFLOPs/s, bwd: 0.00 TFLOPs/s, fwd + bwd: 0.00 TFLOPs/s\n"
      "### causal=True, headdim=128, batch_size=2, seqlen=8192 ###\n"
      "FlashAttention - Forward pass\n"
      "  3.39 ms\n"
      "Flash2 fwd: 172.50 TFLOPs/s, bwd: 180.00 TFLOPs/s, fwd + bwd: 177.80 TFLOPs/s\n"
      "Triton fwd: 95.00 TFLOPs/s, bwd: 60.00 TFLOPs/s, fwd + bwd: 67.20 TFLOPs/s\n"
      "### causal=True, headdim=128, batch_size=16, seqlen=1024 ###\n"
      "Flash2 fwd: 0.00 TFLOPs/s, bwd: 0.00 TFLOPs/s, fwd + bwd: 0.00 TFLOPs/s\n";
  const AttentionSweep sweep = parse_attention_sweep(text, "fa2.txt");
  BOOST_TEST(sweep.form == "flash-attention benchmark");
  BOOST_TEST_REQUIRE(sweep.rows.size() == 2u);
  BOOST_TEST(sweep.rows[1].line == 7);
  BOOST_TEST(sweep.rows[1].causal);
  Calibration cal = start_calibration(load_cluster_file(kDgxA100), "");
  apply_attention_sweeps({sweep}, cal);
  const auto& f = *cal.cluster.devices.at("a100-sxm-80g").efficiency.flash2;
  BOOST_TEST(f.seq_len == 8192);
  BOOST_TEST(f.by_seq_len.empty());
  BOOST_TEST(f.forward == 172.5 / 312, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(*f.backward_full == 176.48 / 312, boost::test_tools::tolerance(1e-9));
  BOOST_TEST_REQUIRE(cal.notes.size() == 3u);
  BOOST_TEST(cal.notes[0].find("1 Pytorch line(s) skipped") != std::string::npos);
  BOOST_TEST(cal.notes[1].find("OpenAI's triton.ops kernel") != std::string::npos);
  BOOST_TEST(cal.notes[2].find("1 configuration(s) of 0.00 TFLOP/s skipped") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(flash_attention_3s_benchmark_output_is_read_in_both_its_forms) {
  // hopper/benchmark_attn.py prints each direction on a line of its own; its earlier form put the
  // direction in the configuration line (mode = 'fwd') and the method alone before the rate.
  const std::string text =
      "\n### headdim = 128, causal = True, seqlen = 8192 ###\n"
      "Fav2 fwd: 0.950ms, 289.4 TFLOPS\n"
      "Fav2 bwd: 2.400ms, 286.4 TFLOPS\n"
      "CuDNN fwd: 0.430ms, 639.2 TFLOPS\n"
      "CuDNN bwd: 1.290ms, 532.8 TFLOPS\n"
      "Fav3 fwd: 0.431ms, 637.7 TFLOPS\n"
      "Fav3 bwd: 1.277ms, 538.2 TFLOPS\n"
      "### mode = 'fwd', batch_size = 2, headdim = 128, seqlen = 2048, causal = True ###\n"
      "Fav3: 0.319ms, 545.0 TFLOPS\n"
      "### mode = 'bwd', batch_size = 2, headdim = 128, seqlen = 2048, causal = True ###\n"
      "Fav3: 0.900ms, 476.7 TFLOPS\n"
      "### mode = 'fwd', batch_size = 2, headdim = 128, seqlen = 1024, causal = True ###\n"
      "Fav3: 0.200ms, 443.0 TFLOPS\n";
  const AttentionSweep sweep = parse_attention_sweep(text, "fa3.txt");
  BOOST_TEST_REQUIRE(sweep.rows.size() == 3u);  // Fav2 at 8192; Fav3 at 2048 and 8192 (1024: forward alone)
  Calibration cal = start_calibration(load_cluster_file(kDgxH100), "");
  apply_attention_sweeps({sweep}, cal);
  const EfficiencySpec& e = cal.cluster.devices.at("h100-sxm-80g").efficiency;
  BOOST_TEST(e.flash3->seq_len == 8192);
  BOOST_TEST(e.flash3->forward == 637.7 / 989, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(e.flash3->backward == 538.2 / 989, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(e.flash3->by_seq_len.at(2048).backward == 476.7 / 989, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(e.flash2->forward == 289.4 / 989, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(e.flash2->by_seq_len.empty());
  BOOST_TEST_REQUIRE(cal.notes.size() == 2u);
  BOOST_TEST(cal.notes[0].find("2 CuDNN line(s) skipped") != std::string::npos);
  BOOST_TEST(cal.notes[1].find("1 configuration(s) with a forward or a backward rate alone") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(an_attention_sweep_that_is_not_one_is_refused_where_it_goes_wrong) {
  auto refused = [](const std::string& text, const std::string& where, const std::string& says) {
    try {
      Calibration cal = start_calibration(load_cluster_file(kDgxA100), "");
      apply_attention_sweeps({parse_attention_sweep(text, "a.csv")}, cal);
      BOOST_ERROR("accepted: " + text);
    } catch (const InputError& e) {
      BOOST_TEST_INFO(e.what());
      BOOST_TEST(e.diagnostics().front().where.str() == where);
      BOOST_TEST(e.diagnostics().front().message.find(says) != std::string::npos);
    }
  };
  const std::string header = "kernel,causal,head_dim,seq_len,dtype,fwd_tflops,bwd_tflops\n";
  refused(header + "flash,true,128,8192,bf16,120,80\n", "a.csv:2:1", "did you mean 'flash2'");
  refused(header + "triton,yes,128,8192,bf16,120,80\n", "a.csv:2:8", "expected true, false");
  refused(header + "triton,true,128,8192,fp8,120,80\n", "a.csv:2:22", "expected bf16, fp16");
  refused(header + "triton,true,128,8192.5,bf16,120,80\n", "a.csv:2:17", "expected a whole number");
  refused("kernel,causal,head_dim,seqlen,dtype,fwd_tflops,bwd_tflops\n", "a.csv:1:24",
          "did you mean 'seq_len'");
  // A rate above the device's peak: measured on another device than the cluster's.
  refused(header + "triton,true,128,8192,bf16,400,80\n", "a.csv:2:1", "measured on another device?");
  refused(header + "triton,false,128,8192,bf16,150,100\n", "a.csv", "no causal measurement at head dim 128");
  refused(
      "Flash2 fwd: 172.50 TFLOPs/s, bwd: 180.00 TFLOPs/s, fwd + bwd: 177.80 TFLOPs/s\n"
      "### causal=True, headdim=128, batch_size=2, seqlen=8192 ###\n",
      "a.csv:1:1", "a result line before any");
  refused(
      "### causal=True, headdim=128, batch_size=2, seqlen=8192 ###\n"
      "Triton fwd: 95.00 TFLOPs/s, bwd: 60.00 TFLOPs/s, fwd + bwd: 67.20 TFLOPs/s\n",
      "a.csv", "no Flash2, Fav2 or Fav3 result");
  refused("### headdim = 128, causal = Maybe, seqlen = 8192 ###\nFav3 fwd: 0.431ms, 637.7 TFLOPS\n",
          "a.csv:1:29", "expected causal = True or False");
}

BOOST_AUTO_TEST_CASE(calibrate_writes_a_cluster_from_microbenchmarks_alone) {
  const fs::path dir = paratwin_test::test_dir("paratwin-microbench-");
  const fs::path ag = dir / "all_gather.out", out = dir / "calibrated.yaml";
  const fs::path fa = dir / "fa2.txt";
  std::ofstream(ag) << header("all_gather_perf", 8, 8) << row(1 << 20, 45e-6) << row(1 << 30, 2.9e-3);
  std::ofstream(fa) << "### causal=True, headdim=128, batch_size=2, seqlen=8192 ###\n"
                       "Flash2 fwd: 330.00 TFLOPs/s, bwd: 300.00 TFLOPs/s, fwd + bwd: 308.00 TFLOPs/s\n";
  const auto written = run_paratwin("calibrate --cluster dgx-h100 --nccl-tests " + ag.string() +
                                    " --attention-sweep " + fa.string() + " -o " + out.string());
  BOOST_TEST_INFO(written.text);
  BOOST_TEST_REQUIRE(written.status == 0);
  BOOST_TEST(written.text.find("all_gather inside a node") != std::string::npos);
  BOOST_TEST(written.text.find("FlashAttention 2 (head dim 128)") != std::string::npos);
  const auto valid = run_paratwin("validate " + out.string());
  BOOST_TEST_INFO(valid.text);
  BOOST_TEST(valid.status == 0);
  const auto& flash2 = load_cluster_file(out.string()).devices.at("h100-sxm-80g").efficiency.flash2;
  BOOST_TEST(flash2->forward == 330e12 / 989e12, boost::test_tools::tolerance(1e-3));
  BOOST_TEST(flash2->by_seq_len.empty());
  // Nothing to calibrate from: refused before anything is written.
  const fs::path none = dir / "none.yaml";
  const auto refused = run_paratwin("calibrate --cluster dgx-h100 -o " + none.string());
  BOOST_TEST(refused.status == 2);
  BOOST_TEST(refused.text.find("nothing to calibrate from") != std::string::npos);
  BOOST_TEST(!fs::exists(none));
  fs::remove_all(dir);
}
