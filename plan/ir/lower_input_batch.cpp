// The data loader's host-to-device copy of each micro-batch (Purpose::InputBatch).
#include <utility>

#include "plan/ir/role_builder.hpp"

namespace paratwin::lowering {

int RoleBuilder::input_batch(int mb, int chunk) {
  Task in;
  in.kind = TaskKind::Copy;
  in.stream = StreamKind::Copy;
  in.purpose = Purpose::InputBatch;
  in.microbatch = mb;
  in.chunk = chunk;
  // int64 ids (torch.long, what PyTorch's embedding and cross-entropy take): the inputs for the
  // embedding, the labels for the loss, both on a stage that holds the whole model. A few KB to MB,
  // left out of the memory count.
  const int ids = (chunk == 0 ? 1 : 0) + (last_chunk(chunk) ? 1 : 0);
  in.bytes = Bytes(8.0 * ids * p_.micro_batch * (double(t_.seq_len) / p_.cp));
  in.name = named("copy h2d batch ", mb, chunk);
  return add(std::move(in));  // after nothing: the loader's workers have the batch ready
}

}  // namespace paratwin::lowering
