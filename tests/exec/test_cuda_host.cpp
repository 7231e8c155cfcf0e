// The host-side logic of the CUDA backend, tested without a GPU: the row-major to column-major GEMM
// mapping (checked by running cuBLAS's column-major contract on the CPU), launch shapes that cover
// every element, and the radix-select steps of top-k.
#define BOOST_TEST_MODULE cuda_host
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <random>
#include <vector>

#include "exec/cuda/device_choice.hpp"
#include "exec/cuda/gemm_shape.hpp"
#include "exec/cuda/launch_config.hpp"

using namespace paratwin::exec::cuda;

namespace {

// What cuBLAS computes for a ColumnMajorGemm: D = op(first) . op(second), column-major with the
// given leading dimensions; element (i, j) of a column-major matrix with ld is at j * ld + i.
void column_major_gemm(const ColumnMajorGemm& c, const std::vector<double>& first,
                       const std::vector<double>& second, std::vector<double>& d, int batch) {
  auto at = [](const std::vector<double>& m, int64_t offset, int64_t ld, bool trans, int64_t i, int64_t j) {
    return trans ? m[offset + i * ld + j] : m[offset + j * ld + i];
  };
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < c.k; ++p)
        s += at(first, batch * c.stride_first, c.first_ld, c.trans_first, i, p) *
             at(second, batch * c.stride_second, c.second_ld, c.trans_second, p, j);
      d[batch * c.stride_d + j * c.d_ld + i] = s;
    }
}

// The row-major product the description means.
void row_major_gemm(const RowMajorGemm& g, const std::vector<double>& a, const std::vector<double>& b,
                    std::vector<double>& d, int batch) {
  for (int64_t i = 0; i < g.M; ++i)
    for (int64_t j = 0; j < g.N; ++j) {
      double s = 0;
      for (int64_t p = 0; p < g.K; ++p) {
        const double x =
            g.trans_a ? a[batch * g.stride_a + p * g.lda + i] : a[batch * g.stride_a + i * g.lda + p];
        const double y =
            g.trans_b ? b[batch * g.stride_b + j * g.ldb + p] : b[batch * g.stride_b + p * g.ldb + j];
        s += x * y;
      }
      d[batch * g.stride_d + i * g.ldd + j] = s;
    }
}

void check_mapping(const RowMajorGemm& g) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> u(-1, 1);
  const int64_t a_rows = g.trans_a ? g.K : g.M, b_rows = g.trans_b ? g.N : g.K;
  std::vector<double> a((g.batch - 1) * g.stride_a + a_rows * g.lda),
      b((g.batch - 1) * g.stride_b + b_rows * g.ldb);
  for (auto& x : a) x = u(rng);
  for (auto& x : b) x = u(rng);
  const size_t d_size = (g.batch - 1) * g.stride_d + g.M * g.ldd;
  std::vector<double> expected(d_size, 0), got(d_size, 0);
  const ColumnMajorGemm c = to_column_major(g);
  for (int batch = 0; batch < g.batch; ++batch) {
    row_major_gemm(g, a, b, expected, batch);
    column_major_gemm(c, b, a, got, batch);  // cuBLAS's first operand is our B
  }
  double worst = 0;
  for (size_t i = 0; i < d_size; ++i) worst = std::max(worst, std::abs(expected[i] - got[i]));
  BOOST_TEST(worst < 1e-12);
  // cuBLASLt's layouts: op(first) is m x k, op(second) k x n, D m x n; each ld covers its rows
  BOOST_TEST((c.trans_first ? c.first_cols : c.first_rows) == c.m);
  BOOST_TEST((c.trans_first ? c.first_rows : c.first_cols) == c.k);
  BOOST_TEST((c.trans_second ? c.second_cols : c.second_rows) == c.k);
  BOOST_TEST((c.trans_second ? c.second_rows : c.second_cols) == c.n);
  BOOST_TEST(c.first_ld >= c.first_rows);
  BOOST_TEST(c.second_ld >= c.second_rows);
  BOOST_TEST(c.d_ld >= c.d_rows);
}

}  // namespace

BOOST_AUTO_TEST_CASE(linear_layer_gemms_map_to_the_same_products_in_column_major) {
  check_mapping(linear_forward_gemm(7, 5, 6));
  check_mapping(linear_input_grad_gemm(7, 5, 6));
  check_mapping(linear_weight_grad_gemm(7, 5, 6));
}

BOOST_AUTO_TEST_CASE(attention_and_head_gemms_map_with_transposes_strides_and_padding) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      RowMajorGemm g;
      g.M = 5, g.N = 4, g.K = 3, g.trans_a = ta, g.trans_b = tb;
      g.lda = (ta ? g.M : g.K) + 2;  // padded rows, like the logits' padded vocabulary
      g.ldb = (tb ? g.K : g.N) + 1;
      g.ldd = g.N + 3;
      g.batch = 3;
      g.stride_a = (ta ? g.K : g.M) * g.lda;
      g.stride_b = (tb ? g.N : g.K) * g.ldb;
      g.stride_d = g.M * g.ldd;
      check_mapping(g);
    }
}

BOOST_AUTO_TEST_CASE(inconsistent_gemm_descriptions_are_rejected) {
  RowMajorGemm g = linear_forward_gemm(4, 3, 2);
  g.ldb = 1;  // shorter than B's rows of 2
  BOOST_CHECK_THROW(to_column_major(g), std::invalid_argument);
  g = linear_forward_gemm(4, 3, 2);
  g.batch = 2, g.stride_a = 1, g.stride_b = 6, g.stride_d = 8;  // A's matrices overlap
  BOOST_CHECK_THROW(to_column_major(g), std::invalid_argument);
  BOOST_CHECK_THROW(to_column_major(linear_forward_gemm(0, 3, 2)), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(launch_shapes_cover_every_element_and_respect_limits) {
  for (int64_t n : {int64_t(1), int64_t(255), int64_t(256), int64_t(257), int64_t(50304) * 8192}) {
    const LaunchShape s = elementwise_launch(n);
    BOOST_TEST(int64_t(s.grid_x) * s.block_x >= n);
    BOOST_TEST(int64_t(s.grid_x - 1) * s.block_x < n);
    BOOST_TEST(s.block_x <= 1024u);
  }
  BOOST_TEST(elementwise_launch(0).empty());
  const LaunchShape rows = row_warp_launch(8193);
  BOOST_TEST(int64_t(rows.grid_x) * (rows.block_x / kWarp) >= 8193);
  BOOST_TEST(rows.block_x % kWarp == 0u);
  const LaunchShape cols = column_reduce_launch(8192, 1000);
  BOOST_TEST(int64_t(cols.grid_x) * kWarp >= 1000);
  BOOST_TEST(int64_t(cols.grid_y) * kColumnChunkRows >= 8192);
  BOOST_TEST(cols.block_x * cols.block_y <= 1024u);
  BOOST_TEST(kColumnChunkRows % kColumnBlockRows == 0);
  BOOST_TEST(row_block_launch(5).grid_x == 5u);
  BOOST_TEST(kRowBlockThreads % kWarp == 0);
  BOOST_CHECK_THROW(column_reduce_launch(int64_t(kColumnChunkRows) * 70000, 8), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(radix_select_on_the_host_finds_the_kth_largest_magnitude) {
  // The four passes of TopK::select, run on the host with pick_radix_bin: the threshold must be the
  // k-th largest |value| and `above` the count strictly larger.
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> values(5000);
  for (auto& v : values) v = normal(rng);
  values[10] = values[11] = values[12] = 7.5f;  // ties
  for (uint64_t k : {uint64_t(1), uint64_t(2), uint64_t(3), uint64_t(4), uint64_t(100), uint64_t(5000)}) {
    uint32_t prefix = 0, mask = 0;
    uint64_t above = 0, needed = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
      std::array<uint64_t, 256> histogram{};
      for (float v : values) {
        const uint32_t key = magnitude_key(v);
        if ((key & mask) == prefix) ++histogram[(key >> shift) & 255u];
      }
      const RadixPick pick = pick_radix_bin(histogram, needed);
      above += pick.above;
      needed = pick.still_needed;
      prefix |= uint32_t(pick.bin) << shift;
      mask |= 255u << shift;
    }
    std::vector<uint32_t> keys;
    for (float v : values) keys.push_back(magnitude_key(v));
    std::sort(keys.begin(), keys.end(), std::greater<>());
    BOOST_TEST(prefix == keys[k - 1]);
    const auto strictly =
        uint64_t(std::count_if(keys.begin(), keys.end(), [&](uint32_t x) { return x > prefix; }));
    BOOST_TEST(above == strictly);
    BOOST_TEST(above + needed == k);
  }
  std::array<uint64_t, 256> empty{};
  BOOST_CHECK_THROW(pick_radix_bin(empty, 1), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(ranks_get_their_own_gpu_and_nccl_only_when_none_share_one) {
  BOOST_TEST(choose_device(0, 1, 1).device == 0);
  BOOST_TEST(!choose_device(0, 1, 1).shared);
  BOOST_TEST(choose_device(5, 8, 8).device == 5);
  BOOST_TEST(!choose_device(5, 8, 8).shared);
  // Four ranks on two GPUs: round-robin, and NCCL cannot connect them (it refuses duplicate devices).
  BOOST_TEST(choose_device(2, 4, 2).device == 0);
  BOOST_TEST(choose_device(3, 4, 2).device == 1);
  BOOST_TEST(choose_device(3, 4, 2).shared);
  BOOST_CHECK_THROW(choose_device(0, 1, 0), std::invalid_argument);
  BOOST_CHECK_THROW(choose_device(2, 2, 1), std::invalid_argument);
}
