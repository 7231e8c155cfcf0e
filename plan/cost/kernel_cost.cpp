// KernelCost's arithmetic (sums, multiples, differences, the memory-bound kinds' totals) and the costs
// of one kind of kernel each; the kernels of a layer are compute.cpp's.
#include <cassert>
#include <memory>
#include <utility>
#include <vector>

#include "plan/cost/compute.hpp"

namespace paratwin::cost {

void GemmList::add(const Gemm& g) {
  auto v = v_ ? std::make_shared<std::vector<Gemm>>(*v_) : std::make_shared<std::vector<Gemm>>();
  for (Gemm& known : *v)
    if (known.same_shape(g)) {
      known.count += g.count;
      v_ = std::move(v);
      return;
    }
  v->push_back(g);
  v_ = std::move(v);
}

void GemmList::remove(const Gemm& g) {
  auto v = std::make_shared<std::vector<Gemm>>(v_ ? *v_ : std::vector<Gemm>{});
  for (auto it = v->begin(); it != v->end(); ++it)
    if (it->same_shape(g)) {
      assert(it->count >= g.count * (1 - 1e-9) && "removing more launches than the list holds");
      it->count -= g.count;
      if (it->count <= 1e-9 * g.count) v->erase(it);
      v_ = std::move(v);
      return;
    }
  assert(false && "removing a GEMM shape the list does not hold");
}

GemmList GemmList::times(double k) const {
  if (!v_ || k == 1) return *this;
  auto v = std::make_shared<std::vector<Gemm>>(*v_);
  for (Gemm& g : *v) g.count *= k;
  GemmList out;
  out.v_ = std::move(v);
  return out;
}

KernelCost& KernelCost::operator+=(const KernelCost& o) {
  gemm_flops += o.gemm_flops;
  attention_flops += o.attention_flops;
  gemm_bytes += o.gemm_bytes;
  if (gemms.size() == 0)
    gemms = o.gemms;
  else
    for (const Gemm& g : o.gemms) gemms.add(g);
  flash_forward_flops += o.flash_forward_flops;
  flash_backward_flops += o.flash_backward_flops;
  flash_full_forward_flops += o.flash_full_forward_flops;
  flash_full_backward_flops += o.flash_full_backward_flops;
  if (o.fused_attention_flops().value() > 0) {
    fused_kernel = o.fused_kernel;
    fused_head_dim = o.fused_head_dim;
    fused_key_length = o.fused_key_length;
  }
  for (const MemoryBoundKind& k : kMemoryBoundKinds) this->*k.bytes += o.*k.bytes;
  optimizer_bytes += o.optimizer_bytes;
  launches += o.launches;
  synchronous_launches += o.synchronous_launches;
  host_syncs += o.host_syncs;
  return *this;
}

KernelCost KernelCost::operator*(int k) const {
  KernelCost c = *this;
  c.gemm_flops = gemm_flops * k;
  c.attention_flops = attention_flops * k;
  c.gemm_bytes = gemm_bytes * k;
  c.gemms = gemms.times(k);
  c.flash_forward_flops = flash_forward_flops * k;
  c.flash_backward_flops = flash_backward_flops * k;
  c.flash_full_forward_flops = flash_full_forward_flops * k;
  c.flash_full_backward_flops = flash_full_backward_flops * k;
  for (const MemoryBoundKind& kind : kMemoryBoundKinds) c.*kind.bytes = this->*kind.bytes * k;
  c.optimizer_bytes = optimizer_bytes * k;
  c.launches = launches * k;
  c.synchronous_launches = synchronous_launches * k;
  c.host_syncs = host_syncs * k;
  return c;
}

KernelCost without(const KernelCost& whole, const KernelCost& part) {
  assert(part.optimizer_bytes.value() == 0 && "no optimizer step");
  KernelCost c = whole;
  for (const Gemm& g : part.gemms) c.gemms.remove(g);
  c.gemm_flops = c.gemm_flops - part.gemm_flops;
  c.attention_flops = c.attention_flops - part.attention_flops;
  c.gemm_bytes = c.gemm_bytes - part.gemm_bytes;
  c.flash_forward_flops = c.flash_forward_flops - part.flash_forward_flops;
  c.flash_backward_flops = c.flash_backward_flops - part.flash_backward_flops;
  c.flash_full_forward_flops = c.flash_full_forward_flops - part.flash_full_forward_flops;
  c.flash_full_backward_flops = c.flash_full_backward_flops - part.flash_full_backward_flops;
  for (const MemoryBoundKind& k : kMemoryBoundKinds) c.*k.bytes = c.*k.bytes - part.*k.bytes;
  c.launches -= part.launches;
  c.host_syncs -= part.host_syncs;
  return c;
}

double upcast_round_trip_bytes(double e) {
  return e < 4 ? 2 * (e + 4) : 0;
}

Bytes KernelCost::memory_bound_bytes() const {
  Bytes sum;
  for (const MemoryBoundKind& k : kMemoryBoundKinds) sum += this->*k.bytes;
  return sum;
}

double memory_equivalent_bytes(const KernelCost& cost, const EfficiencySpec& e) {
  double sum = 0;
  for (const MemoryBoundKind& k : kMemoryBoundKinds)
    sum += (cost.*k.bytes).value() * e.memory / e.memory_share(k.share);
  return sum;
}

namespace {

// `launches` kernels of one memory-bound kind (its bytes in KernelCost) that move `bytes` in all.
KernelCost kernels_of(Bytes KernelCost::*kind, double bytes, int launches) {
  KernelCost c;
  c.*kind = Bytes(bytes);
  c.launches = launches;
  return c;
}

}  // namespace

KernelCost memory_bound_kernels(double bytes, int launches) {
  return kernels_of(&KernelCost::elementwise_bytes, bytes, launches);
}

KernelCost norm_kernel(double bytes) {
  return kernels_of(&KernelCost::norm_bytes, bytes, 1);
}

KernelCost eager_norm_kernels(double bytes, int launches) {
  return kernels_of(&KernelCost::eager_norm_bytes, bytes, launches);
}

KernelCost gated_kernels(double bytes, int launches) {
  return kernels_of(&KernelCost::gated_bytes, bytes, launches);
}

KernelCost scores_kernels(double bytes, int launches) {
  return kernels_of(&KernelCost::scores_bytes, bytes, launches);
}

}  // namespace paratwin::cost
