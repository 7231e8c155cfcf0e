// A plan as a Megatron-LM (core) launch: environment, torchrun and pretrain_gpt.py's arguments, checked
// against Megatron-LM's parser, validate_args and config classes by bench/emit_check.sh.
#include <algorithm>
#include <cmath>
#include <set>

#include "plan/cost/memory.hpp"
#include "plan/report/emit.hpp"
#include "plan/spec/suggest.hpp"

namespace paratwin {
namespace {

using emit_detail::chunk_layers;

std::string n(long long v) {
  return std::to_string(v);
}

std::string decimal(double v) {
  std::string s = std::to_string(v);
  s.erase(s.find_last_not_of('0') + 1);
  if (s.back() == '.') s.pop_back();
  return s;
}

// pretrain_gpt.py's arguments in order, one per line.
class Arguments {
 public:
  void add(const std::string& name, const std::string& value = "") {
    lines_.push_back("--" + name + (value.empty() ? "" : " " + value));
  }
  std::string text() const {
    std::string out;
    for (size_t i = 0; i < lines_.size(); ++i)
      out += "  " + lines_[i] + (i + 1 < lines_.size() ? " \\\n" : "\n");
    return out;
  }

 private:
  std::vector<std::string> lines_;
};

// Megatron's --moe-layer-freq for ParaTwin's rule "layer l is MoE when l % every == every - 1": an
// explicit pattern, since Megatron's integer form puts the experts on layer 0 of each group.
std::string moe_layer_pattern(const ModelSpec& m) {
  const int every = m.moe->every;
  std::string pattern = "([0]*" + n(every - 1) + "+[1])*" + n(m.layers / every);
  if (m.layers % every) pattern += "+[0]*" + n(m.layers % every);
  return "\"" + pattern + "\"";
}

void model_shape(Arguments& a, const ModelSpec& m, const TrainingSpec& t) {
  a.add("num-layers", n(m.layers));
  a.add("hidden-size", n(m.hidden));
  a.add("ffn-hidden-size", n(m.ffn_hidden));
  a.add("num-attention-heads", n(m.heads));
  if (m.head_dim * m.heads != m.hidden) a.add("kv-channels", n(m.head_dim));
  if (m.kv_heads < m.heads) {
    a.add("group-query-attention");
    a.add("num-query-groups", n(m.kv_heads));
  }
  a.add("max-position-embeddings", n(std::max(m.seq_len, t.seq_len)));
  a.add("seq-length", n(t.seq_len));
  if (m.position == PositionKind::Rope) a.add("position-embedding-type", "rope");
  if (m.norm == NormKind::RmsNorm) a.add("normalization", "RMSNorm");
  if (m.mlp == MlpKind::SwiGlu) a.add("swiglu");
  if (!m.tied_embeddings) a.add("untie-embeddings-and-output-weights");
  if (!m.bias) a.add("disable-bias-linear");
  if (!m.dropout) {
    a.add("attention-dropout", "0");
    a.add("hidden-dropout", "0");
  }
  if (m.moe) {
    a.add("num-experts", n(m.moe->experts));
    a.add("moe-router-topk", n(m.moe->top_k));
    a.add("moe-ffn-hidden-size", n(m.ffn_hidden));
    if (m.moe->every > 1) a.add("moe-layer-freq", moe_layer_pattern(m));
    // A capacity drops the tokens past it, as the twin counts expert work; without one both the twin
    // and Megatron (its default) run dropless.
    // training.moe_dispatcher fused is the flex dispatcher with DeepEP (HybridEP costs the same here).
    if (t.moe_dispatcher == MoeDispatcher::Fused) {
      a.add("moe-token-dispatcher-type", "flex");
      a.add("moe-flex-dispatcher-backend", "deepep");
    } else {
      a.add("moe-token-dispatcher-type", "alltoall");
    }
    if (m.moe->capacity_factor) a.add("moe-expert-capacity-factor", decimal(*m.moe->capacity_factor));
  }
  // The twin's vocabulary as is; Megatron pads it to a multiple of 128 x tp.
  a.add("vocab-size", n(m.vocab));
  a.add("tokenizer-type", "NullTokenizer");
  a.add("mock-data");
}

// Rank order: Megatron builds groups in tp-cp-ep-dp-pp order, or tp-cp-ep-pp-dp with --use-tp-pp-dp-mapping.
void rank_order(Arguments& a, const Plan& p, std::vector<std::string>& notes) {
  const bool pp_before_dp = p.order == "tp-cp-pp-dp" || p.order == "tp-pp-cp-dp";
  if (pp_before_dp) a.add("use-tp-pp-dp-mapping");
  const bool cp_moved = p.order == "tp-dp-cp-pp" || p.order == "tp-pp-cp-dp";
  if (cp_moved && p.cp > 1)
    notes.push_back("rank order " + p.order + ": Megatron-LM keeps cp next to tp, so it runs " +
                    (pp_before_dp ? "tp-cp-pp-dp" : "tp-cp-dp-pp"));
  if (p.ep > 1 && p.cp > 1)
    notes.push_back("ep=" + n(p.ep) + " with cp=" + n(p.cp) +
                    ": Megatron-LM forms expert groups over cp x dp, the twin over dp alone");
}

void pipeline(Arguments& a, const Plan& p, const ModelSpec& m, std::vector<std::string>& notes) {
  if (p.pp > 1 && p.schedule == Schedule::GPipe)
    notes.push_back(
        "schedule gpipe: Megatron-LM's pipeline runs 1F1B (the same work, fewer micro-batches in flight)");
  const std::string layout = megatron_layout(p, m.layers);
  if (!layout.empty()) {
    a.add("pipeline-model-parallel-layout", "\"" + layout + "\"");
  } else if (p.virtual_stages > 1) {
    a.add("num-layers-per-virtual-pipeline-stage", n(m.layers / p.chunks()));
  }
  if (p.virtual_stages > 1 && !p.overlap_pp) {
    if (p.pp > 2)
      a.add("no-overlap-p2p-communication");
    else
      notes.push_back("overlap_pp off: Megatron-LM's interleaved schedule over pp=2 needs its p2p overlap");
  }
}

// Context parallelism's attention as the Program costs it: Transformer Engine's p2p ring is
// --cp-comm-type p2p (Megatron-LM's default), the gather its allgather; PyTorch's context_parallel ring
// has no Megatron-LM form.
void cp_comm_type(Arguments& a, const TrainingSpec& t, std::vector<std::string>& notes) {
  a.add("cp-comm-type", t.cp_attention == CpAttention::Gather ? "allgather" : "p2p");
  if (t.cp_attention == CpAttention::TorchRing)
    notes.push_back(
        "cp_attention torch_ring: Megatron-LM has no PyTorch context_parallel ring; this launch "
        "runs Transformer Engine's p2p ring");
}

void recompute(Arguments& a, const Plan& p, const ModelSpec& m, std::vector<std::string>& notes) {
  const Recompute r = emit_detail::uniform_recompute(p, notes);
  const int first_layers = emit_detail::block_recompute_layers(p, notes);
  if (first_layers > 0 && r != Recompute::Full)
    notes.push_back("recompute_layers " + n(first_layers) +
                    ": Megatron-LM's block method picks the layers of full recompute only; every layer's is "
                    "emitted");
  if (r == Recompute::Selective) {
    a.add("recompute-granularity", "selective");
    if (const RecomputeModules& modules = p.stages.front().recompute_modules; modules != RecomputeModules{})
      a.add("recompute-modules", join(modules.list(), " "));
  }
  if (r == Recompute::Full) {
    // Block: the first n layers of each model chunk; uniform with 1: every layer on its own.
    a.add("recompute-granularity", "full");
    a.add("recompute-method", first_layers > 0 ? "block" : "uniform");
    a.add("recompute-num-layers", first_layers > 0 ? n(first_layers) : "1");
  }
  if (!p.offload_activations) return;
  // Megatron's layer-wise activation offload: all layers but the last, one stage, no recompute.
  if (p.pp == 1 && r == Recompute::None && m.layers > 1) {
    a.add("cpu-offloading-num-layers", n(m.layers - 1));
    notes.push_back("offload_activations: Megatron-LM keeps the last layer's activations on the GPU");
  } else {
    notes.push_back(
        "offload_activations: Megatron-LM's --cpu-offloading runs only without pipeline "
        "parallelism and without recompute");
  }
}

// ZeRO: 1 is the distributed optimizer (one reduce-scatter after the last micro-batch); 2 and 3 are
// Megatron-FSDP, sharding gradients (2) and parameters too (3) per micro-batch.
void sharding(Arguments& a, const Plan& p, const ScenarioSpec& s, std::vector<std::string>& notes) {
  if (p.zero >= 1) a.add("use-distributed-optimizer");
  if (p.dp_replicate > 1)
    notes.push_back("dp_replicate=" + n(p.dp_replicate) +
                    " (HSDP): not emitted; these arguments shard over the whole data-parallel group");
  if (p.zero >= 2) {
    a.add("use-megatron-fsdp");
    a.add("data-parallel-sharding-strategy", p.zero == 2 ? "optim_grads" : "optim_grads_params");
    a.add("ckpt-format", "fsdp_dtensor");
  }
  if (p.offload_optimizer) {
    if (p.zero >= 1) {
      a.add("optimizer-cpu-offload");
      a.add("use-precision-aware-optimizer");
    } else {
      notes.push_back(
          "offload_optimizer with zero 0: Megatron-LM offloads only a sharded optimizer (zero >= 1)");
    }
  }
  a.add("ddp-bucket-size", n(emit_detail::bucket_elements(p, s)));
  if (p.overlap_dp) a.add("overlap-grad-reduce");
  if (p.overlap_param_gather) a.add("overlap-param-gather");
  if (p.overlap_ep) a.add("overlap-moe-expert-parallel-comm");
}

void precision_and_optimizer(Arguments& a, const Plan& p, const ScenarioSpec& s,
                             std::vector<std::string>& notes) {
  const Precision precision = s.training.precision;
  if (precision == Precision::Bf16 || precision == Precision::Fp8) a.add("bf16");
  if (precision == Precision::Fp16) a.add("fp16");
  if (precision == Precision::Fp8) a.add("fp8-format", "hybrid");
  // Megatron-LM accumulates and reduces bf16 runs' gradients in fp32 unless told otherwise, fp16 runs'
  // in fp16 unless told otherwise.
  const bool fp32_grads = cost::gradient_bytes(s.training) == 4;
  if ((precision == Precision::Bf16 || precision == Precision::Fp8) && !fp32_grads)
    a.add("grad-reduce-in-bf16");
  if (precision == Precision::Fp16 && fp32_grads) a.add("accumulate-allreduce-grads-in-fp32");
  if (s.training.grad_accumulation == GradAccumulation::Unfused &&
      cost::gradient_add_bytes(s.training, p.zero) > 0)
    a.add("no-gradient-accumulation-fusion");
  if (precision == Precision::Fp8 && s.training.fp8_param_gather) a.add("fp8-param-gather");
  // Dynamic tensorwise scaling is Megatron-LM's --fp8-recipe tensorwise (TE's current scaling); torchao's
  // comes out as the same scaling with Transformer Engine's kernels. Delayed is the default.
  if (precision == Precision::Fp8 && s.training.fp8_recipe != Fp8Recipe::TeDelayed)
    a.add("fp8-recipe", "tensorwise");
  // Without it Megatron-LM runs vocab_parallel_cross_entropy (PyTorch's F.cross_entropy is no choice).
  if (s.training.cross_entropy == CrossEntropy::Fused) a.add("cross-entropy-loss-fusion");
  // Megatron-Core's attention backends: TE's flash (FlashAttention 2/3), unfused (scores in memory);
  // the twin's default `flash` is its `auto` (TE picks cuDNN's fused kernel or flash), the default.
  if (s.training.attention == AttentionKind::Unfused) a.add("attention-backend", "unfused");
  if (s.training.attention == AttentionKind::Flash2 || s.training.attention == AttentionKind::Flash3)
    a.add("attention-backend", "flash");
  if (s.training.attention == AttentionKind::Triton)
    notes.push_back(
        "attention triton: Megatron-LM has no Triton FlashAttention backend; its default (auto) runs");
  a.add("optimizer", s.training.optimizer == OptimizerKind::Sgd ? "sgd" : "adam");
  if (s.training.optimizer == OptimizerKind::Adam)
    notes.push_back("optimizer adam: Megatron-LM's adam decouples weight decay (AdamW)");
  if (p.compression.kind == CompressionKind::TopK)
    notes.push_back("top-k gradient compression (ratio " + decimal(p.compression.ratio) +
                    "): Megatron-LM reduces gradients dense");
  if (p.overlap_tp) {
    if (p.tp > 1 && p.sequence_parallel) {
      a.add("tp-comm-overlap");
      if (s.training.tp_overlap == TpOverlap::AsyncTp)
        notes.push_back(
            "tp_overlap async_tp: Megatron-LM's --tp-comm-overlap runs Transformer Engine's userbuffers "
            "(tp_overlap userbuffers), not PyTorch's AsyncTP");
    } else if (p.tp > 1)
      notes.push_back(
          "overlap_tp without sequence parallelism: Megatron-LM overlaps TP communication only with it");
  }
  const long long per_step = s.training.global_batch * static_cast<long long>(s.training.seq_len);
  if (s.training.steps)
    a.add("train-iters", n(*s.training.steps));
  else if (s.training.tokens && per_step > 0)
    a.add("train-iters",
          n(static_cast<long long>(std::ceil(*s.training.tokens / static_cast<double>(per_step)))));
}

// torchrun's world: whole nodes of the first stage's pool when the plan fills them, else one node.
std::string launcher(const Plan& p, const ScenarioSpec& s) {
  int per_node = 1;
  for (const auto& pool : s.cluster.pools)
    if (!p.stages.empty() && pool.name == p.stages.front().pool) per_node = pool.gpus_per_node;
  const int gpus = p.gpus();
  const bool whole_nodes = gpus >= per_node && gpus % per_node == 0;
  const int nodes = whole_nodes ? gpus / per_node : 1;
  const int procs = whole_nodes ? per_node : gpus;
  return "torchrun --nnodes " + n(nodes) + " --nproc-per-node " + n(procs) + " pretrain_gpt.py \\\n";
}

}  // namespace

std::string megatron_layout(const Plan& p, int layers) {
  const std::vector<int> sizes = chunk_layers(p);
  if (sizes.size() <= 1) return "";
  const bool even = std::all_of(sizes.begin(), sizes.end(), [&](int k) { return k == sizes.front(); });
  if (even && sizes.front() * static_cast<int>(sizes.size()) == layers) return "";
  std::string layout = "E";
  for (size_t c = 0; c < sizes.size(); ++c) layout += (c ? "|" : ",") + std::string("t*") + n(sizes[c]);
  return layout + ",L";
}

EmittedConfig megatron_launch(const Plan& p, const ScenarioSpec& s) {
  EmittedConfig out;
  auto& notes = out.notes;
  Arguments a;
  model_shape(a, s.model, s.training);
  if (s.model.position == PositionKind::Alibi)
    notes.push_back(
        "position alibi: Megatron-LM has no ALiBi (Megatron-DeepSpeed's --position-embedding-type alibi); "
        "this launch uses learned absolute positions");
  a.add("tensor-model-parallel-size", n(p.tp));
  a.add("pipeline-model-parallel-size", n(p.pp));
  if (p.cp > 1) {
    a.add("context-parallel-size", n(p.cp));
    cp_comm_type(a, s.training, notes);
  }
  if (p.ep > 1) a.add("expert-model-parallel-size", n(p.ep));
  if (folds_experts(p)) a.add("expert-tensor-parallel-size", n(experts_tp(p)));
  rank_order(a, p, notes);
  if (p.tp > 1 && p.sequence_parallel) a.add("sequence-parallel");
  if (p.tp > 1 && s.training.tensor_parallel == TensorParallelImpl::DTensor)
    notes.push_back(
        "tensor_parallel dtensor: Megatron-LM runs tensor parallelism with its own linears (sequence-first "
        "activations, no copies around the sequence-parallel collectives)");
  a.add("micro-batch-size", n(p.micro_batch));
  a.add("global-batch-size", n(s.training.global_batch));
  pipeline(a, p, s.model, notes);
  recompute(a, p, s.model, notes);
  sharding(a, p, s, notes);
  precision_and_optimizer(a, p, s, notes);

  std::string& t = out.text;
  t = "# Megatron-LM pretrain_gpt.py for " + (s.name.empty() ? std::string("this scenario") : s.name) + ": " +
      n(p.gpus()) + " GPUs = dp " + n(p.dp) + " x tp " + n(p.tp) + " x pp " + n(p.pp) + " x cp " + n(p.cp) +
      (p.ep > 1 ? ", ep " + n(p.ep) : "") + "; " + n(p.num_microbatches) + " micro-batches of " +
      n(p.micro_batch) + " per step\n";
  t += "# On more than one node add torchrun's --node-rank and --master-addr (or --rdzv-*); replace\n"
       "# --mock-data and NullTokenizer with your --data-path and tokenizer.\n";
  std::vector<std::string> pools;
  for (int r = 0; r < p.pp && r < static_cast<int>(p.stages.size()); ++r) pools.push_back(p.stages[r].pool);
  if (s.cluster.pools.size() > 1)
    t += "# Pipeline ranks 0.." + n(p.pp - 1) + " run on pools " + join(pools, ", ") +
         ": give torchrun the nodes in that order.\n";
  // Megatron asserts this for tp or cp > 1 (before Blackwell), and Megatron-FSDP asserts it unset.
  if ((p.tp > 1 || p.cp > 1) && p.zero < 2) t += "export CUDA_DEVICE_MAX_CONNECTIONS=1\n";
  if (s.training.launch_blocking) t += "export CUDA_LAUNCH_BLOCKING=1\n";  // every launch synchronous
  t += launcher(p, s) + a.text();
  if (!notes.empty()) {
    t += "# not expressible as Megatron-LM arguments (what runs differs from the plan):\n";
    for (const auto& note : notes) t += "#   - " + note + "\n";
  }
  return out;
}

}  // namespace paratwin
