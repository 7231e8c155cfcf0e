// Megatron-style tensor parallelism over the kernels of exec/gpt/: each layer's QKV and first MLP
// projection are split by columns (whole heads, whole FFN units), the attention and MLP output
// projections by rows, and one all-reduce after each row-parallel projection (forward) or before each
// norm's backward (the column-parallel inputs' gradients) makes the residual stream whole again.
#include "exec/gpt/tensor_parallel.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "exec/gpt/context_parallel.hpp"
#include "exec/gpt/gemm.hpp"
#include "exec/gpt/kernel_clock.hpp"
#include "exec/gpt/kernels.hpp"
#include "exec/memory/memory_meter.hpp"
#include "exec/threads.hpp"

namespace paratwin::exec {

namespace k = kernels;

namespace {
constexpr long kRows = 16;  // rows (tokens) of a piece of the rank's threads
template <class T>
using RowArray = Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>>;
}  // namespace

ShardedGpt::ShardedGpt(const GptConfig& full, ShardSpec spec, Communicator* tp)
    : full_(full), spec_(std::move(spec)), tp_(tp) {
  const int t = spec_.tp, r = spec_.tp_rank;
  const auto divides = [&](int n, const char* what) {
    if (n % t != 0)
      throw std::invalid_argument("tensor parallelism " + std::to_string(t) +
                                  " does not divide the model's " + what + " (" + std::to_string(n) + ")");
  };
  divides(full.heads, "heads");
  divides(full.kv_heads, "kv_heads");
  divides(full.ffn, "ffn_hidden");
  divides(full.vocab, "vocabulary");
  if (full.experts % spec_.ep != 0)
    throw std::invalid_argument("expert parallelism " + std::to_string(spec_.ep) +
                                " does not divide the model's experts (" + std::to_string(full.experts) +
                                ")");
  if (t > 1 && !tp_) throw std::logic_error("tensor parallelism without a TP communicator");
  if (spec_.fold_experts && !sequence_parallel())
    throw std::invalid_argument(
        "folded experts route each rank's sequence-parallel share of the tokens: "
        "they need tp > 1 and sequence parallelism");
  Hl_ = full.heads / t, Kl_ = full.kv_heads / t, Fl_ = full.ffn / t, Vl_ = full.vocab / t;
  Fe_ = spec_.fold_experts ? full.ffn : Fl_;
  if (full.alibi) alibi_ = k::alibi_slopes(full.heads);
  rotary_ = k::rotary_angles(full.head_dim, full.yarn_factor, full.yarn_context);
  const ParameterLayout layout = parameter_layout(full);
  const size_t C = full.hidden, D = full.head_dim, H = full.heads, K = full.kv_heads, F = full.ffn;
  const auto whole = [&](const std::string& name, bool replicated = true) {
    const ParameterTensor& f = layout.find(name);
    add(name, f.offset, f.rows, f.cols, 0, f.rows, {{0, f.cols}}, replicated);
  };
  const auto vocab_rows = [&](const std::string& name, const std::string& from, bool tied_copy) {
    const ParameterTensor& f = layout.find(from);
    add(name, f.offset, f.rows, f.cols, size_t(r) * Vl_, Vl_, {{0, f.cols}}, false, tied_copy);
  };
  // Columns of whole heads (Q, then K and V of their kv heads) and of whole FFN units.
  const size_t h0 = size_t(r) * Hl_, k0 = size_t(r) * Kl_, f0 = size_t(r) * Fl_;
  const std::vector<std::pair<size_t, size_t>> qkv_cols = {{h0 * D, (h0 + Hl_) * D},
                                                           {(H + k0) * D, (H + k0 + Kl_) * D},
                                                           {(H + K + k0) * D, (H + K + k0 + Kl_) * D}};
  std::vector<std::pair<size_t, size_t>> fc_cols = {{f0, f0 + Fl_}};
  if (full.swiglu) fc_cols.push_back({F + f0, F + f0 + Fl_});

  if (spec_.first) {
    vocab_rows("wte", "wte", false);
    wte_ = tensors_.back().offset;
    if (full.learned_positions()) {
      whole("wpe");
      wpe_ = tensors_.back().offset;
    }
  }
  layers_.assign(
      full.layers,
      Layer{kNone, kNone, kNone, kNone, kNone, kNone, kNone, kNone, kNone, kNone, kNone, kNone, kNone, {}});
  layer_begin_.assign(full.layers, kNone);
  layer_end_.assign(full.layers, kNone);
  for (const auto& [lo, hi] : spec_.chunks)
    for (int l = lo; l < hi; ++l) {
      const std::string n = "layer" + std::to_string(l) + ".";
      Layer& w = layers_[l];
      layer_begin_[l] = total_;
      const auto part = [&](const std::string& name, size_t row_begin, size_t rows,
                            std::vector<std::pair<size_t, size_t>> cols) {
        const ParameterTensor& f = layout.find(n + name);
        add(n + name, f.offset, f.rows, f.cols, row_begin, rows, std::move(cols), false);
        return tensors_.back().offset;
      };
      const auto rep = [&](const std::string& name, bool present) {
        if (!present) return kNone;
        whole(n + name);
        return tensors_.back().offset;
      };
      const bool ln = !full.rmsnorm, b = full.bias;
      w.ln1_w = rep("ln1_w", true);
      w.ln1_b = rep("ln1_b", ln);
      w.qkv_w = part("qkv_w", 0, C, qkv_cols);
      w.qkv_b = b ? part("qkv_b", 0, 1, qkv_cols) : kNone;
      w.proj_w = part("attn_proj_w", h0 * D, Hl_ * D, {{0, C}});
      w.proj_b = rep("attn_proj_b", b);
      w.ln2_w = rep("ln2_w", true);
      w.ln2_b = rep("ln2_b", ln);
      // A MoE layer: the router whole on every TP rank, then this rank's experts, each split over TP as
      // the dense MLP is (one contiguous range per expert, reduced over the ranks that hold it), or whole
      // when folded (its output bias too, the rank's own: it adds it to its own tokens).
      const bool moe = full.moe_layer(l);
      if (moe) w.router_w = rep("router_w", true);
      const int experts = moe ? full.experts / spec_.ep : 1, first = moe ? spec_.ep_rank * experts : 0;
      const bool whole_experts = moe && spec_.fold_experts;
      std::vector<std::pair<size_t, size_t>> expert_cols = {{0, F}};
      if (full.swiglu) expert_cols.push_back({F, 2 * F});
      for (int e = first; e < first + experts; ++e) {
        const std::string m = moe ? "expert" + std::to_string(e) + "." : "";
        const size_t begin = tensors_.size();
        const auto& cols = whole_experts ? expert_cols : fc_cols;
        const MlpOffsets x{
            part(m + "fc_w", 0, C, cols), b ? part(m + "fc_b", 0, 1, cols) : kNone,
            whole_experts ? part(m + "fc_proj_w", 0, F, {{0, C}}) : part(m + "fc_proj_w", f0, Fl_, {{0, C}}),
            !b              ? kNone
            : whole_experts ? part(m + "fc_proj_b", 0, 1, {{0, C}})
                            : rep(m + "fc_proj_b", b)};
        if (!moe) {
          w.fc_w = x.fc_w, w.fc_b = x.fc_b, w.fc_proj_w = x.fc_proj_w, w.fc_proj_b = x.fc_proj_b;
          continue;
        }
        w.experts.push_back(x);
        for (size_t i = begin; i < tensors_.size(); ++i) tensors_[i].expert = true;
      }
      layer_end_[l] = total_;
    }
  tail_begin_ = total_;
  if (spec_.last) {
    whole("lnf_w");
    lnf_w_ = tensors_.back().offset;
    if (!full.rmsnorm) {
      whole("lnf_b");
      lnf_b_ = tensors_.back().offset;
    }
    if (!full.tied) {
      vocab_rows("head", "head", false);
      head_ = tensors_.back().offset;
    } else if (spec_.first) {
      head_ = wte_;  // one stage holds both ends: the very same tensor
    } else {
      vocab_rows("head", "wte", true);
      head_ = tensors_.back().offset;
    }
  }
  {
    MemoryUseScope use(MemoryUse::Parameters);  // the memory report's make-up
    params_.resize(total_);                     // zero (exec/tensor.hpp), untouched until initialized
  }
  MemoryUseScope use(MemoryUse::Gradients);
  grads_.resize(total_);  // zero, untouched until the first step zeroes it on the rank's threads
}

void ShardedGpt::add(const std::string& name, size_t full_offset, size_t full_rows, size_t full_cols,
                     size_t row_begin, size_t rows, std::vector<std::pair<size_t, size_t>> columns,
                     bool replicated, bool tied_copy) {
  ShardTensor t;
  t.name = name;
  t.offset = total_;
  t.rows = rows;
  t.cols = 0;
  for (const auto& [a, b] : columns) t.cols += b - a;
  t.full_offset = full_offset;
  t.full_rows = full_rows;
  t.full_cols = full_cols;
  t.row_begin = row_begin;
  t.columns = std::move(columns);
  t.replicated = replicated || spec_.tp == 1;
  t.tied_copy = tied_copy;
  total_ += t.size();
  tensors_.push_back(std::move(t));
}

std::pair<size_t, size_t> ShardedGpt::range(int lo, int hi) const {
  return {lo == 0 ? 0 : layer_begin_.at(lo), hi == full_.layers ? total_ : layer_end_.at(hi - 1)};
}

std::pair<size_t, size_t> ShardedGpt::head_range() const {
  if (head_ == kNone) return {0, 0};
  return {head_, head_ + size_t(Vl_) * full_.hidden};
}

std::pair<size_t, size_t> ShardedGpt::wte_range() const {
  if (wte_ == kNone) return {0, 0};
  return {wte_, wte_ + size_t(Vl_) * full_.hidden};
}

void ShardedGpt::zero_gradients() {
  parallel_for(long(grads_.size()), 1L << 18,
               [&](long b, long e) { std::fill(grads_.data() + b, grads_.data() + e, 0.0f); });
  for (int32_t row : lookup_rows_) lookup_slot_[size_t(row)] = -1;
  lookup_rows_.clear();
  lookup_gradients_.clear();
}

void ShardedGpt::add_lookup_gradient(const ChunkActivations& a, const float* d) {
  // d (N,C): every token's gradient; this rank's vocabulary rows get slots in order of first use.
  const int N = a.B * a.Tn, C = full_.hidden, v0 = spec_.tp_rank * Vl_;
  if (lookup_slot_.empty()) lookup_slot_.assign(size_t(Vl_), -1);
  std::vector<int32_t> slot(size_t(N), -1);
  for (int i = 0; i < N; ++i) {
    const int row = a.tokens[size_t(i)] - v0;
    if (row < 0 || row >= Vl_) continue;
    if (lookup_slot_[size_t(row)] < 0) {
      lookup_slot_[size_t(row)] = int32_t(lookup_rows_.size());
      lookup_rows_.push_back(row);
    }
    slot[size_t(i)] = lookup_slot_[size_t(row)];
  }
  {
    MemoryUseScope use(MemoryUse::Gradients);
    lookup_gradients_.resize(lookup_rows_.size() * C, 0.0f);
  }
  parallel_for(C, 64, [&](long j0, long j1) {
    for (int i = 0; i < N; ++i) {
      if (slot[size_t(i)] < 0) continue;
      float* de = lookup_gradients_.data() + size_t(slot[size_t(i)]) * C;
      const float* dy = d + size_t(i) * C;
      for (long j = j0; j < j1; ++j) de[j] += dy[j];
    }
  });
}

void ShardedGpt::allreduce(float* data, size_t count) {
  if (spec_.tp == 1) return;
  const auto t0 = std::chrono::steady_clock::now();
  tp_->wait(tp_->start_allreduce_sum(data, count));
  tp_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

kernels::AttentionMask ShardedGpt::attention_mask(int layer) const {
  return {alibi_.empty() ? nullptr : alibi_.data() + size_t(spec_.tp_rank) * Hl_, full_.window(layer)};
}

const int* ShardedGpt::positions() const {
  return cp_ ? cp_->positions().data() : nullptr;
}

int ShardedGpt::keys(int Tn) const {
  return cp_ ? cp_->seq_len() : Tn;
}

int ShardedGpt::cp_size() const {
  return cp_ ? cp_->size() : 1;
}

int ShardedGpt::stream_rows(int N) const {
  return sequence_parallel() ? N / spec_.tp : N;
}

float* ShardedGpt::reduce(float* partial, int N) {
  // (N,C) partial sums over the TP group -> this rank's rows of the sum: all of them (all-reduce) or,
  // under sequence parallelism, its n = N/tp rows (reduce-scatter, left at their place in `partial`).
  const size_t C = full_.hidden;
  if (spec_.tp == 1) return partial;
  const auto t0 = std::chrono::steady_clock::now();
  const int n = stream_rows(N);
  if (sequence_parallel())
    tp_->wait(tp_->start_reduce_scatter_sum(partial, std::vector<size_t>(size_t(spec_.tp), size_t(n) * C)));
  else
    tp_->wait(tp_->start_allreduce_sum(partial, size_t(N) * C));
  tp_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return partial + size_t(first_row(N)) * C;
}

void ShardedGpt::gather(float* full, int N) {
  // Under sequence parallelism each rank has written its rows of `full` (N,C): the all-gather brings
  // every rank's.
  if (!sequence_parallel()) return;
  const auto t0 = std::chrono::steady_clock::now();
  tp_->wait(tp_->start_allgather(
      full, std::vector<size_t>(size_t(spec_.tp), size_t(stream_rows(N)) * full_.hidden)));
  tp_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void ShardedGpt::residual_add(float* out, const float* sum, const float* bias, const float* residual,
                              int rows) const {
  const size_t C = full_.hidden;
  parallel_for(rows, kRows, [&](long i0, long i1) {
    for (size_t i = size_t(i0) * C; i < size_t(i1) * C; ++i)
      out[i] = (bias ? sum[i] + bias[i % C] : sum[i]) + residual[i];
  });
}

int ShardedGpt::first_row(int N) const {
  return sequence_parallel() ? spec_.tp_rank * (N / spec_.tp) : 0;
}

void ShardedGpt::norm_backward(float* dinp, size_t dweight, size_t dbias, const float* dout, const float* inp,
                               size_t weight, const float* mean, const float* rstd, int rows) {
  const int C = full_.hidden;
  if (!sequence_parallel()) {
    k::norm_backward(dinp, g(dweight), g(dbias), dout, inp, p(weight), mean, rstd, rows, C);
    return;
  }
  // This rank's rows give part of the norm's weight gradients: summed over the group.
  norm_grads_.assign(2 * size_t(C), 0.0f);
  k::norm_backward(dinp, norm_grads_.data(), dbias == kNone ? nullptr : norm_grads_.data() + C, dout, inp,
                   p(weight), mean, rstd, rows, C);
  allreduce(norm_grads_.data(), 2 * size_t(C));
  for (int j = 0; j < C; ++j) g(dweight)[j] += norm_grads_[j];
  if (dbias != kNone)
    for (int j = 0; j < C; ++j) g(dbias)[j] += norm_grads_[C + j];
}

double ShardedGpt::forward(ChunkActivations& a) {
  const GptConfig& c = full_;
  const auto [lo, hi] = spec_.chunks.at(a.chunk);
  const int B = a.B, Tn = a.Tn, N = B * Tn, C = c.hidden, V = c.vocab;
  const int n = stream_rows(N), r0 = first_row(N);
  const int v0 = spec_.tp_rank * Vl_;
  ensure_scratch(N);
  float* tmp = tmp_.data();
  a.recomputed_layer = -1;
  if (lo == 0) {
    for (int i = 0; i < N; ++i)
      if (a.tokens[i] < 0 || a.tokens[i] >= V)
        throw std::invalid_argument("token " + std::to_string(a.tokens[i]) +
                                    " is outside the vocabulary of " + std::to_string(V));
    // Vocabulary-parallel embedding: each rank looks up the tokens of its rows, the sum makes them whole.
    parallel_for(N, kRows, [&](long i0, long i1) {
      for (long i = i0; i < i1; ++i) {
        const int row = a.tokens[size_t(i)] - v0;
        float* y = tmp + size_t(i) * C;
        if (row >= 0 && row < Vl_)
          std::memcpy(y, p(wte_) + size_t(row) * C, C * sizeof(float));
        else
          std::fill(y, y + C, 0.0f);
      }
    });
    const float* e = reduce(tmp, N);
    float* x = a.residual.data();
    parallel_for(n, kRows, [&](long i0, long i1) {
      for (long i = i0; i < i1; ++i)
        for (int j = 0; j < C; ++j)
          x[size_t(i) * C + j] = e[size_t(i) * C + j] +
                                 (wpe_ != kNone ? p(wpe_)[size_t(position(int(r0 + i) % Tn)) * C + j] : 0.0f);
    });
  }
  forward_layers(a, lo, hi, false);
  return forward_head(a);
}

void ShardedGpt::norm_into(Buffer<float>& out, Buffer<float>& mean, Buffer<float>& rstd, size_t slot,
                           const float* inp, size_t weight, size_t bias, int N, bool gathered) {
  const int C = full_.hidden, n = stream_rows(N);
  float* o = out.data() + slot * N * C;
  k::norm_forward(o + size_t(first_row(N)) * C, full_.rmsnorm ? nullptr : mean.data() + slot * n,
                  rstd.data() + slot * n, inp, p(weight), p(bias), n, C);
  if (gathered) gather(o, N);
}

void ShardedGpt::norm1_forward(ChunkActivations& a, int layer) {
  const Layer& w = layers_[layer];
  const int li = layer - spec_.chunks.at(a.chunk).first, N = a.B * a.Tn;
  norm_into(a.ln1, a.ln1_mean, a.ln1_rstd, a.inner(li), a.residual.data() + size_t(li) * boundary_size(a),
            w.ln1_w, w.ln1_b, N);
}

void ShardedGpt::norm2_forward(ChunkActivations& a, int layer) {
  const Layer& w = layers_[layer];
  const int li = layer - spec_.chunks.at(a.chunk).first, N = a.B * a.Tn;
  norm_into(a.ln2, a.ln2_mean, a.ln2_rstd, a.norm2(li), a.mid.data() + mid_slot(a, li) * boundary_size(a),
            w.ln2_w, w.ln2_b, N, !folded_moe(layer));
}

// Layers [from, to) of the chunk; `recomputing` writes the last one's output aside (its next layer's
// input is kept, and may be on its way to the next stage).
void ShardedGpt::forward_layers(ChunkActivations& a, int from, int to, bool recomputing) {
  const GptConfig& c = full_;
  const int lo = spec_.chunks.at(a.chunk).first;
  const int B = a.B, Tn = a.Tn, N = B * Tn, C = c.hidden, D = c.head_dim;
  const int QKV = (Hl_ + 2 * Kl_) * D, HD = Hl_ * D, FW = c.swiglu ? 2 * Fl_ : Fl_;
  const int n = stream_rows(N);
  const size_t nC = size_t(n) * C;
  ensure_scratch(N);
  float* tmp = tmp_.data();
  for (int l = from; l < to; ++l) {
    const Layer& w = layers_[l];
    const int li = l - lo;
    // Where the layer's activations go: one layer's buffers for those it drops.
    const size_t s = a.kept(li), si = a.inner(li);
    float* x = a.residual.data() + size_t(li) * nC;  // (n,C) the layer's input
    float* ln1 = a.ln1.data() + si * N * C;          // (N,C)
    float* qkv = a.qkv.data() + s * N * QKV;
    float* att = a.att.data() + a.att_kept(li) * B * Hl_ * Tn * keys(Tn);
    float* kv = cp_ ? a.kv.data() + s * B * keys(Tn) * 2 * Kl_ * D : nullptr;
    float* attn_out = a.attn_out.data() + si * N * HD;
    float* mid = a.mid.data() + mid_slot(a, li) * nC;  // (n,C)
    float* ln2 = a.ln2.data() + a.norm2(li) * N * C;   // (N,C)
    float* fc = a.fc.data() + s * N * FW;
    float* act = a.fc_act.data() + si * N * Fl_;
    float* out = recomputing && l == to - 1 ? a.recomputed_out.data() : x + nC;  // (n,C) the next input

    norm1_forward(a, l);
    k::linear_forward(qkv, ln1, p(w.qkv_w), p(w.qkv_b), N, C, QKV);  // column-parallel: this rank's heads
    if (c.rope) k::rope(qkv, B, Tn, Hl_, Kl_, D, false, positions(), rotary_);
    if (cp_)
      cp_->attention_forward(attn_out, att, kv, qkv, B, Hl_, Kl_, D,
                             attention_mask(l));  // keys and values over CP
    else
      k::attention_forward(attn_out, att, qkv, B, Tn, Hl_, Kl_, D, attention_mask(l));
    k::linear_forward(tmp, attn_out, p(w.proj_w), static_cast<const float*>(nullptr), N, HD,
                      C);                                  // row-parallel
    residual_add(mid, reduce(tmp, N), p(w.proj_b), x, n);  // mid = projection + bias + x
    norm2_forward(a, l);
    const bool folded = folded_moe(l);
    if (c.moe_layer(l)) {
      // Every TP rank routes all N tokens and its experts' columns give partial sums, or, folded, the
      // rank's own rows go through its whole experts: the sum, nothing to reduce.
      if (folded)
        moe_forward(a, l, s, n, ln2 + size_t(first_row(N)) * C, tmp);
      else
        moe_forward(a, l, s, N, ln2, tmp);
      if (drops_moe_act(a, li, l)) Buffer<float>().swap(a.moe[s].fc_act);
    } else {
      k::linear_forward(fc, ln2, p(w.fc_w), p(w.fc_b), N, C, FW);
      k::mlp_activation_forward(act, fc, N, Fl_, c.swiglu);
      k::linear_forward(tmp, act, p(w.fc_proj_w), static_cast<const float*>(nullptr), N, Fl_, C);
    }
    residual_add(out, folded ? tmp : reduce(tmp, N), p(w.fc_proj_b), mid, n);  // out = MLP + bias + mid
  }
}

// The last chunk's final norm, head and vocabulary-parallel loss (0 on other chunks).
double ShardedGpt::forward_head(ChunkActivations& a) {
  const GptConfig& c = full_;
  const int hi = spec_.chunks.at(a.chunk).second;
  const int N = a.B * a.Tn, C = c.hidden;
  const int n = stream_rows(N), r0 = first_row(N);
  const bool ln = !c.rmsnorm;
  const int v0 = spec_.tp_rank * Vl_;
  if (!(spec_.last && hi == c.layers)) return a.loss = 0;
  k::norm_forward(a.lnf.data() + size_t(r0) * C, ln ? a.lnf_mean.data() : nullptr, a.lnf_rstd.data(),
                  output(a), p(lnf_w_), p(lnf_b_), n, C);
  gather(a.lnf.data(), N);
  // logits (N,Vl) = lnf (N,C) . head^T over this rank's vocabulary rows
  {
    KernelTimer timer(kernel_seconds.dense_s);
    k::gemm(false, true, N, Vl_, C, 1.0f, a.lnf.data(), C, p(head_), C, 0.0f, a.probs.data(), Vl_);
  }
  // Vocabulary-parallel cross-entropy: the row maxima, the sums of exponentials and the target logits
  // reduced over the group; each rank keeps the probabilities of its columns.
  row_.assign(size_t(3) * N, 0.0f);
  float* max = row_.data();
  float* sum = max + N;
  float* target = sum + N;
  parallel_for(N, 1, [&](long i0, long i1) {
    for (long i = i0; i < i1; ++i) max[i] = RowArray<float>(a.probs.data() + size_t(i) * Vl_, Vl_).maxCoeff();
  });
  if (spec_.tp > 1) {
    const auto t0 = std::chrono::steady_clock::now();
    tp_->allreduce_max(max, N);
    tp_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  parallel_for(N, 1, [&](long i0, long i1) {
    for (long i = i0; i < i1; ++i) {
      RowArray<float> z(a.probs.data() + size_t(i) * Vl_, Vl_);
      const int t = a.targets[size_t(i)] - v0;
      target[i] = t >= 0 && t < Vl_ ? z[t] - max[i] : 0.0f;
      z = (z - max[i]).exp();
      sum[i] = z.sum();
    }
  });
  allreduce(sum, 2 * size_t(N));
  parallel_for(N, 1, [&](long i0, long i1) {
    for (long i = i0; i < i1; ++i) {
      RowArray<float>(a.probs.data() + size_t(i) * Vl_, Vl_) /= sum[i];
      a.losses[size_t(i)] = std::log(sum[i]) - target[i];
    }
  });
  double total = 0;  // in token order
  for (int i = 0; i < N; ++i) total += a.losses[size_t(i)];
  // The mean over the micro-batch's tokens: this rank's share of every sequence, summed over CP.
  if (cp_) total = cp_->sum(total);
  return a.loss = total / (double(N) * cp_size());
}

void ShardedGpt::ensure_scratch(size_t N) {
  const size_t C = full_.hidden, D = full_.head_dim;
  auto fit = [](Buffer<float>& v, size_t n) {
    if (v.size() < n) v.resize(n);
  };
  fit(tmp_, N * C);
  fit(dln_, N * C);
  fit(dqkv_, N * (Hl_ + 2 * Kl_) * D);
  fit(dattn_, N * Hl_ * D);
  fit(dfc_, N * (full_.swiglu ? 2 : 1) * Fl_);
  fit(dact_, N * Fl_);
}

const float* ShardedGpt::whole(const float* rows, int N) {
  // The gradient of the residual stream for all N tokens: this rank's rows gathered (SP), or as is.
  if (!sequence_parallel()) return rows;
  const size_t C = full_.hidden;
  std::memcpy(tmp_.data() + size_t(first_row(N)) * C, rows, size_t(stream_rows(N)) * C * sizeof(float));
  gather(tmp_.data(), N);
  return tmp_.data();
}

void ShardedGpt::backward(ChunkActivations& a, int lo, int hi, float loss_scale) {
  const GptConfig& c = full_;
  const auto [chunk_lo, chunk_hi] = spec_.chunks.at(a.chunk);
  if (lo < chunk_lo || hi > chunk_hi || lo >= hi)
    throw std::invalid_argument("backward of layers outside the chunk, or of none");
  const int B = a.B, Tn = a.Tn, N = B * Tn, C = c.hidden, D = c.head_dim;
  const int QKV = (Hl_ + 2 * Kl_) * D, HD = Hl_ * D, FW = c.swiglu ? 2 * Fl_ : Fl_;
  const int n = stream_rows(N);
  const size_t nC = size_t(n) * C;
  const bool ln = !c.rmsnorm;
  ensure_scratch(N);
  float* dres = a.dresidual.data();  // (n,C)
  if (spec_.last && hi == c.layers) {
    // dlogits (N,Vl) = (probs - onehot) x scale / N over this rank's columns, written over the
    // probabilities (the backward is their last reader): no second (N,Vl) buffer.
    const int v0 = spec_.tp_rank * Vl_;
    const float scale = loss_scale / (float(N) * float(cp_size()));  // of the whole micro-batch's mean
    parallel_for(N, 1, [&](long i0, long i1) {
      for (long i = i0; i < i1; ++i) {
        float* d = a.probs.data() + size_t(i) * Vl_;
        RowArray<float>(d, Vl_) *= scale;
        const int t = a.targets[size_t(i)] - v0;
        if (t >= 0 && t < Vl_) d[t] -= scale;
      }
    });
    {
      // dlnf (N,C) = dlogits . head; dhead (Vl,C) += dlogits^T . lnf
      const float* dlogits = a.probs.data();
      KernelTimer timer(kernel_seconds.dense_s);
      k::gemm(false, false, N, C, Vl_, 1.0f, dlogits, Vl_, p(head_), C, 0.0f, dln_.data(), C);
      k::gemm(true, false, Vl_, C, N, 1.0f, dlogits, Vl_, a.lnf.data(), C, 1.0f, g(head_), C);
    }
    const float* dlnf =
        reduce(dln_.data(), N);  // the head's input gradient, summed over the vocabulary shards
    std::fill(dres, dres + nC, 0.0f);
    norm_backward(dres, lnf_w_, lnf_b_, dlnf, output(a), lnf_w_, ln ? a.lnf_mean.data() : nullptr,
                  a.lnf_rstd.data(), n);
  }
  for (int l = hi - 1; l >= lo; --l) {
    if (a.policy(l - chunk_lo) != ActivationPolicy::KeepAll && a.recomputed_layer != l) recompute(a, l);
    const Layer& w = layers_[l];
    const int li = l - chunk_lo;
    const size_t s = a.kept(li), si = a.inner(li), s2 = a.norm2(li), n1 = si * n;
    const float* x = a.residual.data() + size_t(li) * nC;
    const float* ln1 = a.ln1.data() + si * N * C;
    const float* qkv = a.qkv.data() + s * N * QKV;
    const float* att = a.att.data() + a.att_kept(li) * B * Hl_ * Tn * keys(Tn);
    const float* kv = cp_ ? a.kv.data() + s * B * keys(Tn) * 2 * Kl_ * D : nullptr;
    const float* attn_out = a.attn_out.data() + si * N * HD;
    const float* mid = a.mid.data() + mid_slot(a, li) * nC;
    const float* ln2 = a.ln2.data() + s2 * N * C;
    const float* fc = a.fc.data() + s * N * FW;
    const float* act = a.fc_act.data() + si * N * Fl_;

    // MLP: dres (n,C) is the gradient of the layer's output and, through the residual, of mid.
    std::fill(dln_.begin(), dln_.begin() + size_t(N) * C, 0.0f);
    const float* dln2 = nullptr;  // d loss / d ln2 on the rank's own rows
    if (folded_moe(l)) {
      const size_t own = size_t(first_row(N)) * C;
      moe_backward(a, l, s, n, dres, ln2 + own, dln_.data() + own);
      dln2 = dln_.data() + own;
    } else if (c.moe_layer(l)) {
      moe_backward(a, l, s, N, whole(dres, N), ln2, dln_.data());
    } else {
      std::fill(dact_.begin(), dact_.begin() + size_t(N) * Fl_, 0.0f);
      k::linear_backward(dact_.data(), g(w.fc_proj_w), g(w.fc_proj_b), whole(dres, N), act, p(w.fc_proj_w), N,
                         Fl_, C);
      k::mlp_activation_backward(dfc_.data(), fc, dact_.data(), N, Fl_, c.swiglu);
      k::linear_backward(dln_.data(), g(w.fc_w), g(w.fc_b), dfc_.data(), ln2, p(w.fc_w), N, C, FW);
    }
    if (c.moe_layer(l) && drops_moe_act(a, li, l))
      Buffer<float>().swap(a.moe[s].fc_act);  // recomputed for this backward
    norm_backward(dres, w.ln2_w, w.ln2_b, dln2 ? dln2 : reduce(dln_.data(), N), mid, w.ln2_w,
                  ln ? a.ln2_mean.data() + s2 * n : nullptr, a.ln2_rstd.data() + s2 * n,
                  n);  // dres: d loss / d mid
    // Attention: the same pattern around the attention core.
    std::fill(dattn_.begin(), dattn_.begin() + size_t(N) * HD, 0.0f);
    k::linear_backward(dattn_.data(), g(w.proj_w), g(w.proj_b), whole(dres, N), attn_out, p(w.proj_w), N, HD,
                       C);
    if (cp_)
      cp_->attention_backward(dqkv_.data(), dattn_.data(), qkv, kv, att, B, Hl_, Kl_, D);
    else
      k::attention_backward(dqkv_.data(), dattn_.data(), qkv, att, B, Tn, Hl_, Kl_, D);
    if (c.rope) k::rope(dqkv_.data(), B, Tn, Hl_, Kl_, D, true, positions(), rotary_);
    std::fill(dln_.begin(), dln_.begin() + size_t(N) * C, 0.0f);
    k::linear_backward(dln_.data(), g(w.qkv_w), g(w.qkv_b), dqkv_.data(), ln1, p(w.qkv_w), N, C, QKV);
    norm_backward(dres, w.ln1_w, w.ln1_b, reduce(dln_.data(), N), x, w.ln1_w,
                  ln ? a.ln1_mean.data() + n1 : nullptr, a.ln1_rstd.data() + n1, n);  // dres: d loss / d x
  }
  if (lo == 0) {
    // Every token's gradient (gathered under SP): each rank adds its vocabulary rows', and all the
    // positions'.
    const float* d = whole(dres, N);
    const int v0 = spec_.tp_rank * Vl_;
    if (lookup_apart_) add_lookup_gradient(a, d);
    // Columns apart on the threads (two tokens may share a row), each adding the tokens in order.
    parallel_for(C, 64, [&](long j0, long j1) {
      for (int i = 0; i < N; ++i) {
        const float* dy = d + size_t(i) * C;
        const int row = a.tokens[size_t(i)] - v0;
        if (!lookup_apart_ && row >= 0 && row < Vl_) {
          float* de = g(wte_) + size_t(row) * C;
          for (long j = j0; j < j1; ++j) de[j] += dy[j];
        }
        if (wpe_ != kNone) {
          float* dp = g(wpe_) + size_t(position(i % Tn)) * C;
          for (long j = j0; j < j1; ++j) dp[j] += dy[j];
        }
      }
    });
  }
}

}  // namespace paratwin::exec
