// The expected slowest of a job's GPUs (slowest_gpu.hpp).
#include "plan/cost/slowest_gpu.hpp"

#include <cmath>
#include <map>
#include <utility>

namespace paratwin::cost {

namespace {

double by_quadrature(int gpus, double cv) {
  // X = exp(mu + s z), z standard normal, mean 1: s^2 = ln(1 + cv^2), mu = -s^2 / 2. The largest of n
  // has density n Phi(z)^(n-1) phi(z) in z; Simpson's rule over z in [-8, 10] (past 10 even a million
  // GPUs leave under 1e-15 of the mass).
  const double s = std::sqrt(std::log1p(cv * cv)), mu = -s * s / 2, n = gpus;
  constexpr double kLo = -8, kHi = 10;
  constexpr int kSteps = 3600;  // even
  const double h = (kHi - kLo) / kSteps;
  const auto f = [&](double z) {
    const double phi = std::exp(-z * z / 2) / std::sqrt(2 * M_PI);
    const double below = 0.5 * std::erfc(-z / std::sqrt(2.0));
    return std::exp(mu + s * z) * n * std::exp((n - 1) * std::log(below)) * phi;
  };
  double sum = f(kLo) + f(kHi);
  for (int i = 1; i < kSteps; ++i) sum += (i % 2 ? 4 : 2) * f(kLo + i * h);
  return sum * h / 3;
}

}  // namespace

double expected_slowest(int gpus, double cv) {
  if (gpus <= 1 || cv <= 0) return 1;
  // The optimizer evaluates thousands of plans on a few job sizes: each thread remembers its answers.
  thread_local std::map<std::pair<int, double>, double> known;
  const auto [it, added] = known.try_emplace({gpus, cv}, 0.0);
  if (added) it->second = by_quadrature(gpus, cv);
  return it->second;
}

}  // namespace paratwin::cost
