// bench_gemm_sweep: sustained GEMM rates by shape on this machine's GPU, written as the CSV that
// `paratwin calibrate --gemm-sweep` fits (docs/calibration.md): m,n,k,dtype,tflops.
//
// Each shape runs cuBLASLt's first heuristic algorithm (column-major TN, the layout fp8 needs; fp32
// accumulation; bf16 result) on normally distributed operands, as training's are (a GEMM over zeros or
// small integers flips fewer bits, draws less power and runs faster: Horace He, "Strangely, matrix
// multiplications on GPUs run faster when given predictable data"). It is first held for --warmup
// seconds, so the clock settles at what the power limit sustains, then timed for --seconds in batches
// of about 50 ms; the median batch's rate is written. fp8 (e4m3) rows need an sm_89 or newer GPU and
// are left out, with a note, where cuBLASLt has no algorithm.
//   bench_gemm_sweep [-o FILE] [--dtypes bf16,fp8] [--warmup S] [--seconds S] [--shapes M,N,K;...]
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "exec/cuda/check.hpp"
#include "exec/cuda/device_buffer.hpp"

using namespace paratwin::exec::cuda;

namespace {

struct Shape {
  long m = 0, n = 0, k = 0;
};

// The default grid: square outputs from one wave's worth of tiles to many, each at short and long K
// (what efficiency.gemm_tile_k_steps is fitted from).
std::vector<Shape> default_shapes() {
  std::vector<Shape> shapes;
  for (long mn : {2048L, 4096L, 8192L, 16384L})
    for (long k : {1024L, 4096L, 8192L, 16384L}) shapes.push_back({mn, mn, k});
  return shapes;
}

__device__ float normal_at(uint64_t i, uint64_t seed) {
  // splitmix64 of the index, two uniforms, Box-Muller.
  uint64_t z = i * 2 + seed + 0x9E3779B97F4A7C15ull;
  auto mix = [](uint64_t x) {
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  };
  const float u1 = (float(mix(z) >> 40) + 0.5f) / 16777216.0f;
  const float u2 = float(mix(z + 1) >> 40) / 16777216.0f;
  return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}

template <class T>
__global__ void fill_normal(T* out, uint64_t count, uint64_t seed) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < count;
       i += uint64_t(gridDim.x) * blockDim.x)
    out[i] = T(normal_at(i, seed));
}

template <class T>
void fill(DeviceBuffer<T>& buffer, uint64_t seed, cudaStream_t stream) {
  fill_normal<T><<<1024, 256, 0, stream>>>(buffer.data(), buffer.size(), seed);
  PARATWIN_CUDA_CHECK_LAUNCH("fill_normal");
}

struct Layouts {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  ~Layouts() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// Seconds a launch of `shape` takes, sustained: the median of batches after the warm-up; 0 when
// cuBLASLt has no algorithm for it.
template <class T>
double sustained_seconds(cublasLtHandle_t handle, const Shape& s, cudaDataType_t type, double warmup_s,
                         double measure_s, DeviceBuffer<char>& workspace, cudaStream_t stream) {
  DeviceBuffer<T> A(size_t(s.k * s.m)), B(size_t(s.k * s.n));
  DeviceBuffer<__nv_bfloat16> D(size_t(s.m * s.n));
  fill(A, 1, stream);
  fill(B, 2, stream);
  Layouts l;
  PARATWIN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&l.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
  PARATWIN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(l.op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
  PARATWIN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(l.op, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof n));
  // Column-major: A stored k x m (transposed to m x k), B k x n, D m x n.
  PARATWIN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l.a, type, s.k, s.m, s.k));
  PARATWIN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l.b, type, s.k, s.n, s.k));
  PARATWIN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l.d, CUDA_R_16BF, s.m, s.n, s.m));
  cublasLtMatmulPreference_t preference = nullptr;
  PARATWIN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  const size_t bytes = workspace.size();
  PARATWIN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof bytes));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle, l.op, l.a, l.b, l.d, l.d, preference, 1, &heuristic, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) return 0;
  const float alpha = 1, beta = 0;
  auto launch = [&] {
    PARATWIN_CUBLAS_CHECK(cublasLtMatmul(handle, l.op, &alpha, A.data(), l.a, B.data(), l.b, &beta, D.data(),
                                         l.d, D.data(), l.d, &heuristic.algo, workspace.data(), bytes,
                                         stream));
  };
  Event start(true), stop(true);
  // One launch's time, to size the batches; then the warm-up, then the timed batches.
  start.record(stream);
  launch();
  stop.record(stream);
  stop.synchronize();
  const double one_s = std::max(1e-6, double(stop.elapsed_ms_since(start)) / 1e3);
  const int batch = std::max(1, int(0.05 / one_s));
  auto run_for = [&](double seconds, std::vector<double>* rates) {
    for (double spent = 0; spent < seconds;) {
      start.record(stream);
      for (int i = 0; i < batch; ++i) launch();
      stop.record(stream);
      stop.synchronize();
      const double s = double(stop.elapsed_ms_since(start)) / 1e3;
      spent += s;
      if (rates) rates->push_back(s / batch);
    }
  };
  run_for(warmup_s, nullptr);
  std::vector<double> per_launch;
  run_for(measure_s, &per_launch);
  std::nth_element(per_launch.begin(), per_launch.begin() + per_launch.size() / 2, per_launch.end());
  return per_launch[per_launch.size() / 2];
}

std::vector<Shape> parse_shapes(const std::string& text) {
  std::vector<Shape> shapes;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ';')) {
    Shape s;
    if (std::sscanf(item.c_str(), "%ld,%ld,%ld", &s.m, &s.n, &s.k) != 3 || s.m <= 0 || s.n <= 0 || s.k <= 0 ||
        s.m % 16 || s.n % 16 || s.k % 16) {
      std::cerr << "bench_gemm_sweep: --shapes: expected M,N,K;... with multiples of 16, got '" << item
                << "'\n";
      std::exit(2);
    }
    shapes.push_back(s);
  }
  return shapes;
}

}  // namespace

int main(int argc, char** argv) {
  std::string output = "gemm-sweep.csv", dtypes = "bf16,fp8";
  double warmup_s = 1, measure_s = 2;
  std::vector<Shape> shapes = default_shapes();
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "-o" && has_value)
      output = argv[++i];
    else if (arg == "--dtypes" && has_value)
      dtypes = argv[++i];
    else if (arg == "--warmup" && has_value)
      warmup_s = std::atof(argv[++i]);
    else if (arg == "--seconds" && has_value)
      measure_s = std::atof(argv[++i]);
    else if (arg == "--shapes" && has_value)
      shapes = parse_shapes(argv[++i]);
    else {
      std::cerr << "usage: bench_gemm_sweep [-o FILE] [--dtypes bf16,fp8] [--warmup S] [--seconds S] "
                   "[--shapes M,N,K;...]\n";
      return 2;
    }
  }
  try {
    cudaDeviceProp prop{};
    PARATWIN_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    cublasLtHandle_t handle = nullptr;
    PARATWIN_CUBLAS_CHECK(cublasLtCreate(&handle));
    Stream stream;
    DeviceBuffer<char> workspace(32u << 20);
    std::ostringstream csv;
    csv << "# bench_gemm_sweep on " << prop.name << " (" << prop.multiProcessorCount << " SMs): cuBLASLt TN, "
        << "normal operands, " << warmup_s << " s held, then the median of " << measure_s << " s of batches\n"
        << "m,n,k,dtype,tflops\n";
    for (const char* name : {"bf16", "fp8"}) {
      const std::string dtype = name;
      if (dtypes.find(dtype) == std::string::npos) continue;
      for (const Shape& s : shapes) {
        const double seconds = dtype == "bf16"
                                   ? sustained_seconds<__nv_bfloat16>(handle, s, CUDA_R_16BF, warmup_s,
                                                                      measure_s, workspace, stream.get())
                                   : sustained_seconds<__nv_fp8_e4m3>(handle, s, CUDA_R_8F_E4M3, warmup_s,
                                                                      measure_s, workspace, stream.get());
        if (seconds <= 0) {
          std::cerr << "note: cuBLASLt has no " << dtype << " algorithm for " << s.m << "x" << s.n << "x"
                    << s.k << " on this GPU: left out\n";
          continue;
        }
        const double tflops = 2.0 * s.m * s.n * s.k / seconds / 1e12;
        std::printf("%-5s %6ld x %6ld x %6ld  %8.1f TFLOP/s\n", dtype.c_str(), s.m, s.n, s.k, tflops);
        std::fflush(stdout);
        csv << s.m << "," << s.n << "," << s.k << "," << dtype << "," << tflops << "\n";
      }
    }
    cublasLtDestroy(handle);
    std::ofstream(output + ".tmp") << csv.str();
    if (std::rename((output + ".tmp").c_str(), output.c_str()) != 0) {
      std::cerr << "bench_gemm_sweep: cannot write " << output << "\n";
      return 1;
    }
    std::cout << "wrote " << output << "; fit it with paratwin calibrate --gemm-sweep " << output << "\n";
    return 0;
  } catch (const CudaError& e) {
    std::cerr << "bench_gemm_sweep: " << e.what() << "\n";
    return 1;
  }
}
