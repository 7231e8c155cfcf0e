// The one random generator of ParaTwin: SplitMix64, whose sequence is fixed by its seed on every
// platform and standard library, so a seed names the same weights, failures and chaos everywhere.
#pragma once

#include <cmath>
#include <cstdint>

namespace paratwin {

class SeededRandom {
 public:
  explicit SeededRandom(std::uint64_t seed) : state_(seed) {}

  // The next 64 random bits.
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform on [0, 1), 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform on (0, 1): never 0, so its logarithm is finite.
  double uniform_open() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
  // One of 0 .. n-1 (n > 0), by the remainder of next(): the sequence seeds have always named.
  std::uint64_t below(std::uint64_t n) { return next() % n; }
  // Standard normal, by Box-Muller from two uniforms.
  double normal() {
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  std::uint64_t state_;
};

}  // namespace paratwin
