// How an MoE layer's router spreads tokens over its experts, as `model.moe.routing` states it:
// evenly (every twin's assumption), by a Zipf law re-drawn per step, by fixed shares, or as a
// live run measured it. plan/cost/expert_load.hpp turns it into tokens per expert-parallel rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/spec/diagnostics.hpp"
#include "plan/spec/doc.hpp"
#include "plan/spec/reader.hpp"

namespace paratwin {

enum class RoutingKind { Balanced, Zipf, Shares, Measured };
extern const EnumNames<RoutingKind> kRoutingKindNames;

struct MoeRouting {
  RoutingKind kind = RoutingKind::Balanced;
  // Zipf: the expert of popularity rank i (1-based) gets a share proportional to i^-s; which expert
  // holds which rank is a permutation drawn from `seed`, afresh for every step and every MoE layer.
  double zipf_s = 1.0;
  std::uint64_t seed = 0;
  // Shares: one weight per expert, the same for every MoE layer and step (normalized to sum 1).
  std::vector<double> shares;
  // Measured: tokens routed to each expert, one row per MoE layer in model order (a single row
  // serves every MoE layer), as `paratwin calibrate` writes it from a live run's profile.
  std::vector<std::vector<double>> tokens;

  bool balanced() const { return kind == RoutingKind::Balanced; }
  bool operator==(const MoeRouting&) const = default;
};

// Parses `routing`: the scalar `balanced`, or a mapping {kind: zipf, s, seed} | {kind: shares,
// shares: [...]} | {kind: measured, tokens: [[...], ...]}. Shares and token rows must have one
// non-negative entry per expert (`experts`, when known) and a positive sum; measured rows number 1 or
// `moe_layers`. Problems go to `diag` with their location and the nearest valid choice.
MoeRouting parse_moe_routing(const DocNode& node, const std::string& path, int experts, int moe_layers,
                             Diagnostics& diag);

// The flow-style YAML of a routing, which parse_moe_routing reads back to an equal value.
std::string to_yaml(const MoeRouting& routing);

}  // namespace paratwin
