// Counter-based initial weights (see init.hpp): a normal deviate per flat index, by Box-Muller from a
// 64-bit hash of (seed, index / 2), the cosine for even indices and the sine for odd ones. The hash is
// SplitMix64's output function (plan/util/seeded_random.hpp) at that counter; logarithm, square root and
// cosine run vectorized over blocks of indices (Eigen's float array functions), so the weights are the
// same on every machine of one instruction set (a machine without FMA rounds them differently).
#include "exec/gpt/init.hpp"

#include <cmath>

#include <Eigen/Core>

namespace paratwin::exec {

namespace {

constexpr size_t kBlock = 256;

uint64_t mixed(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

bool ends_with(const std::string& s, const char* tail) {
  return s.ends_with(tail);
}

}  // namespace

InitialDistribution initial_distribution(const std::string& n, int layers) {
  using Kind = InitialDistribution::Kind;
  if (ends_with(n, "_b")) return {Kind::Zero, 0};
  if (ends_with(n, "ln1_w") || ends_with(n, "ln2_w") || n == "lnf_w") return {Kind::One, 0};
  if (ends_with(n, "proj_w")) return {Kind::Normal, float(0.02 / std::sqrt(2.0 * layers))};
  return {Kind::Normal, n == "wpe" ? 0.01f : 0.02f};
}

template <class T>
void initial_weights(T* out, uint64_t seed, size_t first, size_t count, InitialDistribution d) {
  using Kind = InitialDistribution::Kind;
  if (d.kind != Kind::Normal) {
    std::fill(out, out + count, T(d.kind == Kind::One ? 1 : 0));
    return;
  }
  using Array = Eigen::Array<float, Eigen::Dynamic, 1>;
  const uint64_t key = mixed(seed + 0x9e3779b97f4a7c15ULL);
  Array radius_in(kBlock), angle(kBlock), z(kBlock);
  for (size_t at = 0; at < count; at += kBlock) {
    // Whole blocks (the tail's spare lanes computed and dropped): every value comes out of the same
    // vectorized code, wherever a shard's piece starts.
    const size_t n = std::min(kBlock, count - at);
    for (size_t j = 0; j < kBlock; ++j) {
      const uint64_t index = first + at + j;
      const uint64_t h = mixed(key + (index >> 1) * 0x9e3779b97f4a7c15ULL);
      radius_in[long(j)] = float((h >> 40) + 1) * 0x1.0p-24f;  // (0, 1]: its logarithm is finite
      // [0, 2 pi), less a quarter turn for odd indices: their cosine is the pair's sine.
      angle[long(j)] = float(h & 0xffffff) * float(6.283185307179586 * 0x1.0p-24) -
                       ((index & 1) ? 1.5707963267948966f : 0.0f);
    }
    z = (-2.0f * radius_in.log()).sqrt() * angle.cos() * d.std;
    for (size_t j = 0; j < n; ++j) out[at + j] = T(z[long(j)]);
  }
}

template void initial_weights<float>(float*, uint64_t, size_t, size_t, InitialDistribution);
template void initial_weights<double>(double*, uint64_t, size_t, size_t, InitialDistribution);

}  // namespace paratwin::exec
