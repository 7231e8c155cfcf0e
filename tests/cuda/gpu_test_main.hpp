// main() of the GPU test executables: without a usable GPU it prints why and exits 77, which CTest
// (SKIP_RETURN_CODE) reports as skipped, not passed. Also the helpers the GPU tests share.
#pragma once

#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "exec/cuda/device_buffer.hpp"

namespace paratwin::exec::cuda::test {

inline std::vector<float> random_floats(size_t n, float scale, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

// Rounds to bf16 and back, so the CPU reference sees exactly the GPU's inputs.
inline std::vector<float> round_bf16(std::vector<float> v) {
  for (auto& x : v) x = __bfloat162float(__float2bfloat16(x));
  return v;
}

inline DeviceBuffer<__nv_bfloat16> to_device_bf16(const std::vector<float>& v) {
  std::vector<__nv_bfloat16> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = __float2bfloat16(v[i]);
  DeviceBuffer<__nv_bfloat16> d(v.size());
  d.upload(h.data(), h.size(), nullptr);
  PARATWIN_CUDA_CHECK(cudaDeviceSynchronize());
  return d;
}

template <class T>
DeviceBuffer<T> to_device(const std::vector<T>& v) {
  DeviceBuffer<T> d(v.size());
  d.upload(v.data(), v.size(), nullptr);
  PARATWIN_CUDA_CHECK(cudaDeviceSynchronize());
  return d;
}

inline std::vector<float> to_host(const DeviceBuffer<__nv_bfloat16>& d) {
  const std::vector<__nv_bfloat16> h = d.to_host(nullptr);
  std::vector<float> out(h.size());
  for (size_t i = 0; i < h.size(); ++i) out[i] = __bfloat162float(h[i]);
  return out;
}
inline std::vector<float> to_host(const DeviceBuffer<float>& d) {
  return d.to_host(nullptr);
}

// max |gpu - ref| over ref's size, printed with the tolerance; passes when within `tolerance`.
template <class A, class B>
void expect_close(const char* what, const A& gpu, const B& ref, double tolerance) {
  BOOST_REQUIRE_GE(gpu.size(), ref.size());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    worst = std::max(worst, std::abs(double(gpu[i]) - double(ref[i])));
    scale = std::max(scale, std::abs(double(ref[i])));
  }
  std::printf("  %-36s max |gpu - cpu| = %.3e (tolerance %.1e, max |cpu| = %.3e)\n", what, worst, tolerance,
              scale);
  BOOST_TEST(worst <= tolerance, what << ": max difference " << worst << " > " << tolerance);
}

}  // namespace paratwin::exec::cuda::test

inline bool paratwin_init_gpu_tests() {
  return true;
}

inline int paratwin_gpu_test_main(int argc, char** argv) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::printf(
        "SKIPPED: no usable GPU (%s); these tests need one (bench/gpu_check.sh runs them on a GPU "
        "machine)\n",
        err != cudaSuccess ? cudaGetErrorString(err) : "no device");
    return 77;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("GPU 0: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  return boost::unit_test::unit_test_main(&paratwin_init_gpu_tests, argc, argv);
}
