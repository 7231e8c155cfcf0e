// The deterministic data stream.
#include "exec/data/loader.hpp"

#include <string>

#include "plan/spec/diagnostics.hpp"

namespace paratwin::exec {

DataLoader::DataLoader(std::vector<uint16_t> tokens, int seq_len, int vocab)
    : tokens_(std::move(tokens)), seq_len_(seq_len) {
  if (seq_len < 1 || tokens_.size() < size_t(seq_len) + 1)
    throw InputError(Location{"<--data>"}, "the corpus holds " + std::to_string(tokens_.size()) +
                                               " tokens; a sequence of " + std::to_string(seq_len) +
                                               " needs " + std::to_string(seq_len + 1));
  for (uint16_t t : tokens_)
    if (t >= vocab)
      throw InputError(Location{"<--data>"}, "the corpus holds token " + std::to_string(t) +
                                                 ", outside the model's vocabulary of " +
                                                 std::to_string(vocab));
  per_epoch_ = int64_t((tokens_.size() - 1) / size_t(seq_len));
}

void DataLoader::fill(int64_t first_sequence, int B, int32_t* inputs, int32_t* targets) const {
  // inputs and targets are (B,T); targets are the inputs shifted by one token
  for (int b = 0; b < B; ++b) {
    const size_t start = size_t((first_sequence + b) % per_epoch_) * size_t(seq_len_);
    for (int t = 0; t < seq_len_; ++t) {
      inputs[b * seq_len_ + t] = tokens_[start + t];
      targets[b * seq_len_ + t] = tokens_[start + t + 1];
    }
  }
}

Batch DataLoader::batch(int64_t first_sequence, int B) const {
  Batch b{std::vector<int32_t>(size_t(B) * size_t(seq_len_)),
          std::vector<int32_t>(size_t(B) * size_t(seq_len_))};
  fill(first_sequence, B, b.inputs.data(), b.targets.data());
  return b;
}

}  // namespace paratwin::exec
