// Parsing and writing `model.moe.routing`.
#include "plan/spec/moe_routing.hpp"

#include <cstdio>

namespace paratwin {

const EnumNames<RoutingKind> kRoutingKindNames = {{"balanced", RoutingKind::Balanced},
                                                  {"zipf", RoutingKind::Zipf},
                                                  {"shares", RoutingKind::Shares},
                                                  {"measured", RoutingKind::Measured}};

namespace {

// One row of non-negative numbers, one per expert, with a positive sum.
std::vector<double> read_row(const DocNode& node, const std::string& what, int experts, Diagnostics& diag) {
  std::vector<double> row;
  if (!node.is_sequence()) {
    diag.error(node.location, what + ": expected a list of " +
                                  (experts > 0 ? std::to_string(experts) + " numbers (one per expert)"
                                               : std::string("numbers, one per expert")));
    return row;
  }
  double sum = 0;
  for (size_t i = 0; i < node.items.size(); ++i) {
    const auto v = read_number(node.items[i], what + "[" + std::to_string(i) + "]", diag, 0.0);
    row.push_back(v.value_or(0.0));
    sum += row.back();
  }
  if (experts > 0 && static_cast<int>(row.size()) != experts)
    diag.error(node.location, what + ": expected " + std::to_string(experts) +
                                  " entries (model.moe.experts), got " + std::to_string(row.size()));
  else if (!(sum > 0))
    diag.error(node.location,
               what + ": expected at least one positive entry (the shares are normalized by their sum)");
  return row;
}

}  // namespace

MoeRouting parse_moe_routing(const DocNode& node, const std::string& path, int experts, int moe_layers,
                             Diagnostics& diag) {
  MoeRouting r;
  if (node.is_scalar()) {
    // Only `balanced` stands alone; the other kinds need their parameters.
    if (auto kind = read_enum(node, path, kRoutingKindNames, diag)) {
      if (*kind != RoutingKind::Balanced)
        diag.error(node.location, path + ": '" + enum_name(*kind, kRoutingKindNames) +
                                      "' needs its parameters; write a mapping such as {kind: zipf, s: 1.2, "
                                      "seed: 1} or use 'balanced'");
    }
    return r;
  }
  MapReader mr(node, path, diag);
  if (!mr.is_mapping()) {
    diag.error(node.location, path + ": expected 'balanced' or a mapping with kind: " +
                                  "balanced | zipf | shares | measured");
    return r;
  }
  mr.read_enum("kind", r.kind, kRoutingKindNames, true);
  if (r.kind == RoutingKind::Zipf) {
    mr.read("s", r.zipf_s, 0.0, 16.0, true);
    std::int64_t seed = 0;
    if (mr.read("seed", seed, 0)) r.seed = static_cast<std::uint64_t>(seed);
  } else if (r.kind == RoutingKind::Shares) {
    if (const DocNode* s = mr.require("shares")) r.shares = read_row(*s, mr.field("shares"), experts, diag);
  } else if (r.kind == RoutingKind::Measured) {
    if (const DocNode* t = mr.require("tokens")) {
      if (!t->is_sequence() || t->items.empty()) {
        diag.error(t->location, mr.field("tokens") +
                                    ": expected a list of rows, one per MoE layer, each a list of " +
                                    "tokens per expert");
      } else {
        for (size_t l = 0; l < t->items.size(); ++l)
          r.tokens.push_back(
              read_row(t->items[l], mr.field("tokens") + "[" + std::to_string(l) + "]", experts, diag));
        const int rows = static_cast<int>(r.tokens.size());
        if (moe_layers > 0 && rows != 1 && rows != moe_layers)
          diag.error(t->location, mr.field("tokens") + ": expected 1 row (for every MoE layer) or " +
                                      std::to_string(moe_layers) + " (one per MoE layer), got " +
                                      std::to_string(rows));
      }
    }
  }
  mr.finish();
  return r;
}

namespace {

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

std::string list(const std::vector<double>& v) {
  std::string y = "[";
  for (size_t i = 0; i < v.size(); ++i) y += (i ? ", " : "") + number(v[i]);
  return y + "]";
}

}  // namespace

std::string to_yaml(const MoeRouting& r) {
  switch (r.kind) {
    case RoutingKind::Balanced:
      return "balanced";
    case RoutingKind::Zipf:
      return "{kind: zipf, s: " + number(r.zipf_s) + ", seed: " + std::to_string(r.seed) + "}";
    case RoutingKind::Shares:
      return "{kind: shares, shares: " + list(r.shares) + "}";
    case RoutingKind::Measured: {
      std::string rows;
      for (size_t l = 0; l < r.tokens.size(); ++l) rows += (l ? ", " : "") + list(r.tokens[l]);
      return "{kind: measured, tokens: [" + rows + "]}";
    }
  }
  return "balanced";
}

}  // namespace paratwin
