#include "exec/memory/block_cache.hpp"

#include <cstring>
#include <map>
#include <mutex>

namespace paratwin::exec::block_cache {

namespace {

struct Cache {
  std::mutex mutex;
  std::multimap<size_t, void*> blocks;  // by size: a step asks for the sizes it gave back
  size_t bytes = 0;
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: buffers of static lifetime may be freed after main
  return *c;
}

}  // namespace

void* take(size_t bytes) {
  Cache& c = cache();
  void* p = nullptr;
  {
    std::lock_guard lock(c.mutex);
    const auto it = c.blocks.find(bytes);
    if (it == c.blocks.end()) return nullptr;
    p = it->second;
    c.blocks.erase(it);
    c.bytes -= bytes;
  }
  std::memset(p, 0, bytes);
  return p;
}

bool keep(void* p, size_t bytes) {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  if (c.bytes + bytes > kCapacity) return false;
  c.blocks.emplace(bytes, p);
  c.bytes += bytes;
  return true;
}

size_t kept() {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  return c.bytes;
}

}  // namespace paratwin::exec::block_cache
