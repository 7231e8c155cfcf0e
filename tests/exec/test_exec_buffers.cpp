// exec::Buffer's storage: large blocks kept for the next allocation of their size and handed back
// zeroed (exec/memory/block_cache.hpp); the memory meter counts buffers, not what is kept.
#define BOOST_TEST_MODULE exec_buffers
#include <algorithm>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "exec/memory/block_cache.hpp"
#include "exec/tensor.hpp"

using namespace paratwin::exec;

namespace {
constexpr size_t kLarge = (size_t(8) << 20) / sizeof(float);  // 8 MiB: above the fresh-pages size
}

BOOST_AUTO_TEST_CASE(a_freed_large_buffer_comes_back_zeroed_for_its_size) {
  const size_t kept_before = block_cache::kept();
  const float* first = nullptr;
  {
    Buffer<float> b(kLarge);
    first = b.data();
    std::fill(b.begin(), b.end(), 3.0f);
  }
  BOOST_TEST(block_cache::kept() > kept_before);
  Buffer<float> again(kLarge);
  BOOST_TEST(again.data() == first);
  BOOST_TEST(block_cache::kept() == kept_before);
  BOOST_TEST(std::all_of(again.begin(), again.end(), [](float x) { return x == 0.0f; }));
  Buffer<float> other(kLarge * 2);  // another size: fresh pages
  BOOST_TEST(other.data() != first);
}

BOOST_AUTO_TEST_CASE(the_meter_counts_buffers_not_kept_blocks) {
  const int64_t held = read_memory().device;
  {
    Buffer<float> b(kLarge);
    BOOST_TEST(read_memory().device == held + int64_t(kLarge * sizeof(float)));
  }
  BOOST_TEST(read_memory().device == held);
  BOOST_TEST(block_cache::kept() >= kLarge * sizeof(float));
}

BOOST_AUTO_TEST_CASE(no_more_than_the_capacity_is_kept) {
  // Untouched mappings: virtual memory only.
  {
    std::vector<Buffer<float>> buffers;
    for (int i = 0; i < 6; ++i) buffers.emplace_back((size_t(256) << 20) / sizeof(float));
  }
  BOOST_TEST(block_cache::kept() <= block_cache::kCapacity);
  BOOST_TEST(block_cache::kept() >= block_cache::kCapacity / 2);
}

BOOST_AUTO_TEST_CASE(assign_zeros_zeroes_reused_storage_and_takes_new_storage_zeroed) {
  Buffer<float> b(100, 5.0f);
  const float* storage = b.data();
  assign_zeros(b, 50);
  BOOST_TEST(b.data() == storage);
  BOOST_TEST(b.size() == 50u);
  BOOST_TEST(std::all_of(b.begin(), b.end(), [](float x) { return x == 0.0f; }));
  assign_zeros(b, kLarge);
  BOOST_TEST(b.size() == kLarge);
  BOOST_TEST(std::all_of(b.begin(), b.end(), [](float x) { return x == 0.0f; }));
}
