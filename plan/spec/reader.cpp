// Typed readers for located YAML values.
#include "plan/spec/reader.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace paratwin {
namespace {

std::string got(const DocNode& node) {
  if (node.is_scalar() && node.quoted) return "the quoted text \"" + node.scalar + "\"";
  return describe(node);
}

bool is_auto_like(const DocNode& node) {
  return node.is_scalar() && node.scalar == "auto";
}

std::string range_text(std::int64_t min, std::int64_t max) {
  return max == std::numeric_limits<std::int64_t>::max()
             ? "at least " + std::to_string(min)
             : "between " + std::to_string(min) + " and " + std::to_string(max);
}

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

std::optional<std::int64_t> read_int(const DocNode& node, const std::string& what, Diagnostics& diag,
                                     std::int64_t min, std::int64_t max) {
  std::int64_t value = 0;
  bool parsed = false;
  if (node.is_scalar() && !node.quoted) {
    const std::string& s = node.scalar;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    parsed = ec == std::errc() && ptr == s.data() + s.size();
    if (!parsed) {
      // 1e3 or 2048.0 are integers written as numbers; accept them when exact.
      double d = 0;
      auto [p2, e2] = std::from_chars(s.data(), s.data() + s.size(), d);
      if (e2 == std::errc() && p2 == s.data() + s.size() && std::isfinite(d) && d == std::floor(d) &&
          std::fabs(d) < 9e18) {
        value = static_cast<std::int64_t>(d);
        parsed = true;
      }
    }
  }
  if (!parsed && node.is_scalar() && !node.quoted && !node.scalar.empty() &&
      node.scalar.find_first_not_of("+-0123456789") == std::string::npos) {
    diag.error(node.location, what + " must be " + range_text(min, max) + ", got " + node.scalar);
    return std::nullopt;
  }
  if (!parsed) {
    diag.error(node.location, "expected an integer for " + what + ", got " + got(node) +
                                  (is_auto_like(node) ? " ('auto' is not allowed here)" : ""));
    return std::nullopt;
  }
  if (value < min || value > max) {
    diag.error(node.location, what + " must be " + range_text(min, max) + ", got " + std::to_string(value));
    return std::nullopt;
  }
  return value;
}

std::optional<double> read_number(const DocNode& node, const std::string& what, Diagnostics& diag, double min,
                                  double max, bool min_exclusive) {
  double value = 0;
  bool parsed = false;
  if (node.is_scalar() && !node.quoted) {
    const std::string& s = node.scalar;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    parsed = ec == std::errc() && ptr == s.data() + s.size() && std::isfinite(value);
  }
  if (!parsed) {
    diag.error(node.location, "expected a number for " + what + ", got " + got(node));
    return std::nullopt;
  }
  const bool below = min_exclusive ? value <= min : value < min;
  if (below || value > max) {
    std::string range = (min_exclusive ? "greater than " : "at least ") + format_number(min);
    if (!std::isinf(max)) range += " and at most " + format_number(max);
    diag.error(node.location, what + " must be " + range + ", got " + node.scalar);
    return std::nullopt;
  }
  return value;
}

std::optional<bool> read_bool(const DocNode& node, const std::string& what, Diagnostics& diag) {
  if (node.is_scalar() && !node.quoted) {
    if (node.scalar == "true") return true;
    if (node.scalar == "false") return false;
  }
  std::string hint;
  if (node.is_scalar()) {
    // YAML 1.1 spellings that YAML 1.2 (and ParaTwin) read as text.
    static const std::vector<std::pair<std::string, std::string>> old = {
        {"yes", "true"}, {"on", "true"}, {"y", "true"}, {"no", "false"}, {"off", "false"}, {"n", "false"}};
    for (const auto& [word, meant] : old)
      if (edit_distance(node.scalar, word) == 0) hint = " — did you mean '" + meant + "'?";
    if (hint.empty()) hint = did_you_mean(node.scalar, {"true", "false"});
  }
  diag.error(node.location, "expected true or false for " + what + ", got " + got(node) + hint);
  return std::nullopt;
}

std::optional<std::string> read_string(const DocNode& node, const std::string& what, Diagnostics& diag) {
  if (node.is_scalar()) return node.scalar;
  diag.error(node.location, "expected text for " + what + ", got " + got(node));
  return std::nullopt;
}

std::optional<double> read_quantity(const DocNode& node, const std::string& what, Dimension dimension,
                                    Diagnostics& diag, bool allow_zero) {
  if (!node.is_scalar()) {
    diag.error(node.location, "expected " + describe(dimension) + " such as " + examples(dimension) +
                                  " for " + what + ", got " + got(node));
    return std::nullopt;
  }
  QuantityParse parsed = parse_quantity(node.scalar, dimension);
  if (!parsed.value) {
    diag.error(node.location, what + ": " + parsed.error);
    return std::nullopt;
  }
  if (!allow_zero && *parsed.value == 0) {
    diag.error(node.location, what + " must be greater than zero, got '" + node.scalar + "'");
    return std::nullopt;
  }
  return parsed.value;
}

std::optional<std::string> read_choice(const DocNode& node, const std::string& what,
                                       const std::vector<std::string>& choices, Diagnostics& diag) {
  if (node.is_scalar() && std::find(choices.begin(), choices.end(), node.scalar) != choices.end())
    return node.scalar;
  diag.error(node.location, "invalid value " + got(node) + " for " + what + "; expected one of " +
                                join(choices) + (node.is_scalar() ? did_you_mean(node.scalar, choices) : ""));
  return std::nullopt;
}

MapReader::MapReader(const DocNode& node, std::string path, Diagnostics& diag, FieldLocations* locations)
    : node_(node), path_(std::move(path)), diag_(diag), locations_(locations) {
  if (!node_.is_mapping())
    diag_.error(node_.location, "expected a mapping" + (path_.empty() ? std::string() : " for " + path_) +
                                    ", got " + got(node_));
}

std::string MapReader::field(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

const DocNode* MapReader::get(std::string_view key) {
  known_.emplace_back(key);
  const DocNode* n = node_.find(key);
  if (n && locations_) (*locations_)[field(key)] = n->location;
  return n;
}

const DocNode* MapReader::require(std::string_view key) {
  const DocNode* n = get(key);
  if (!n && node_.is_mapping())
    diag_.error(node_.location, "missing required key '" + std::string(key) + "'" +
                                    (path_.empty() ? std::string() : " in " + path_));
  return n;
}

bool MapReader::read(std::string_view key, std::int64_t& out, std::int64_t min, std::int64_t max,
                     bool required) {
  const DocNode* n = required ? require(key) : get(key);
  if (!n) return false;
  auto v = read_int(*n, field(key), diag_, min, max);
  if (v) out = *v;
  return v.has_value();
}

bool MapReader::read(std::string_view key, int& out, int min, int max, bool required) {
  std::int64_t wide = out;
  const bool ok = read(key, wide, min, max, required);
  if (ok) out = static_cast<int>(wide);
  return ok;
}

bool MapReader::read(std::string_view key, double& out, double min, double max, bool required) {
  const DocNode* n = required ? require(key) : get(key);
  if (!n) return false;
  auto v = read_number(*n, field(key), diag_, min, max);
  if (v) out = *v;
  return v.has_value();
}

bool MapReader::read(std::string_view key, bool& out) {
  const DocNode* n = get(key);
  if (!n) return false;
  auto v = read_bool(*n, field(key), diag_);
  if (v) out = *v;
  return v.has_value();
}

bool MapReader::read(std::string_view key, std::string& out, bool required) {
  const DocNode* n = required ? require(key) : get(key);
  if (!n) return false;
  auto v = read_string(*n, field(key), diag_);
  if (v) out = *v;
  return v.has_value();
}

void MapReader::finish() {
  if (!node_.is_mapping()) return;
  for (const auto& e : node_.entries) {
    if (std::find(known_.begin(), known_.end(), e.key) != known_.end()) continue;
    std::vector<std::string> choices = known_;
    std::sort(choices.begin(), choices.end());
    choices.erase(std::unique(choices.begin(), choices.end()), choices.end());
    const std::string where = path_.empty() ? std::string() : " in " + path_;
    std::string hint = did_you_mean(e.key, choices);
    if (hint.empty()) hint = "; expected one of " + join(choices);
    diag_.error(e.key_location, "unknown key '" + e.key + "'" + where + hint);
  }
}

}  // namespace paratwin
