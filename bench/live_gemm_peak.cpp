// The fp32 GEMM rate Eigen reaches on one core for the shapes of tiny-gpt's linear layers (the
// live CPU backend's ceiling), and for a large square GEMM. Built and run by bench/live_bench.sh.
#include <chrono>
#include <cstdio>

#include <Eigen/Core>

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

static double rate(int n, int k, int m, int repeats) {
  Matrix a = Matrix::Random(n, k), b = Matrix::Random(k, m), c(n, m);
  c.noalias() = a * b;  // warm-up
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < repeats; ++r) c.noalias() += a * b;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return 2.0 * n * k * m * repeats / s;
}

int main() {
  // inp (N,C) . W (C,OC) with N = 4 x 64 tokens: qkv, MLP up and down projections, logits.
  std::printf("gemm 256x128x384  %.2f GFLOP/s\n", rate(256, 128, 384, 400) / 1e9);
  std::printf("gemm 256x128x512  %.2f GFLOP/s\n", rate(256, 128, 512, 400) / 1e9);
  std::printf("gemm 256x512x128  %.2f GFLOP/s\n", rate(256, 512, 128, 400) / 1e9);
  std::printf("gemm 1024^3       %.2f GFLOP/s\n", rate(1024, 1024, 1024, 5) / 1e9);
}
