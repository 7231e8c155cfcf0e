// Typed reading of DocNode values with precise messages: what was expected, where, and the nearest
// valid spelling. Readers report into Diagnostics and keep going, so one pass finds every problem.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "plan/spec/diagnostics.hpp"
#include "plan/spec/doc.hpp"
#include "plan/spec/suggest.hpp"
#include "plan/spec/units.hpp"

namespace paratwin {

// Where each field of a loaded spec was written, keyed by its dotted path ("plan.tp"), so that
// semantic checks after loading can point at the right line.
using FieldLocations = std::map<std::string, Location>;

template <class E>
using EnumNames = std::vector<std::pair<std::string, E>>;

template <class E>
std::string enum_name(E value, const EnumNames<E>& names) {
  for (const auto& [n, v] : names)
    if (v == value) return n;
  return "?";
}

template <class E>
std::vector<std::string> enum_choices(const EnumNames<E>& names) {
  std::vector<std::string> out;
  for (const auto& [n, v] : names) out.push_back(n);
  return out;
}

// Value readers for one node; `what` names the field in messages ("model.heads").
std::optional<std::int64_t> read_int(const DocNode& node, const std::string& what, Diagnostics& diag,
                                     std::int64_t min = 1,
                                     std::int64_t max = std::numeric_limits<std::int64_t>::max());
std::optional<double> read_number(const DocNode& node, const std::string& what, Diagnostics& diag,
                                  double min = 0, double max = std::numeric_limits<double>::infinity(),
                                  bool min_exclusive = false);
std::optional<bool> read_bool(const DocNode& node, const std::string& what, Diagnostics& diag);
std::optional<std::string> read_string(const DocNode& node, const std::string& what, Diagnostics& diag);
std::optional<double> read_quantity(const DocNode& node, const std::string& what, Dimension dimension,
                                    Diagnostics& diag, bool allow_zero = false);
std::optional<std::string> read_choice(const DocNode& node, const std::string& what,
                                       const std::vector<std::string>& choices, Diagnostics& diag);

template <class E>
std::optional<E> read_enum(const DocNode& node, const std::string& what, const EnumNames<E>& names,
                           Diagnostics& diag) {
  auto chosen = read_choice(node, what, enum_choices(names), diag);
  if (!chosen) return std::nullopt;
  for (const auto& [n, v] : names)
    if (n == *chosen) return v;
  return std::nullopt;
}

template <class Q>
constexpr Dimension dimension_of();
template <>
constexpr Dimension dimension_of<Bytes>() {
  return Dimension::DataSize;
}
template <>
constexpr Dimension dimension_of<BytesPerSecond>() {
  return Dimension::Bandwidth;
}
template <>
constexpr Dimension dimension_of<Seconds>() {
  return Dimension::Duration;
}
template <>
constexpr Dimension dimension_of<Flops>() {
  return Dimension::FlopCount;
}
template <>
constexpr Dimension dimension_of<FlopsPerSecond>() {
  return Dimension::FlopRate;
}
template <>
constexpr Dimension dimension_of<Watts>() {
  return Dimension::Power;
}
template <>
constexpr Dimension dimension_of<Dollars>() {
  return Dimension::Money;
}

// Reads one YAML mapping. Every key asked for becomes a known key; finish() reports the others as
// unknown, with the nearest known key. Absent optional keys leave the output at its default.
class MapReader {
 public:
  // `path` is the dotted name of this mapping ("cluster.pools.dgx"), "" at a document's top.
  MapReader(const DocNode& node, std::string path, Diagnostics& diag, FieldLocations* locations = nullptr);

  bool is_mapping() const { return node_.is_mapping(); }
  const DocNode& node() const { return node_; }
  const std::string& path() const { return path_; }
  Diagnostics& diagnostics() { return diag_; }
  std::string field(std::string_view key) const;  // "cluster.pools.dgx.nodes"

  // Marks `key` as known and returns its value, or nullptr when absent.
  const DocNode* get(std::string_view key);
  // As get(), with an error when absent.
  const DocNode* require(std::string_view key);

  // Typed shorthands: return true when the key was present and valid.
  bool read(std::string_view key, std::int64_t& out, std::int64_t min = 1,
            std::int64_t max = std::numeric_limits<std::int64_t>::max(), bool required = false);
  bool read(std::string_view key, int& out, int min = 1, int max = std::numeric_limits<int>::max(),
            bool required = false);
  bool read(std::string_view key, double& out, double min, double max, bool required = false);
  bool read(std::string_view key, bool& out);
  bool read(std::string_view key, std::string& out, bool required = false);

  template <class Q>
  bool read_quantity(std::string_view key, Q& out, bool required = false, bool allow_zero = false) {
    const DocNode* n = required ? require(key) : get(key);
    if (!n) return false;
    auto v = paratwin::read_quantity(*n, field(key), dimension_of<Q>(), diag_, allow_zero);
    if (v) out = Q(*v);
    return v.has_value();
  }
  template <class Q>
  bool read_quantity(std::string_view key, std::optional<Q>& out, bool allow_zero = false) {
    Q q;
    if (!read_quantity(key, q, false, allow_zero)) return false;
    out = q;
    return true;
  }

  template <class E>
  bool read_enum(std::string_view key, E& out, const EnumNames<E>& names, bool required = false) {
    const DocNode* n = required ? require(key) : get(key);
    if (!n) return false;
    auto v = paratwin::read_enum(*n, field(key), names, diag_);
    if (v) out = *v;
    return v.has_value();
  }

  // Reports keys that no get()/read() asked for. Call once, after reading every known key.
  void finish();

 private:
  const DocNode& node_;
  std::string path_;
  Diagnostics& diag_;
  FieldLocations* locations_;
  std::vector<std::string> known_;
};

}  // namespace paratwin
