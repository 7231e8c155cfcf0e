// Large buffers kept for reuse. A training step frees and allocates the same activation buffers every
// step; giving them back to the kernel (munmap) and taking fresh pages again (one page fault and one
// cleared page per 4 KiB touched) cost about 5% of a one-core GPT-2 124M step. Kept blocks are
// zeroed again when taken (a memset at memory bandwidth), so they come as fresh pages do. As
// PyTorch's caching allocator, what is kept is reserved, not held: the memory meter counts buffers,
// not blocks (exec/memory/memory_meter.hpp), while the resident set includes what is kept.
#pragma once

#include <cstddef>

namespace paratwin::exec::block_cache {

// At most this many bytes are kept; a block that would go over is unmapped instead.
inline constexpr size_t kCapacity = size_t(1) << 30;

// A kept mapping of exactly `bytes`, zeroed, or nullptr.
void* take(size_t bytes);
// Keeps the mapping `p` of `bytes` for a later take(); false (the caller unmaps it) when full.
bool keep(void* p, size_t bytes);
// Bytes kept now.
size_t kept();

}  // namespace paratwin::exec::block_cache
