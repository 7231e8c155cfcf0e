// Products of numbers users wrote, in 64 bits and checked: exact, or nothing, never a wrapped value.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>

namespace paratwin {

// a x b x ...; nullopt when the product does not fit in 64 bits.
inline std::optional<std::int64_t> checked_product(std::initializer_list<std::int64_t> factors) {
  std::int64_t product = 1;
  for (const std::int64_t f : factors)
    if (__builtin_mul_overflow(product, f, &product)) return std::nullopt;
  return product;
}

}  // namespace paratwin
