// An attention-kernel sweep as `paratwin calibrate --attention-sweep` reads it: a fused attention
// kernel's measured forward and backward rates by key length, and the device figures they replace
// (efficiency.flash2, flash3, triton: plan/cost/fused_attention_rate.hpp). Two forms:
//
//   CSV, one measurement a row (columns in any order; causal true or false; dtype bf16 or fp16; rates
//   in FlashAttention's convention: 4 b s^2 h d FLOPs forward, halved under a causal mask, 2.5 times
//   that backward, over the time):
//
//     # comments
//     kernel,causal,head_dim,seq_len,dtype,fwd_tflops,bwd_tflops
//     triton,true,128,8192,bf16,95.1,70.3
//
//   flash-attention's own benchmarks' output, as they print it: benchmarks/benchmark_flash_attention.py
//
//     ### causal=True, headdim=128, batch_size=2, seqlen=8192 ###
//     Flash2 fwd: 187.12 TFLOPs/s, bwd: 176.48 TFLOPs/s, fwd + bwd: 179.37 TFLOPs/s
//
//   and hopper/benchmark_attn.py (each direction on its own line; its earlier form put the direction in
//   the configuration line, "### mode = 'fwd', ... ###", and the method alone before the rate)
//
//     ### headdim = 128, causal = True, seqlen = 8192 ###
//     Fav3 fwd: 0.431ms, 637.7 TFLOPS
//     Fav3 bwd: 1.277ms, 538.2 TFLOPS
//
//   whose Flash2 and Fav2 lines are FlashAttention 2 (flash2) and Fav3 lines FlashAttention 3 (flash3);
//   their other methods (Pytorch; Triton: OpenAI's triton.ops kernel, not flash_attn_triton.py; CuDNN;
//   xformers) are no kernel of the device file and are skipped, as are rates of 0.00 (a configuration
//   that did not run) and a configuration with one direction measured.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "plan/calibrate/fit.hpp"
#include "plan/cost/fused_attention_rate.hpp"

namespace paratwin {

struct AttentionSweepRow {
  cost::FusedKernel kernel = cost::FusedKernel::Flash2;
  bool causal = true;
  int head_dim = 0, seq_len = 0;
  Precision dtype = Precision::Fp16;
  double forward_flops_per_s = 0, backward_flops_per_s = 0;  // measured
  int line = 0;
};

struct AttentionSweep {
  std::string path, form;  // form: "CSV" or "flash-attention benchmark"
  std::vector<AttentionSweepRow> rows;
  std::vector<std::string> skipped;  // what was read and not used, one line each
};

// Throws InputError (file:line:col, what was expected, the nearest valid kernel, column or data type)
// on a missing header column, a value out of range, a result line before its configuration, a sweep
// with no kernel of the device file in it.
AttentionSweep parse_attention_sweep(std::string_view text, const std::string& path);
AttentionSweep load_attention_sweep(const std::string& path);

// Replaces each measured kernel's figures on device `cal.device` of `cal.cluster` with the sweeps':
// the rates at the longest causal key length measured and, by key length, the others (the non-causal
// rows as forward_full and backward_full), each the mean of its rows as a share of the device's
// 16-bit peak. A kernel measured at several head dimensions: the largest carries the figures
// (head_dim), each other one with a causal row its by_head_dim curve. Lists the figures in
// `cal.figures`, what went unused in `cal.notes`.
// Throws InputError when a rate is above the device's peak (the wrong --cluster or --pool?) or a
// kernel has no causal row.
void apply_attention_sweeps(const std::vector<AttentionSweep>& sweeps, Calibration& cal);

}  // namespace paratwin
