// The GPT's forward and backward on the GPU: the kernels of exec/cuda/ and cuBLASLt GEMMs chained
// as exec/gpt/model.cpp chains the CPU kernels, layer for layer.
#include "exec/cuda/gpt_model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace paratwin::exec::cuda {

namespace {

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

int padded_vocab(int vocab) {
  return (vocab + 63) / 64 * 64;
}

CudaGpt::CudaGpt(const GptConfig& config, cudaStream_t stream)
    : config_(config), layout_(parameter_layout(config)), stream_(stream) {
  TensorOffsets o = tensor_offsets(layout_, config_.layers);
  layers_ = std::move(o.layers);
  wte_ = o.wte;
  wpe_ = o.wpe;
  lnf_w_ = o.lnf_w;
  lnf_b_ = o.lnf_b;
  head_ = o.head;
  master_.resize(layout_.total);
  grads_.resize(layout_.total);
  params_.resize(layout_.total);
  master_.zero(stream_);
  grads_.zero(stream_);
  params_.zero(stream_);
}

const bf16* CudaGpt::p(size_t offset) const {
  return offset == kNoTensor ? nullptr : params_.data() + offset;
}
float* CudaGpt::g(size_t offset) {
  return offset == kNoTensor ? nullptr : grads_.data() + offset;
}

void CudaGpt::load_parameters(const float* host) {
  master_.upload(host, layout_.total, stream_);
  convert_to_bf16(params_.data(), master_.data(), int64_t(layout_.total), stream_);
  PARATWIN_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaGpt::store_parameters(float* host) const {
  master_.download(host, layout_.total, stream_);
}
void CudaGpt::store_gradients(float* host) const {
  grads_.download(host, layout_.total, stream_);
}
void CudaGpt::zero_gradients() {
  grads_.zero(stream_);
}

void CudaGpt::allocate(CudaActivations& a, int B, int Tn) {
  if (Tn > config_.max_seq_len)
    throw std::invalid_argument("sequence length " + std::to_string(Tn) + " exceeds the model's " +
                                std::to_string(config_.max_seq_len));
  const GptConfig& c = config_;
  const size_t N = size_t(B) * Tn, L = c.layers, C = c.hidden;
  a.B = B;
  a.Tn = Tn;
  a.tokens.resize(N);
  a.targets.resize(N);
  a.residual.resize((L + 1) * N * C);
  a.mid.resize(L * N * C);
  a.ln1.resize(L * N * C);
  a.ln2.resize(L * N * C);
  a.ln1_mean.resize(L * N);
  a.ln1_rstd.resize(L * N);
  a.ln2_mean.resize(L * N);
  a.ln2_rstd.resize(L * N);
  a.qkv.resize(L * N * c.qkv_width());
  a.att.resize(L * B * c.heads * size_t(Tn) * Tn);
  a.attn_out.resize(L * N * c.attn_width());
  a.fc.resize(L * N * c.fc_width());
  a.fc_act.resize(L * N * c.ffn);
  a.lnf.resize(N * C);
  a.logits.resize(N * padded_vocab(c.vocab));
  a.lnf_mean.resize(N);
  a.lnf_rstd.resize(N);
  a.losses.resize(N);
  a.lse.resize(N);
  a.dresidual.resize(N * C);
  a.dresidual_bf16.resize(N * C);
  ensure_scratch(B, Tn);
}

void CudaGpt::ensure_scratch(int B, int Tn) {
  const GptConfig& c = config_;
  const size_t N = size_t(B) * Tn, heads = N * c.heads * c.head_dim, scores = size_t(B) * c.heads * Tn * Tn;
  auto fit = [](DeviceBuffer<bf16>& b, size_t n) {
    if (b.size() < n) b.resize(n);
  };
  for (auto* b : {&q_, &k_, &v_, &y_, &dq_, &dk_, &dv_, &dy_}) fit(*b, heads);
  fit(scores_, scores);
  fit(dln_, N * c.hidden);
  fit(dqkv_, N * c.qkv_width());
  fit(dattn_, N * c.attn_width());
  fit(dfc_, N * c.fc_width());
  fit(dact_, N * c.ffn);
}

void CudaGpt::linear_forward(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, int N, int C,
                             int OC, bool accumulate) {
  // cuBLASLt's bias epilogue wants a 16-byte aligned bias; the add_bias kernel takes any other.
  const bool epilogue = bias && aligned16(bias);
  gemm_.run(linear_forward_gemm(N, C, OC), inp, weight, out, ResultType::Bf16, 1.0f, accumulate ? 1.0f : 0.0f,
            epilogue ? bias : nullptr, stream_);
  if (bias && !epilogue) add_bias(out, bias, N, OC, stream_);
}

void CudaGpt::linear_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                              const bf16* weight, int N, int C, int OC) {
  // dout (N,OC); inp, dinp (N,C); weight, dweight (C,OC); dbias (OC)
  gemm_.run(linear_input_grad_gemm(N, C, OC), dout, weight, dinp, ResultType::Bf16, 1.0f, 0.0f, nullptr,
            stream_);
  gemm_.run(linear_weight_grad_gemm(N, C, OC), inp, dout, dweight, ResultType::Float, 1.0f, 1.0f, nullptr,
            stream_);
  if (dbias) bias_grad(dbias, dout, N, OC, OC, stream_);
}

void CudaGpt::attention_forward(bf16* out, bf16* att, const bf16* qkv, int B, int Tn) {
  const int H = config_.heads, K = config_.kv_heads, D = config_.head_dim, BH = B * H;
  split_heads(q_.data(), k_.data(), v_.data(), qkv, B, Tn, H, K, D, stream_);
  // scores (B*H: T,T) = q . k^T / sqrt(D)
  RowMajorGemm s;
  s.M = Tn, s.N = Tn, s.K = D, s.trans_b = true;
  s.lda = D, s.ldb = D, s.ldd = Tn;
  s.batch = BH, s.stride_a = int64_t(Tn) * D, s.stride_b = int64_t(Tn) * D, s.stride_d = int64_t(Tn) * Tn;
  gemm_.run(s, q_.data(), k_.data(), scores_.data(), ResultType::Bf16, 1.0f / std::sqrt(float(D)), 0.0f,
            nullptr, stream_, GemmClass::Attention);
  causal_softmax_forward(att, scores_.data(), int64_t(BH) * Tn, Tn, stream_);
  // y (B*H: T,D) = att . v
  RowMajorGemm y;
  y.M = Tn, y.N = D, y.K = Tn;
  y.lda = Tn, y.ldb = D, y.ldd = D;
  y.batch = BH, y.stride_a = int64_t(Tn) * Tn, y.stride_b = int64_t(Tn) * D, y.stride_d = int64_t(Tn) * D;
  gemm_.run(y, att, v_.data(), y_.data(), ResultType::Bf16, 1.0f, 0.0f, nullptr, stream_,
            GemmClass::Attention);
  merge_heads(out, y_.data(), B, Tn, H, D, stream_);
}

void CudaGpt::attention_backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* att, int B,
                                 int Tn) {
  const int H = config_.heads, K = config_.kv_heads, D = config_.head_dim, BH = B * H;
  const int64_t TD = int64_t(Tn) * D, TT = int64_t(Tn) * Tn;
  split_heads(q_.data(), k_.data(), v_.data(), qkv, B, Tn, H, K, D, stream_);
  split_head_grad(dy_.data(), dout, B, Tn, H, D, stream_);
  bf16* datt = scores_.data();
  // datt (T,T) = dy (T,D) . v^T
  RowMajorGemm g1;
  g1.M = Tn, g1.N = Tn, g1.K = D, g1.trans_b = true, g1.lda = D, g1.ldb = D, g1.ldd = Tn;
  g1.batch = BH, g1.stride_a = TD, g1.stride_b = TD, g1.stride_d = TT;
  gemm_.run(g1, dy_.data(), v_.data(), datt, ResultType::Bf16, 1.0f, 0.0f, nullptr, stream_,
            GemmClass::Attention);
  // dv (T,D) = att^T (T,T) . dy (T,D)
  RowMajorGemm g2;
  g2.M = Tn, g2.N = D, g2.K = Tn, g2.trans_a = true, g2.lda = Tn, g2.ldb = D, g2.ldd = D;
  g2.batch = BH, g2.stride_a = TT, g2.stride_b = TD, g2.stride_d = TD;
  gemm_.run(g2, att, dy_.data(), dv_.data(), ResultType::Bf16, 1.0f, 0.0f, nullptr, stream_,
            GemmClass::Attention);
  // d scores, with the forward's 1/sqrt(D), in place over datt
  causal_softmax_backward(datt, datt, att, int64_t(BH) * Tn, Tn, 1.0f / std::sqrt(float(D)), stream_);
  // dq (T,D) = dscores (T,T) . k (T,D); dk (T,D) = dscores^T . q
  RowMajorGemm g3;
  g3.M = Tn, g3.N = D, g3.K = Tn, g3.lda = Tn, g3.ldb = D, g3.ldd = D;
  g3.batch = BH, g3.stride_a = TT, g3.stride_b = TD, g3.stride_d = TD;
  gemm_.run(g3, datt, k_.data(), dq_.data(), ResultType::Bf16, 1.0f, 0.0f, nullptr, stream_,
            GemmClass::Attention);
  g3.trans_a = true;
  gemm_.run(g3, datt, q_.data(), dk_.data(), ResultType::Bf16, 1.0f, 0.0f, nullptr, stream_,
            GemmClass::Attention);
  merge_head_grads(dqkv, dq_.data(), dk_.data(), dv_.data(), B, Tn, H, K, D, stream_);
}

double CudaGpt::forward(CudaActivations& a, const int32_t* tokens, const int32_t* targets) {
  const GptConfig& c = config_;
  const int B = a.B, Tn = a.Tn, N = B * Tn, C = c.hidden, H = c.heads, K = c.kv_heads, D = c.head_dim;
  const int QKV = c.qkv_width(), HD = c.attn_width(), F = c.ffn, FW = c.fc_width(), V = c.vocab;
  const int Vp = padded_vocab(V);
  for (int i = 0; i < N; ++i)
    if (tokens[i] < 0 || tokens[i] >= V || targets[i] < 0 || targets[i] >= V)
      throw std::invalid_argument("token " + std::to_string(std::max(tokens[i], targets[i])) +
                                  " is outside the vocabulary of " + std::to_string(V));
  a.tokens.upload(tokens, N, stream_);
  a.targets.upload(targets, N, stream_);
  const bool ln = !c.rmsnorm;
  const size_t NC = size_t(N) * C;
  embedding_forward(a.residual.data(), a.tokens.data(), p(wte_), c.learned_positions() ? p(wpe_) : nullptr, B,
                    Tn, C, stream_);
  for (int l = 0; l < c.layers; ++l) {
    const LayerOffsets& w = layers_[l];
    const size_t n1 = size_t(l) * N;
    bf16* x = a.residual.data() + l * NC;  // (N,C) the layer's input
    bf16* ln1 = a.ln1.data() + l * NC;
    bf16* qkv = a.qkv.data() + size_t(l) * N * QKV;
    bf16* att = a.att.data() + size_t(l) * B * H * Tn * Tn;
    bf16* attn_out = a.attn_out.data() + size_t(l) * N * HD;
    bf16* mid = a.mid.data() + l * NC;
    bf16* ln2 = a.ln2.data() + l * NC;
    bf16* fc = a.fc.data() + size_t(l) * N * FW;
    bf16* act = a.fc_act.data() + size_t(l) * N * F;
    bf16* out = x + NC;  // (N,C) the next layer's input

    norm_forward(ln1, ln ? a.ln1_mean.data() + n1 : nullptr, a.ln1_rstd.data() + n1, x, p(w.ln1_w),
                 p(w.ln1_b), N, C, stream_);
    linear_forward(qkv, ln1, p(w.qkv_w), p(w.qkv_b), N, C, QKV, false);
    if (c.rope) rope(qkv, B, Tn, H, K, D, false, stream_);
    attention_forward(attn_out, att, qkv, B, Tn);
    // mid = x + attn_out . proj: the residual is copied in and the GEMM adds onto it (beta = 1)
    PARATWIN_CUDA_CHECK(cudaMemcpyAsync(mid, x, NC * sizeof(bf16), cudaMemcpyDeviceToDevice, stream_));
    linear_forward(mid, attn_out, p(w.attn_proj_w), p(w.attn_proj_b), N, HD, C, true);
    norm_forward(ln2, ln ? a.ln2_mean.data() + n1 : nullptr, a.ln2_rstd.data() + n1, mid, p(w.ln2_w),
                 p(w.ln2_b), N, C, stream_);
    linear_forward(fc, ln2, p(w.fc_w), p(w.fc_b), N, C, FW, false);
    if (c.swiglu)
      swiglu_forward(act, fc, N, F, stream_);
    else
      gelu_forward(act, fc, int64_t(N) * F, stream_);
    PARATWIN_CUDA_CHECK(cudaMemcpyAsync(out, mid, NC * sizeof(bf16), cudaMemcpyDeviceToDevice, stream_));
    linear_forward(out, act, p(w.fc_proj_w), p(w.fc_proj_b), N, F, C, true);
  }
  const bf16* top = a.residual.data() + size_t(c.layers) * NC;
  norm_forward(a.lnf.data(), ln ? a.lnf_mean.data() : nullptr, a.lnf_rstd.data(), top, p(lnf_w_), p(lnf_b_),
               N, C, stream_);
  // logits (N,V), rows Vp apart = lnf (N,C) . head^T, head is (V,C)
  RowMajorGemm h;
  h.M = N, h.N = V, h.K = C, h.trans_b = true, h.lda = C, h.ldb = C, h.ldd = Vp;
  gemm_.run(h, a.lnf.data(), p(c.tied ? wte_ : head_), a.logits.data(), ResultType::Bf16, 1.0f, 0.0f, nullptr,
            stream_);
  cross_entropy_forward(a.losses.data(), a.lse.data(), a.logits.data(), a.targets.data(), N, V, Vp, stream_);
  std::vector<float> losses(N);
  a.losses.download(losses.data(), N, stream_);
  double total = 0;
  for (float x : losses) total += x;
  a.loss = total / N;
  return a.loss;
}

void CudaGpt::backward(CudaActivations& a, int lo, int hi, float loss_scale) {
  const GptConfig& c = config_;
  if (lo < 0 || hi > c.layers || lo >= hi)
    throw std::invalid_argument("backward of an empty or invalid layer range");
  const int B = a.B, Tn = a.Tn, N = B * Tn, C = c.hidden, H = c.heads, K = c.kv_heads, D = c.head_dim;
  const int QKV = c.qkv_width(), HD = c.attn_width(), F = c.ffn, FW = c.fc_width(), V = c.vocab;
  const int Vp = padded_vocab(V);
  const bool ln = !c.rmsnorm;
  const size_t NC = size_t(N) * C;
  float* dres = a.dresidual.data();        // (N,C) d loss / d residual stream at the current layer boundary
  bf16* dres16 = a.dresidual_bf16.data();  // its bf16 copy, for the GEMMs
  if (hi == c.layers) {
    // dlogits (N,V) in place of the logits: the mean over N tokens, scaled for accumulation
    cross_entropy_backward(a.logits.data(), a.lse.data(), a.targets.data(), N, V, Vp, loss_scale / float(N),
                           stream_);
    const bf16* head = p(c.tied ? wte_ : head_);
    float* dhead = g(c.tied ? wte_ : head_);
    // dlnf (N,C) = dlogits (N,V) . head (V,C)
    RowMajorGemm d1;
    d1.M = N, d1.N = C, d1.K = V, d1.lda = Vp, d1.ldb = C, d1.ldd = C;
    gemm_.run(d1, a.logits.data(), head, dln_.data(), ResultType::Bf16, 1.0f, 0.0f, nullptr, stream_);
    // dhead (V,C) += dlogits^T (V,N) . lnf (N,C)
    RowMajorGemm d2;
    d2.M = V, d2.N = C, d2.K = N, d2.trans_a = true, d2.lda = Vp, d2.ldb = C, d2.ldd = C;
    gemm_.run(d2, a.logits.data(), a.lnf.data(), dhead, ResultType::Float, 1.0f, 1.0f, nullptr, stream_);
    a.dresidual.zero(stream_);
    norm_backward(dres, dres16, g(lnf_w_), g(lnf_b_), dln_.data(), a.residual.data() + size_t(c.layers) * NC,
                  p(lnf_w_), ln ? a.lnf_mean.data() : nullptr, a.lnf_rstd.data(), N, C, stream_);
  }
  for (int l = hi - 1; l >= lo; --l) {
    const LayerOffsets& w = layers_[l];
    const size_t n1 = size_t(l) * N;
    const bf16* x = a.residual.data() + l * NC;
    const bf16* ln1 = a.ln1.data() + l * NC;
    const bf16* qkv = a.qkv.data() + size_t(l) * N * QKV;
    const bf16* att = a.att.data() + size_t(l) * B * H * Tn * Tn;
    const bf16* attn_out = a.attn_out.data() + size_t(l) * N * HD;
    const bf16* mid = a.mid.data() + l * NC;
    const bf16* ln2 = a.ln2.data() + l * NC;
    const bf16* fc = a.fc.data() + size_t(l) * N * FW;
    const bf16* act = a.fc_act.data() + size_t(l) * N * F;

    // MLP: dres is the gradient of the layer's output and, through the residual, of mid.
    linear_backward(dact_.data(), g(w.fc_proj_w), g(w.fc_proj_b), dres16, act, p(w.fc_proj_w), N, F, C);
    if (c.swiglu)
      swiglu_backward(dfc_.data(), fc, dact_.data(), N, F, stream_);
    else
      gelu_backward(dfc_.data(), fc, dact_.data(), int64_t(N) * F, stream_);
    linear_backward(dln_.data(), g(w.fc_w), g(w.fc_b), dfc_.data(), ln2, p(w.fc_w), N, C, FW);
    norm_backward(dres, dres16, g(w.ln2_w), g(w.ln2_b), dln_.data(), mid, p(w.ln2_w),
                  ln ? a.ln2_mean.data() + n1 : nullptr, a.ln2_rstd.data() + n1, N, C,
                  stream_);  // d loss / d mid
    // Attention: the same pattern around the attention core.
    linear_backward(dattn_.data(), g(w.attn_proj_w), g(w.attn_proj_b), dres16, attn_out, p(w.attn_proj_w), N,
                    HD, C);
    attention_backward(dqkv_.data(), dattn_.data(), qkv, att, B, Tn);
    if (c.rope) rope(dqkv_.data(), B, Tn, H, K, D, true, stream_);
    linear_backward(dln_.data(), g(w.qkv_w), g(w.qkv_b), dqkv_.data(), ln1, p(w.qkv_w), N, C, QKV);
    norm_backward(dres, dres16, g(w.ln1_w), g(w.ln1_b), dln_.data(), x, p(w.ln1_w),
                  ln ? a.ln1_mean.data() + n1 : nullptr, a.ln1_rstd.data() + n1, N, C,
                  stream_);  // d loss / d x
  }
  if (lo == 0)
    embedding_backward(g(wte_), c.learned_positions() ? g(wpe_) : nullptr, dres, a.tokens.data(), B, Tn, C,
                       stream_);
}

}  // namespace paratwin::exec::cuda
