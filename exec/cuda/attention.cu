// Causal grouped-query attention around cuBLASLt's batched GEMMs (gpt_model.cu calls them): heads are
// split out of qkv into (B,H,T,D), the scores' causal softmax is a warp per row, and the gradients
// are merged back, each key/value head summing over the query heads that read it. Rotary positions.
#include "exec/cuda/check.hpp"
#include "exec/cuda/device_math.cuh"
#include "exec/cuda/kernels.cuh"

namespace paratwin::exec::cuda {

namespace {

// Element i of a (B,H,T,D) tensor: i = ((b*H + h)*T + t)*D + d.
struct HeadIndex {
  long long b;
  int h, t, d;
};
__device__ __forceinline__ HeadIndex head_index(long long i, int H, int Tn, int D) {
  return {i / ((long long)D * Tn * H), int(i / ((long long)D * Tn) % H), int(i / D % Tn), int(i % D)};
}

// One thread per element of q (B,H,T,D): index = ((b*H + h)*T + t)*D + d.
__global__ void split_heads_kernel(bf16* q, bf16* k, bf16* v, const bf16* qkv, int B, int Tn, int H, int K,
                                   int D) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)B * H * Tn * D) return;
  const HeadIndex x = head_index(i, H, Tn, D);
  const long long b = x.b;
  const int h = x.h, t = x.t, d = x.d;
  const int g = h / (H / K), width = (H + 2 * K) * D;
  const bf16* row = qkv + (b * Tn + t) * width;
  q[i] = row[h * D + d];
  k[i] = row[(H + g) * D + d];
  v[i] = row[(H + K + g) * D + d];
}

// One thread per element of dqkv (B,T,(H+2K)D), written (not added).
__global__ void merge_head_grads_kernel(bf16* dqkv, const bf16* dq, const bf16* dk, const bf16* dv, int B,
                                        int Tn, int H, int K, int D) {
  const int width = (H + 2 * K) * D;
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)B * Tn * width) return;
  const int col = int(i % width);
  const int t = int(i / width % Tn);
  const long long b = i / ((long long)width * Tn);
  const int head = col / D, d = col % D, group = H / K;
  // element (b, h, t, d) of a (B,H,T,D) tensor
  auto at = [&](int h) { return ((b * H + h) * Tn + t) * D + d; };
  float sum = 0;
  if (head < H) {
    sum = load(dq, at(head));
  } else {
    const bf16* src = head < H + K ? dk : dv;
    const int g = head < H + K ? head - H : head - H - K;
    for (int j = 0; j < group; ++j) sum += load(src, at(g * group + j));
  }
  dqkv[i] = __float2bfloat16(sum);
}

// out (B,T,H*D) <- y (B,H,T,D); one thread per element of out.
__global__ void merge_heads_kernel(bf16* out, const bf16* y, int B, int Tn, int H, int D) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)B * Tn * H * D) return;
  const int d = int(i % D);
  const int h = int(i / D % H);
  const int t = int(i / ((long long)D * H) % Tn);
  const long long b = i / ((long long)D * H * Tn);
  out[i] = y[((b * H + h) * Tn + t) * D + d];
}

// dy (B,H,T,D) <- dout (B,T,H*D); one thread per element of dy.
__global__ void split_head_grad_kernel(bf16* dy, const bf16* dout, int B, int Tn, int H, int D) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)B * H * Tn * D) return;
  const HeadIndex x = head_index(i, H, Tn, D);
  const long long b = x.b;
  const int h = x.h, t = x.t, d = x.d;
  dy[i] = dout[((b * Tn + t) * H + h) * D + d];
}

// A warp per row of scores (rows, T); row r is query position r % T, so keys 0..r%T are visible.
__global__ void causal_softmax_forward_kernel(bf16* att, const bf16* scores, long long rows, int Tn) {
  const long long row = (long long)blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= rows) return;
  const int last = int(row % Tn);  // the last visible key
  const bf16* s = scores + row * Tn;
  bf16* p = att + row * Tn;
  float max = -FLT_MAX;
  for (int j = lane; j <= last; j += kWarp) max = fmaxf(max, load(s, j));
  max = warp_max(max);
  float sum = 0;
  for (int j = lane; j <= last; j += kWarp) sum += expf(load(s, j) - max);
  const float inverse = 1.0f / warp_sum(sum);
  for (int j = lane; j < Tn; j += kWarp)
    p[j] = __float2bfloat16(j <= last ? expf(load(s, j) - max) * inverse : 0.0f);
}

// ds = p * (dp - sum_j p dp) * scale on the visible keys, 0 above the diagonal. dscores may alias datt:
// each lane reads its own elements before writing them, and the dot product is complete before.
__global__ void causal_softmax_backward_kernel(bf16* dscores, const bf16* datt, const bf16* att,
                                               long long rows, int Tn, float scale) {
  const long long row = (long long)blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= rows) return;
  const int last = int(row % Tn);
  const long long base = row * Tn;
  float dot = 0;
  for (int j = lane; j <= last; j += kWarp) dot += load(att, base + j) * load(datt, base + j);
  dot = warp_sum(dot);
  for (int j = lane; j < Tn; j += kWarp) {
    const float g = j <= last ? load(att, base + j) * (load(datt, base + j) - dot) * scale : 0.0f;
    dscores[base + j] = __float2bfloat16(g);
  }
}

// One thread per (b, t, head among the H + K rotated ones, pair i); as exec/gpt/rope.cpp.
__global__ void rope_kernel(bf16* qkv, int B, int Tn, int H, int K, int D, bool inverse) {
  const int pairs = D / 2;
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)B * Tn * (H + K) * pairs) return;
  const int pair = int(i % pairs);
  const int head = int(i / pairs % (H + K));
  const long long bt = i / ((long long)pairs * (H + K));  // b * T + t
  const int t = int(bt % Tn);
  const float angle = float(t) * powf(10000.0f, -2.0f * float(pair) / float(D));
  float sn, cs;
  sincosf(angle, &sn, &cs);
  if (inverse) sn = -sn;
  bf16* x = qkv + bt * (long long)(H + 2 * K) * D + head * D + 2 * pair;
  const float x0 = __bfloat162float(x[0]), x1 = __bfloat162float(x[1]);
  x[0] = __float2bfloat16(x0 * cs - x1 * sn);
  x[1] = __float2bfloat16(x0 * sn + x1 * cs);
}

}  // namespace

void split_heads(bf16* q, bf16* k, bf16* v, const bf16* qkv, int B, int Tn, int H, int K, int D,
                 cudaStream_t stream) {
  const LaunchShape s = elementwise_launch(int64_t(B) * H * Tn * D);
  if (s.empty()) return;
  split_heads_kernel<<<grid_of(s), block_of(s), 0, stream>>>(q, k, v, qkv, B, Tn, H, K, D);
  PARATWIN_CUDA_CHECK_LAUNCH("split_heads_kernel");
}

void merge_head_grads(bf16* dqkv, const bf16* dq, const bf16* dk, const bf16* dv, int B, int Tn, int H, int K,
                      int D, cudaStream_t stream) {
  const LaunchShape s = elementwise_launch(int64_t(B) * Tn * (H + 2 * K) * D);
  if (s.empty()) return;
  merge_head_grads_kernel<<<grid_of(s), block_of(s), 0, stream>>>(dqkv, dq, dk, dv, B, Tn, H, K, D);
  PARATWIN_CUDA_CHECK_LAUNCH("merge_head_grads_kernel");
}

void merge_heads(bf16* out, const bf16* y, int B, int Tn, int H, int D, cudaStream_t stream) {
  const LaunchShape s = elementwise_launch(int64_t(B) * Tn * H * D);
  if (s.empty()) return;
  merge_heads_kernel<<<grid_of(s), block_of(s), 0, stream>>>(out, y, B, Tn, H, D);
  PARATWIN_CUDA_CHECK_LAUNCH("merge_heads_kernel");
}

void split_head_grad(bf16* dy, const bf16* dout, int B, int Tn, int H, int D, cudaStream_t stream) {
  const LaunchShape s = elementwise_launch(int64_t(B) * H * Tn * D);
  if (s.empty()) return;
  split_head_grad_kernel<<<grid_of(s), block_of(s), 0, stream>>>(dy, dout, B, Tn, H, D);
  PARATWIN_CUDA_CHECK_LAUNCH("split_head_grad_kernel");
}

void causal_softmax_forward(bf16* att, const bf16* scores, int64_t rows, int Tn, cudaStream_t stream) {
  const LaunchShape s = row_warp_launch(rows);
  if (s.empty()) return;
  causal_softmax_forward_kernel<<<grid_of(s), block_of(s), 0, stream>>>(att, scores, rows, Tn);
  PARATWIN_CUDA_CHECK_LAUNCH("causal_softmax_forward_kernel");
}

void causal_softmax_backward(bf16* dscores, const bf16* datt, const bf16* att, int64_t rows, int Tn,
                             float scale, cudaStream_t stream) {
  const LaunchShape s = row_warp_launch(rows);
  if (s.empty()) return;
  causal_softmax_backward_kernel<<<grid_of(s), block_of(s), 0, stream>>>(dscores, datt, att, rows, Tn, scale);
  PARATWIN_CUDA_CHECK_LAUNCH("causal_softmax_backward_kernel");
}

void rope(bf16* qkv, int B, int Tn, int H, int K, int D, bool inverse, cudaStream_t stream) {
  const LaunchShape s = elementwise_launch(int64_t(B) * Tn * (H + K) * (D / 2));
  if (s.empty()) return;
  rope_kernel<<<grid_of(s), block_of(s), 0, stream>>>(qkv, B, Tn, H, K, D, inverse);
  PARATWIN_CUDA_CHECK_LAUNCH("rope_kernel");
}

}  // namespace paratwin::exec::cuda
