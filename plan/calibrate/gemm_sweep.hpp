// A GEMM sweep as `paratwin calibrate --gemm-sweep` reads it: measured throughput by shape and data type,
// one GEMM a row of a CSV file,
//
//     # comments
//     m,n,k,dtype,tflops
//     8192,8192,8192,bf16,730.0
//
// (columns in any order; dtype bf16, fp16 or fp8; tflops the measured rate, 2 m n k / time), and the
// device figures it fits: the 16-bit and fp8 GEMM shares of the peak (efficiency.gemm, gemm_fp8) and
// the tiles' fixed cost (efficiency.gemm_tile_k_steps), as the cost model times one GEMM launch by
// its shape (plan/cost/compute.hpp: wave quantization over the SMs, the K share, the launch).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "plan/calibrate/fit.hpp"
#include "plan/cost/compute.hpp"

namespace paratwin {

struct GemmSweepRow {
  cost::Gemm shape;  // m, n, k; fp8 when dtype is fp8
  Precision dtype = Precision::Bf16;
  double flops_per_s = 0;  // measured
  int line = 0;
};

struct GemmSweep {
  std::string path;
  std::vector<GemmSweepRow> rows;
};

// Throws InputError (file:line:col, what was expected, the nearest valid column or data type) on a
// missing header column, a value that is not a positive number, a data type the fit does not take.
GemmSweep parse_gemm_sweep(std::string_view text, const std::string& path);
GemmSweep load_gemm_sweep(const std::string& path);

// Fits device `cal.device` of `cal.cluster` to the sweeps' rows: each share by least squares on
// relative time residuals, the fixed cost over a grid of k-steps (kept when every row has one K).
// Lists the figures in `cal.figures`. Throws InputError when the device has no peak for a data type
// the sweeps measured.
void apply_gemm_sweeps(const std::vector<GemmSweep>& sweeps, Calibration& cal);

}  // namespace paratwin
