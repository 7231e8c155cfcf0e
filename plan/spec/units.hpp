// Typed physical quantities (SI base units inside) and the unit strings YAML files write them in.
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>

namespace paratwin {

// A double in one SI base unit, tagged so that bytes and seconds cannot be mixed up by accident.
template <class Tag>
class Quantity {
 public:
  constexpr Quantity() = default;
  constexpr explicit Quantity(double value) : value_(value) {}
  constexpr double value() const { return value_; }

  constexpr Quantity operator+(Quantity o) const { return Quantity(value_ + o.value_); }
  constexpr Quantity operator-(Quantity o) const { return Quantity(value_ - o.value_); }
  constexpr Quantity operator*(double k) const { return Quantity(value_ * k); }
  constexpr Quantity operator/(double k) const { return Quantity(value_ / k); }
  constexpr double operator/(Quantity o) const { return value_ / o.value_; }
  constexpr Quantity& operator+=(Quantity o) { return value_ += o.value_, *this; }
  constexpr auto operator<=>(const Quantity&) const = default;

 private:
  double value_ = 0;
};

using Bytes = Quantity<struct BytesTag>;                    // B
using BytesPerSecond = Quantity<struct BytesPerSecondTag>;  // B/s (a Gbps figure is divided by 8)
using Seconds = Quantity<struct SecondsTag>;                // s
using Flops = Quantity<struct FlopsTag>;                    // floating-point operations
using FlopsPerSecond = Quantity<struct FlopsPerSecondTag>;  // FLOP/s
using Watts = Quantity<struct WattsTag>;                    // W
using Dollars = Quantity<struct DollarsTag>;                // USD

constexpr Seconds operator/(Bytes b, BytesPerSecond r) {
  return Seconds(b.value() / r.value());
}
constexpr Seconds operator/(Flops f, FlopsPerSecond r) {
  return Seconds(f.value() / r.value());
}

// Bytes in GiB (2^30), the unit reports and pictures give memory in.
constexpr double gib(Bytes b) {
  return b.value() / (1024.0 * 1024 * 1024);
}

// What a YAML field measures, which decides the unit strings it accepts.
enum class Dimension { DataSize, Bandwidth, Duration, FlopCount, FlopRate, Power, Money, Count };

// "a bandwidth", "a duration", ... for messages.
std::string describe(Dimension dimension);
// Examples of valid spellings for messages, e.g. "200Gbps or 25GBps".
std::string examples(Dimension dimension);

struct QuantityParse {
  std::optional<double> value;  // in the SI base unit
  std::string error;            // what was expected, with the nearest valid unit; empty on success
};

// Parses "200Gbps", "1.5 us", "80GiB", "312Tflops", "700W", "$2.50", "15T". A bare number is an error
// for every dimension but Count, where K/M/B/T scale the number (tokens: 15T).
QuantityParse parse_quantity(std::string_view text, Dimension dimension);

// The quantity in a readable unit, e.g. "80 GiB", "312 TFLOP/s", "1.5 us", "25 GB/s".
std::string format_quantity(double value, Dimension dimension);
std::string format_count(double value);  // "175.0B", "1.54M"

inline std::string to_string(Bytes b) {
  return format_quantity(b.value(), Dimension::DataSize);
}
inline std::string to_string(BytesPerSecond b) {
  return format_quantity(b.value(), Dimension::Bandwidth);
}
inline std::string to_string(Seconds s) {
  return format_quantity(s.value(), Dimension::Duration);
}
inline std::string to_string(Flops f) {
  return format_quantity(f.value(), Dimension::FlopCount);
}
inline std::string to_string(FlopsPerSecond f) {
  return format_quantity(f.value(), Dimension::FlopRate);
}
inline std::string to_string(Watts w) {
  return format_quantity(w.value(), Dimension::Power);
}
inline std::string to_string(Dollars d) {
  return format_quantity(d.value(), Dimension::Money);
}

}  // namespace paratwin
