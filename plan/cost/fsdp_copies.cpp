#include "plan/cost/fsdp_copies.hpp"

#include "plan/cost/memory.hpp"

namespace paratwin::cost {

namespace {

constexpr double kMaster = 4;  // the sharded parameters and their gradient, fp32 under mixed precision

// One gather's copies: FSDP2's copy-in (the cast of the fp32 shard, then its copy into the
// all-gather input) and copy-out (the gathered buffer into the parameters); FSDP1's cast of the shard.
void gather_copies(FsdpCopies kind, double gathered, bool mixed, double P, double shard, FsdpCopyBytes& c) {
  const double cast_shard = mixed ? (kMaster + gathered) * shard : 0;
  if (kind == FsdpCopies::Fsdp2) {
    c.side += Bytes(cast_shard + 2 * gathered * shard);
    c.side_launches += mixed ? 2 : 1;
    c.compute += Bytes(2 * gathered * P);
    c.compute_launches += 1;
  } else if (mixed) {
    c.side += Bytes(cast_shard);
    c.side_launches += 1;
  }
}

// What the sharded gradient's accumulation adds once reduced: the cast to fp32 when reduced narrower,
// and from the second micro-batch on the += (two reads and a write).
void shard_gradient(double reduced, double shard, bool accumulates, FsdpCopyBytes& c) {
  if (reduced != kMaster) {
    c.side += Bytes((reduced + kMaster) * shard);
    c.side_launches += 1;
  }
  if (accumulates) {
    c.side += Bytes(3 * kMaster * shard);
    c.side_launches += 1;
  }
}

}  // namespace

FsdpCopyBytes fsdp_copy_bytes(const TrainingSpec& training, double P, int dp, bool gathers, bool reduces,
                              bool accumulates) {
  FsdpCopyBytes c;
  if (training.fsdp == FsdpCopies::None || P <= 0 || dp < 1) return c;
  const double element = element_bytes(training.precision);  // the unsharded gradients'
  const double gathered = gathered_weight_bytes(training), reduced = gradient_bytes(training);
  const bool mixed = element < kMaster;
  const double shard = P / dp;
  if (gathers) gather_copies(training.fsdp, gathered, mixed, P, shard, c);
  if (!reduces) return c;
  if (training.fsdp == FsdpCopies::Fsdp2) {
    // _chunk_cat: the unsharded gradients read, the reduce-scatter input written in reduce_dtype.
    c.compute += Bytes((element + reduced) * P);
    c.compute_launches += 1;
  } else {
    // Autograd's backward of the views' split: the flat gradient concatenated.
    c.compute += Bytes(2 * element * P);
    c.compute_launches += 1;
    if (reduced != element) {  // the cast to reduce_dtype
      c.side += Bytes((element + reduced) * P);
      c.side_launches += 1;
    }
    if (dp > 1) {  // the pre-divide of the whole flat gradient and the post-divide of the shard
      c.side += Bytes(2 * reduced * (P + shard));
      c.side_launches += 2;
    }
  }
  shard_gradient(reduced, shard, accumulates, c);
  return c;
}

Bytes fsdp_accumulation_bytes(const TrainingSpec& training, double P, bool first) {
  const double element = element_bytes(training.precision), reduced = gradient_bytes(training);
  switch (training.fsdp) {
    case FsdpCopies::None:
      return Bytes(0);
    case FsdpCopies::Fsdp1:
      return Bytes(first ? 0 : 3 * element * P);
    case FsdpCopies::Fsdp2:
      break;
  }
  if (first) return Bytes(reduced != element ? (element + reduced) * P : 0);
  return Bytes((element + 2 * reduced) * P);
}

}  // namespace paratwin::cost
