// The CUDA kernels of the GPT, declared by their launchers (each .cu file holds kernels and their
// launchers side by side). Activations and the parameter copy the math reads are bf16; everything
// is computed in fp32, and weight gradients, norm statistics, losses and optimizer state stay fp32.
// N = B x T tokens. Every launcher checks its launch and throws CudaError; all run on `stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace paratwin::exec::cuda {

using bf16 = __nv_bfloat16;

// ---- elementwise (elementwise.cu) -----------------------------------------------------------------
void convert_to_bf16(bf16* out, const float* in, int64_t n, cudaStream_t stream);
void convert_to_float(float* out, const bf16* in, int64_t n, cudaStream_t stream);
// out[i] += in[i] (bf16, computed in fp32)
void add_inplace(bf16* out, const bf16* in, int64_t n, cudaStream_t stream);
// data[i] *= factor
void scale_inplace(float* data, float factor, int64_t n, cudaStream_t stream);
// *result += sum of data[i]^2 over [0, n), in double (result is a device scalar)
void sum_of_squares(double* result, const float* data, int64_t n, cudaStream_t stream);
// out (N,OC) += bias (OC) on every row (when cuBLASLt's bias epilogue cannot take the bias)
void add_bias(bf16* out, const bf16* bias, int N, int OC, cudaStream_t stream);
// dbias (C) += column sums of dout (N,C) with rows ld apart
void bias_grad(float* dbias, const bf16* dout, int N, int C, int ld, cudaStream_t stream);

// ---- normalization (layernorm.cu) -----------------------------------------------------------------
// out (N,C) = (inp - mean) * rstd * weight + bias; mean, rstd (N) saved. RMSNorm when bias and mean are
// null. As exec/gpt/layernorm.cpp, epsilon 1e-5.
void norm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* weight, const bf16* bias,
                  int N, int C, cudaStream_t stream);
// dres (N,C) += d loss / d inp (fp32, the residual stream's gradient) and dres_bf16 = its bf16 copy;
// dweight, dbias (C) += theirs (dbias and mean null for RMSNorm).
void norm_backward(float* dres, bf16* dres_bf16, float* dweight, float* dbias, const bf16* dout,
                   const bf16* inp, const bf16* weight, const float* mean, const float* rstd, int N, int C,
                   cudaStream_t stream);

// ---- MLP activations (activations.cu) -------------------------------------------------------------
// GELU, tanh approximation: out (n) = gelu(inp); dinp = dout * gelu'(inp) (written)
void gelu_forward(bf16* out, const bf16* inp, int64_t n, cudaStream_t stream);
void gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t n, cudaStream_t stream);
// SwiGLU: inp (N,2F) = [gate | up]; out (N,F) = silu(gate) * up; dinp (N,2F) written
void swiglu_forward(bf16* out, const bf16* inp, int N, int F, cudaStream_t stream);
void swiglu_backward(bf16* dinp, const bf16* inp, const bf16* dout, int N, int F, cudaStream_t stream);

// ---- embedding (embedding.cu) ---------------------------------------------------------------------
// out (B,T,C) = wte[tokens] + wpe[t] (wpe null with rotary positions)
void embedding_forward(bf16* out, const int32_t* tokens, const bf16* wte, const bf16* wpe, int B, int Tn,
                       int C, cudaStream_t stream);
// dwte (V,C) += rows of dout (B,T,C) (atomic adds); dwpe (maxT,C) += sums over the batch (null: none)
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B, int Tn,
                        int C, cudaStream_t stream);

// ---- attention (attention.cu) ---------------------------------------------------------------------
// qkv (B,T,(H+2K)D) -> q, k, v (B,H,T,D); key/value head h / (H/K) is copied to each query head h.
void split_heads(bf16* q, bf16* k, bf16* v, const bf16* qkv, int B, int Tn, int H, int K, int D,
                 cudaStream_t stream);
// dq, dk, dv (B,H,T,D) -> dqkv (B,T,(H+2K)D) (written); each key/value head sums its query heads.
void merge_head_grads(bf16* dqkv, const bf16* dq, const bf16* dk, const bf16* dv, int B, int Tn, int H, int K,
                      int D, cudaStream_t stream);
// y (B,H,T,D) -> out (B,T,H*D), and back (for the gradient)
void merge_heads(bf16* out, const bf16* y, int B, int Tn, int H, int D, cudaStream_t stream);
void split_head_grad(bf16* dy, const bf16* dout, int B, int Tn, int H, int D, cudaStream_t stream);
// att (rows,T) = causal softmax of the scores (rows,T), row r being query position r % T; zeros above
// the diagonal. Scores already carry the 1/sqrt(D).
void causal_softmax_forward(bf16* att, const bf16* scores, int64_t rows, int Tn, cudaStream_t stream);
// dscores = att * (datt - sum_j att datt) * scale, zeros above the diagonal (may alias datt)
void causal_softmax_backward(bf16* dscores, const bf16* datt, const bf16* att, int64_t rows, int Tn,
                             float scale, cudaStream_t stream);
// Rotary positions on the query and key heads of qkv (B,T,(H+2K)D), in place; inverse for the backward.
void rope(bf16* qkv, int B, int Tn, int H, int K, int D, bool inverse, cudaStream_t stream);

// ---- loss (cross_entropy.cu) ----------------------------------------------------------------------
// logits (N,V) with rows ld apart; losses (N) = logsumexp - logit[target]; lse (N) kept for the backward.
void cross_entropy_forward(float* losses, float* lse, const bf16* logits, const int32_t* targets, int N,
                           int V, int ld, cudaStream_t stream);
// logits (N,V) become dlogits = (softmax - onehot(target)) * scale, in place.
void cross_entropy_backward(bf16* logits, const float* lse, const int32_t* targets, int N, int V, int ld,
                            float scale, cudaStream_t stream);

// ---- optimizer (adamw.cu) -------------------------------------------------------------------------
// AdamW on [begin, end), as exec/optim/adamw.cpp, on grads * grad_scale; updates the fp32 master
// weights and writes their bf16 copy. decay (P) holds 1 where a weight decays.
struct AdamWStep {
  float lr = 0, beta1 = 0.9f, beta2 = 0.95f, epsilon = 1e-8f, weight_decay = 0.1f;
  float bias_correction1 = 1, bias_correction2 = 1;  // 1 - beta^step, computed on the host as on CPU
  float grad_scale = 1;
};
void adamw_update(float* master, bf16* params, float* m, float* v, const float* grads, const uint8_t* decay,
                  int64_t begin, int64_t end, const AdamWStep& s, cudaStream_t stream);

// ---- top-k with error feedback (topk.cu) -----------------------------------------------------------
// acc = grads + error; keeps the k entries of largest |acc| (values and indices, in no particular
// order) and leaves error = acc elsewhere and 0 where kept. Scratch is owned by TopK.
class TopK {
 public:
  explicit TopK(int64_t capacity);
  ~TopK();
  TopK(const TopK&) = delete;
  TopK& operator=(const TopK&) = delete;
  // values, indices (k) on the device. Synchronizes `stream` four times (one per radix pass).
  void select(float* values, int32_t* indices, float* error, const float* grads, int64_t n, int64_t k,
              cudaStream_t stream);

 private:
  int64_t capacity_;
  float* acc_ = nullptr;
  unsigned long long* histogram_ = nullptr;  // 256 bins
  unsigned long long* counters_ = nullptr;   // [0]: above-threshold slots used, [1]: tie slots used
};

}  // namespace paratwin::exec::cuda
