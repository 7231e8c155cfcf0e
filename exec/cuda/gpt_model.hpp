// The GPT on one GPU: the same layers, shapes and flat parameter layout as the CPU Gpt<float>
// (exec/gpt/), so a checkpoint is the same file on both. Master weights and gradients are fp32 in
// that layout; the forward and backward read a bf16 copy of the weights and keep bf16 activations;
// GEMMs run through cuBLASLt with fp32 accumulation. Everything is queued on one compute stream.
#pragma once

#include <cstdint>

#include "exec/cuda/device_buffer.hpp"
#include "exec/cuda/gemm.hpp"
#include "exec/cuda/kernels.cuh"
#include "exec/gpt/config.hpp"

namespace paratwin::exec::cuda {

// Everything the forward of one micro-batch keeps for its backward (names as exec/gpt/model.hpp).
struct CudaActivations {
  int B = 0, Tn = 0;
  DeviceBuffer<int32_t> tokens, targets;                       // (N)
  DeviceBuffer<bf16> residual, mid, ln1, ln2;                  // (L+1,N,C), (L,N,C) x3
  DeviceBuffer<float> ln1_mean, ln1_rstd, ln2_mean, ln2_rstd;  // (L,N)
  DeviceBuffer<bf16> qkv, att, attn_out, fc, fc_act;    // (L,N,QKV), (L,B,H,T,T), (L,N,HD), (L,N,FW), (L,N,F)
  DeviceBuffer<bf16> lnf, logits;                       // (N,C), (N,Vp): Vp = V rounded up to 64
  DeviceBuffer<float> lnf_mean, lnf_rstd, losses, lse;  // (N)
  DeviceBuffer<float> dresidual;                        // (N,C) between backward segments, fp32
  DeviceBuffer<bf16> dresidual_bf16;                    // (N,C) its copy that the GEMMs read
  double loss = 0;
};

// Row stride of the logits: the vocabulary rounded up to 64 (aligned rows for cuBLASLt).
int padded_vocab(int vocab);

class CudaGpt {
 public:
  // Allocates parameters and gradients on the current device; work goes to `stream`.
  CudaGpt(const GptConfig& config, cudaStream_t stream);

  const GptConfig& config() const { return config_; }
  const ParameterLayout& layout() const { return layout_; }
  cudaStream_t stream() const { return stream_; }

  // The fp32 master weights from the host (CPU layout), and their bf16 copy. Synchronous.
  void load_parameters(const float* host);
  void store_parameters(float* host) const;  // synchronous
  void store_gradients(float* host) const;   // synchronous
  float* master() { return master_.data(); }
  bf16* params() { return params_.data(); }
  float* gradients() { return grads_.data(); }
  void zero_gradients();
  Gemm& gemm() { return gemm_; }  // for GEMM timing (profiles)

  // Throws std::invalid_argument when Tn exceeds the model's sequence length.
  void allocate(CudaActivations& acts, int B, int Tn);
  // Uploads the tokens and targets (N each), runs the forward, returns the mean loss (synchronizes
  // the stream to read it). Throws std::invalid_argument for a token outside the vocabulary.
  double forward(CudaActivations& acts, const int32_t* tokens, const int32_t* targets);
  // As Gpt::backward: layers [lo, hi) from the top, the head and loss first when hi = layers, the
  // embeddings last when lo = 0; gradients added (fp32). Queued, not waited for.
  void backward(CudaActivations& acts, int lo, int hi, float loss_scale);

 private:
  const bf16* p(size_t offset) const;
  float* g(size_t offset);
  // out (N,OC) = inp (N,C) . weight (C,OC) + bias, plus out's previous value when accumulate.
  void linear_forward(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, int N, int C, int OC,
                      bool accumulate);
  // dinp (N,C) = dout . weight^T (written); dweight += inp^T . dout; dbias += column sums of dout.
  void linear_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                       const bf16* weight, int N, int C, int OC);
  void attention_forward(bf16* out, bf16* att, const bf16* qkv, int B, int Tn);
  void attention_backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* att, int B, int Tn);
  void ensure_scratch(int B, int Tn);

  GptConfig config_;
  ParameterLayout layout_;
  cudaStream_t stream_;
  std::vector<LayerOffsets> layers_;
  size_t wte_, wpe_, lnf_w_, lnf_b_, head_;
  DeviceBuffer<float> master_, grads_;
  DeviceBuffer<bf16> params_;
  Gemm gemm_;
  // Scratch, sized for the largest micro-batch: heads (B,H,T,D) and scores (B,H,T,T), and the
  // backward's per-layer gradients.
  DeviceBuffer<bf16> q_, k_, v_, y_, dq_, dk_, dv_, dy_, scores_;
  DeviceBuffer<bf16> dln_, dqkv_, dattn_, dfc_, dact_;
};

}  // namespace paratwin::exec::cuda
