// A fused attention kernel's rates at the key length it runs over. FlashAttention's throughput rises
// with the sequence: each block row pays a prologue and an epilogue, and under a causal mask the
// diagonal blocks, which do masked work, are a larger share of a short row. Device files give the
// rates at one length (seq_len) and optionally at others (by_seq_len), from kernel benchmarks.
#pragma once

#include "plan/spec/cluster.hpp"

namespace paratwin::cost {

// The rates at `key_length`: interpolated linearly in log(length) between the listed lengths, held
// at the nearest listed length outside them. Each rate uses the lengths that list it; a non-causal
// rate the figures at seq_len do not give stays absent (the causal one stands in for it, as ever).
// A kernel with no by_seq_len, or a key length <= 0 (unknown), gets the figures at seq_len.
EfficiencySpec::FusedRates fused_rates_at(const EfficiencySpec::FusedAttention& kernel, double key_length);

}  // namespace paratwin::cost
