// A fused attention kernel's rates at the key length it runs over. FlashAttention's throughput rises
// with the sequence: each block row pays a prologue and an epilogue, and under a causal mask the
// diagonal blocks, which do masked work, are a larger share of a short row. Device files give the
// rates at one length (seq_len) and optionally at others (by_seq_len), from kernel benchmarks.
#pragma once

#include <optional>

#include "plan/spec/cluster.hpp"
#include "plan/spec/scenario.hpp"

namespace paratwin::cost {

// The rates at `key_length`: interpolated linearly in log(length) between the listed lengths, held
// at the nearest listed length outside them. Each rate uses the lengths that list it; a non-causal
// rate the figures at seq_len do not give stays absent (the causal one stands in for it, as ever).
// A curve with no by_seq_len, or a key length <= 0 (unknown), gives the figures at seq_len.
EfficiencySpec::FusedRates fused_rates_at(const EfficiencySpec::FusedCurve& curve, double key_length);

// The kernel's curve for heads the kernel computes at `kernel_head_dim` (fused_kernel_head_dim): its
// by_head_dim entry of that size, else its own figures.
const EfficiencySpec::FusedCurve& fused_curve_for(const EfficiencySpec::FusedAttention& kernel,
                                                  int kernel_head_dim);

// The fused kernels the device files measure.
enum class FusedKernel { Flash2, Flash3, Triton };

// The kernel a fused attention kind runs: flash is FlashAttention 3 where the device file has its
// figures, else 2. Unfused attention runs none (not to be asked).
FusedKernel fused_kernel_of(AttentionKind kind, const EfficiencySpec& efficiency);

// The device file's figures for `kernel` (efficiency.flash2, flash3 or triton); absent if it has none. The
// second form for calibrate, which replaces them.
const std::optional<EfficiencySpec::FusedAttention>& fused_figures(const EfficiencySpec& efficiency,
                                                                   FusedKernel kernel);
std::optional<EfficiencySpec::FusedAttention>& fused_figures(EfficiencySpec& efficiency, FusedKernel kernel);

// The head dimension a FlashAttention kernel computes a head of `head_dim` at: its kernels are compiled
// for a few head sizes, and a head runs in the smallest that holds it, the rest padded (FA2: 32, 64,
// 96, 128, 160, 192, 256, HEADDIM_SWITCH in csrc/flash_attn/src/static_switch.h; FA3: 64, 96, 128,
// 192, 256, round_up_headdim in hopper/flash_api.cpp). A 112-wide head (MPT-30B) runs at 128, an 80-wide
// one (MPT-3B) at 96. Sizes past 256 are returned as they are.
int flash_kernel_head_dim(bool flash3, int head_dim);

// The same for any fused kernel. The Triton kernel pads a head to the next power of two, at least 16
// (BLOCK_HEADDIM = max(next_power_of_2(d), 16) in flash_attn_triton.py), and takes heads up to 128.
int fused_kernel_head_dim(FusedKernel kernel, int head_dim);

}  // namespace paratwin::cost
