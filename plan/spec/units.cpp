// Unit tables and the parser for quantities written with units.
#include "plan/spec/units.hpp"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <vector>

#include "plan/spec/suggest.hpp"

namespace paratwin {
namespace {

struct Unit {
  std::string_view name;
  double factor;  // to the SI base unit
};

// Decimal prefixes are powers of 1000, binary ones of 1024; bits are divided by 8.
constexpr double K = 1e3, M = 1e6, G = 1e9, T = 1e12, P = 1e15, E = 1e18;
constexpr double Ki = 1024.0, Mi = Ki * 1024, Gi = Mi * 1024, Ti = Gi * 1024, Pi = Ti * 1024;

const std::vector<Unit>& units_of(Dimension d) {
  static const std::vector<Unit> data = {{"B", 1},    {"KB", K},   {"MB", M},   {"GB", G},
                                         {"TB", T},   {"PB", P},   {"KiB", Ki}, {"MiB", Mi},
                                         {"GiB", Gi}, {"TiB", Ti}, {"PiB", Pi}};
  static const std::vector<Unit> bandwidth = {
      {"bps", 1.0 / 8}, {"Kbps", K / 8}, {"Mbps", M / 8}, {"Gbps", G / 8}, {"Tbps", T / 8}, {"b/s", 1.0 / 8},
      {"Kb/s", K / 8},  {"Mb/s", M / 8}, {"Gb/s", G / 8}, {"Tb/s", T / 8}, {"Bps", 1},      {"KBps", K},
      {"MBps", M},      {"GBps", G},     {"TBps", T},     {"B/s", 1},      {"KB/s", K},     {"MB/s", M},
      {"GB/s", G},      {"TB/s", T},     {"KiBps", Ki},   {"MiBps", Mi},   {"GiBps", Gi},   {"TiBps", Ti}};
  static const std::vector<Unit> duration = {{"ns", 1e-9}, {"us", 1e-6}, {"µs", 1e-6}, {"ms", 1e-3}, {"s", 1},
                                             {"min", 60},  {"h", 3600},  {"d", 86400}, {"w", 604800}};
  static const std::vector<Unit> flop_count = {{"flop", 1},  {"Kflop", K}, {"Mflop", M}, {"Gflop", G},
                                               {"Tflop", T}, {"Pflop", P}, {"Eflop", E}};
  static const std::vector<Unit> flop_rate = {
      {"flops", 1},   {"Kflops", K},  {"Mflops", M},  {"Gflops", G},  {"Tflops", T},  {"Pflops", P},
      {"Eflops", E},  {"FLOPS", 1},   {"GFLOPS", G},  {"TFLOPS", T},  {"PFLOPS", P},  {"flop/s", 1},
      {"Gflop/s", G}, {"Tflop/s", T}, {"Pflop/s", P}, {"GFLOP/s", G}, {"TFLOP/s", T}, {"PFLOP/s", P}};
  static const std::vector<Unit> power = {{"W", 1}, {"kW", K}, {"MW", M}};
  static const std::vector<Unit> money = {{"USD", 1}, {"KUSD", K}, {"MUSD", M}};
  static const std::vector<Unit> count = {{"", 1}, {"K", K}, {"M", M}, {"B", G}, {"T", T}};
  switch (d) {
    case Dimension::DataSize:
      return data;
    case Dimension::Bandwidth:
      return bandwidth;
    case Dimension::Duration:
      return duration;
    case Dimension::FlopCount:
      return flop_count;
    case Dimension::FlopRate:
      return flop_rate;
    case Dimension::Power:
      return power;
    case Dimension::Money:
      return money;
    case Dimension::Count:
      return count;
  }
  return count;
}

constexpr std::array kAllDimensions = {Dimension::DataSize,  Dimension::Bandwidth, Dimension::Duration,
                                       Dimension::FlopCount, Dimension::FlopRate,  Dimension::Power};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Splits "1.5e3 GB" into the number and the unit text.
bool split_number(std::string_view text, double& number, std::string_view& unit) {
  const char* first = text.data();
  const char* last = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(first, last, number, std::chars_format::general);
  if (ec != std::errc() || !std::isfinite(number)) return false;
  unit = trim(std::string_view(ptr, static_cast<size_t>(last - ptr)));
  return true;
}

const Unit* find_unit(Dimension d, std::string_view name) {
  for (const auto& u : units_of(d))
    if (u.name == name) return &u;
  return nullptr;
}

std::vector<std::string> unit_names(Dimension d) {
  std::vector<std::string> names;
  for (const auto& u : units_of(d))
    if (!u.name.empty()) names.emplace_back(u.name);
  return names;
}

}  // namespace

std::string describe(Dimension d) {
  switch (d) {
    case Dimension::DataSize:
      return "a data size";
    case Dimension::Bandwidth:
      return "a bandwidth";
    case Dimension::Duration:
      return "a duration";
    case Dimension::FlopCount:
      return "an amount of work";
    case Dimension::FlopRate:
      return "a FLOP rate";
    case Dimension::Power:
      return "a power";
    case Dimension::Money:
      return "an amount of money";
    case Dimension::Count:
      return "a count";
  }
  return "a quantity";
}

std::string examples(Dimension d) {
  switch (d) {
    case Dimension::DataSize:
      return "80GiB or 512MB";
    case Dimension::Bandwidth:
      return "200Gbps or 25GBps";
    case Dimension::Duration:
      return "1.5us, 30min or 54d";
    case Dimension::FlopCount:
      return "4.2Tflop";
    case Dimension::FlopRate:
      return "312Tflops";
    case Dimension::Power:
      return "700W";
    case Dimension::Money:
      return "$2.50 or $1.2M";
    case Dimension::Count:
      return "300B or 1.5e12";
  }
  return "";
}

QuantityParse parse_quantity(std::string_view raw, Dimension dimension) {
  std::string_view text = trim(raw);
  const std::string shown(raw);
  // Money is written "$2.50" or "$1.2M"; the dollar sign stands for the unit.
  bool dollar = false;
  if (dimension == Dimension::Money && !text.empty() && text.front() == '$') {
    dollar = true;
    text.remove_prefix(1);
  }
  double number = 0;
  std::string_view unit;
  if (text.empty() || !split_number(text, number, unit))
    return {std::nullopt,
            "expected " + describe(dimension) + " such as " + examples(dimension) + ", got '" + shown + "'"};
  if (number < 0)
    return {std::nullopt,
            "expected a non-negative " + describe(dimension).substr(2) + ", got '" + shown + "'"};
  if (dollar) {
    // After "$" only a scale may follow: $2.5, $300K, $1.2M, $2B.
    const Unit* scale = find_unit(Dimension::Count, unit);
    if (!scale)
      return {std::nullopt,
              "unknown scale '" + std::string(unit) + "' in '" + shown + "'; expected $N, $NK, $NM or $NB"};
    return {number * scale->factor, {}};
  }
  if (unit.empty() && dimension != Dimension::Count)
    return {std::nullopt, "expected " + describe(dimension) + " with a unit such as " + examples(dimension) +
                              ", got bare number '" + shown + "'"};
  if (const Unit* u = find_unit(dimension, unit)) return {number * u->factor, {}};
  // A unit of another dimension ("200GB" for a bandwidth) deserves its own explanation.
  for (Dimension other : kAllDimensions)
    if (other != dimension && find_unit(other, unit))
      return {std::nullopt, "'" + shown + "' is " + describe(other) + "; expected " + describe(dimension) +
                                " such as " + examples(dimension)};
  return {std::nullopt, "unknown unit '" + std::string(unit) + "' in '" + shown + "'; expected " +
                            describe(dimension) + " such as " + examples(dimension) +
                            did_you_mean(unit, unit_names(dimension))};
}

static std::string fixed(double v) {
  char buf[64];
  const double a = std::fabs(v);
  std::snprintf(buf, sizeof buf, a >= 100 || a == std::floor(a) ? "%.0f" : a >= 10 ? "%.1f" : "%.2f", v);
  return buf;
}

std::string format_quantity(double v, Dimension d) {
  struct Step {
    double factor;
    const char* unit;
  };
  auto pick = [v](std::initializer_list<Step> steps) {
    Step chosen = *steps.begin();
    for (const auto& s : steps)
      if (std::fabs(v) >= s.factor) chosen = s;
    return fixed(v / chosen.factor) + " " + chosen.unit;
  };
  switch (d) {
    case Dimension::DataSize:
      return pick({{1, "B"}, {Ki, "KiB"}, {Mi, "MiB"}, {Gi, "GiB"}, {Ti, "TiB"}, {Pi, "PiB"}});
    case Dimension::Bandwidth:
      return pick({{1, "B/s"}, {K, "KB/s"}, {M, "MB/s"}, {G, "GB/s"}, {T, "TB/s"}});
    case Dimension::Duration:
      if (v == 0) return "0 s";
      return pick(
          {{1e-9, "ns"}, {1e-6, "us"}, {1e-3, "ms"}, {1, "s"}, {60, "min"}, {3600, "h"}, {86400, "d"}});
    case Dimension::FlopCount:
      return pick({{1, "FLOP"}, {G, "GFLOP"}, {T, "TFLOP"}, {P, "PFLOP"}, {E, "EFLOP"}});
    case Dimension::FlopRate:
      return pick({{1, "FLOP/s"}, {G, "GFLOP/s"}, {T, "TFLOP/s"}, {P, "PFLOP/s"}, {E, "EFLOP/s"}});
    case Dimension::Power:
      return pick({{1, "W"}, {K, "kW"}, {M, "MW"}});
    case Dimension::Money: {
      if (std::fabs(v) >= K) return "$" + format_count(v);
      char buf[64];
      std::snprintf(buf, sizeof buf, "$%.2f", v);
      return buf;
    }
    case Dimension::Count:
      return format_count(v);
  }
  return fixed(v);
}

std::string format_count(double v) {
  const double a = std::fabs(v);
  char buf[64];
  if (a >= T)
    std::snprintf(buf, sizeof buf, "%.2fT", v / T);
  else if (a >= G)
    std::snprintf(buf, sizeof buf, "%.2fB", v / G);
  else if (a >= M)
    std::snprintf(buf, sizeof buf, "%.2fM", v / M);
  else if (a >= K)
    std::snprintf(buf, sizeof buf, "%.2fK", v / K);
  else
    std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

}  // namespace paratwin
