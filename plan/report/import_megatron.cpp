// A Megatron-LM launch read back into a scenario: the inverse of emit_megatron.cpp, argument by argument.
// Megatron's own defaults (arguments.py) stand for what the launch leaves out.
#include "plan/report/import_megatron.hpp"

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "plan/cost/memory.hpp"

namespace paratwin {
namespace {

// The environment word that makes every kernel launch synchronous (training.launch_blocking).
const std::string kLaunchBlocking = "CUDA_LAUNCH_BLOCKING=1";

// Arguments that set nothing the twin models (data, tokenizer, learning rate, logging, checkpoints).
const std::set<std::string> kWithoutEffect = {"tokenizer-type",
                                              "tokenizer-model",
                                              "mock-data",
                                              "data-path",
                                              "vocab-file",
                                              "merge-file",
                                              "split",
                                              "lr",
                                              "min-lr",
                                              "lr-decay-style",
                                              "lr-decay-iters",
                                              "lr-warmup-iters",
                                              "lr-warmup-fraction",
                                              "weight-decay",
                                              "clip-grad",
                                              "adam-beta1",
                                              "adam-beta2",
                                              "adam-eps",
                                              "init-method-std",
                                              "log-interval",
                                              "save",
                                              "load",
                                              "save-interval",
                                              "eval-interval",
                                              "eval-iters",
                                              "seed",
                                              "ckpt-format",
                                              "use-mcore-models",
                                              "transformer-impl",
                                              "distributed-backend",
                                              "use-precision-aware-optimizer",
                                              "tensorboard-dir",
                                              "wandb-project"};

// pretrain_gpt.py's arguments as argparse reads them (`--name value`, `--name=value`, switches; the last
// occurrence wins), each marked as it is read so that the ones nobody read can be reported.
class Arguments {
 public:
  explicit Arguments(const std::vector<std::string>& words, std::vector<std::string>& warnings) {
    for (size_t i = 0; i < words.size(); ++i) {
      const std::string& w = words[i];
      if (w.rfind("--", 0) != 0) {
        warnings.push_back("'" + w + "': not an argument (expected --name), not read");
        continue;
      }
      std::string name = w.substr(2), value;
      bool has_value = false;
      if (const auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1), name = name.substr(0, eq), has_value = true;
      } else {
        // Every word up to the next argument: list-valued arguments (--recompute-modules a b) take
        // several; a single-valued one with more says so when it is read.
        while (i + 1 < words.size() && words[i + 1].rfind("--", 0) != 0) {
          value += (has_value ? " " : "") + words[++i];
          has_value = true;
        }
      }
      if (!values_.count(name)) order_.push_back(name);
      values_[name] = has_value ? std::optional<std::string>(value) : std::nullopt;
    }
  }

  bool flag(const std::string& name) {
    used_.insert(name);
    return values_.count(name) > 0;
  }

  std::optional<std::string> text(const std::string& name) {
    if (!flag(name)) return std::nullopt;
    const auto& v = values_.at(name);
    if (!v) throw InputError(where(name, ""), "--" + name + " needs a value");
    return *v;
  }

  std::optional<long long> integer(const std::string& name, long long lo, long long hi) {
    const auto t = text(name);
    if (!t) return std::nullopt;
    size_t end = 0;
    long long v = 0;
    try {
      v = std::stoll(*t, &end);
    } catch (const std::exception&) {
      end = 0;
    }
    if (end == 0 || end != t->size() || v < lo || v > hi)
      throw InputError(where(name, *t), "--" + name + ": expected an integer from " + std::to_string(lo) +
                                            " to " + std::to_string(hi) + ", got '" + *t + "'");
    return v;
  }
  int integer(const std::string& name, long long lo, long long hi, int otherwise) {
    return static_cast<int>(integer(name, lo, hi).value_or(otherwise));
  }
  int required(const std::string& name, long long lo, long long hi) {
    const auto v = integer(name, lo, hi);
    if (!v) throw InputError(where(name, ""), "--" + name + " is required: the twin needs it for the model");
    return static_cast<int>(*v);
  }

  std::optional<double> real(const std::string& name, double lo, double hi) {
    const auto t = text(name);
    if (!t) return std::nullopt;
    size_t end = 0;
    double v = 0;
    try {
      v = std::stod(*t, &end);
    } catch (const std::exception&) {
      end = 0;
    }
    if (end == 0 || end != t->size() || !(v >= lo && v <= hi))
      throw InputError(where(name, *t), "--" + name + ": expected a number from " + std::to_string(lo) +
                                            " to " + std::to_string(hi) + ", got '" + *t + "'");
    return v;
  }

  // One of `choices`, or nullopt when the argument is absent.
  std::optional<std::string> choice(const std::string& name, const std::vector<std::string>& choices) {
    const auto t = text(name);
    if (!t) return std::nullopt;
    for (const auto& c : choices)
      if (c == *t) return t;
    std::string list;
    for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
    throw InputError(where(name, *t), "--" + name + ": the twin reads " + list + "; got '" + *t + "'");
  }

  // The arguments nobody read, in the order given.
  std::vector<std::string> unread() const {
    std::vector<std::string> out;
    for (const auto& name : order_)
      if (!used_.count(name) && !kWithoutEffect.count(name)) out.push_back(name);
    return out;
  }

  static Location where(const std::string& name, const std::string& value) {
    return argument_location("--" + name, value);
  }

 private:
  std::map<std::string, std::optional<std::string>> values_;
  std::vector<std::string> order_;
  std::set<std::string> used_;
};

// Megatron's --moe-layer-freq as one 0/1 per layer: an integer k (layers l with l % k == 0), a Python list,
// or emit_megatron's pattern "([0]*N+[1])*M" with an optional "+[0]*R".
std::vector<int> moe_layers(const std::string& freq, int layers, std::vector<std::string>& warnings) {
  std::vector<int> out;
  std::smatch m;
  const std::string unquoted =
      freq.size() > 1 && freq.front() == '"' ? freq.substr(1, freq.size() - 2) : freq;
  if (std::regex_match(unquoted, m, std::regex(R"(\d+)"))) {
    const int k = std::stoi(unquoted);
    if (k <= 0) throw InputError(Arguments::where("moe-layer-freq", freq), "--moe-layer-freq must be >= 1");
    if (k > 1)
      warnings.push_back("--moe-layer-freq " + unquoted +
                         ": Megatron-LM puts the experts on layer 0 of every " + unquoted +
                         ", the twin on the last; the same count, shifted");
    for (int l = 0; l < layers; ++l) out.push_back(l % k == k - 1);
  } else if (std::regex_match(unquoted, m,
                              std::regex(R"(\(\[0\]\*(\d+)\+\[1\]\)\*(\d+)(\+\[0\]\*(\d+))?)"))) {
    for (int g = 0; g < std::stoi(m[2]); ++g) {
      out.insert(out.end(), std::stoi(m[1]), 0);
      out.push_back(1);
    }
    if (m[4].matched) out.insert(out.end(), std::stoi(m[4]), 0);
  } else if (std::regex_match(unquoted, std::regex(R"(\[\s*[01](\s*,\s*[01])*\s*\])"))) {
    for (char c : unquoted)
      if (c == '0' || c == '1') out.push_back(c - '0');
  } else {
    throw InputError(
        Arguments::where("moe-layer-freq", freq),
        "--moe-layer-freq: expected an integer, a list of 0 and 1, or ([0]*N+[1])*M; got '" + unquoted + "'");
  }
  return out;
}

// The twin's rule is "layer l is MoE when l % every == every - 1"; the pattern must follow it.
int moe_every(const std::string& freq, int layers, std::vector<std::string>& warnings) {
  const std::vector<int> pattern = moe_layers(freq, layers, warnings);
  int every = 0;
  while (every < static_cast<int>(pattern.size()) && !pattern[every]) ++every;
  ++every;
  bool follows = static_cast<int>(pattern.size()) == layers && every <= layers;
  for (int l = 0; follows && l < layers; ++l) follows = pattern[l] == (l % every == every - 1);
  if (!follows)
    throw InputError(Arguments::where("moe-layer-freq", freq),
                     "--moe-layer-freq: a scenario's MoE layers are every k-th (layer l when l % k == k - 1) "
                     "over all " +
                         std::to_string(layers) + " layers; this pattern is not");
  return every;
}

void read_moe(Arguments& a, ModelSpec& m, std::vector<std::string>& warnings) {
  const auto experts = a.integer("num-experts", 1, 1 << 20);
  if (!experts) return;
  MoeSpec moe;
  moe.experts = static_cast<int>(*experts);
  moe.top_k = a.integer("moe-router-topk", 1, moe.experts, 2);
  if (a.integer("moe-ffn-hidden-size", 1, 1 << 24, m.ffn_hidden) != m.ffn_hidden)
    throw InputError(
        Arguments::where("moe-ffn-hidden-size", ""),
        "--moe-ffn-hidden-size differs from --ffn-hidden-size: a scenario's experts have the dense "
        "MLP's width");
  if (const auto freq = a.text("moe-layer-freq")) moe.every = moe_every(*freq, m.layers, warnings);
  if (const auto factor = a.real("moe-expert-capacity-factor", 0.01, 1e6))
    moe.capacity_factor = *factor;  // without it Megatron-LM and the twin both run dropless
  m.moe = moe;
}

ModelSpec read_model(Arguments& a, TrainingSpec& t, std::vector<std::string>& warnings) {
  ModelSpec m;
  m.name = "imported";
  m.layers = a.required("num-layers", 1, 1 << 20);
  m.hidden = a.required("hidden-size", 1, 1 << 24);
  m.heads = a.required("num-attention-heads", 1, 1 << 16);
  m.mlp = a.flag("swiglu") ? MlpKind::SwiGlu : MlpKind::Gelu;
  // Megatron's default widths (arguments.py): 4h, or 2/3 of it rounded down to 64 for SwiGLU.
  const int default_ffn = m.mlp == MlpKind::SwiGlu ? (4 * m.hidden * 2 / 3) / 64 * 64 : 4 * m.hidden;
  m.ffn_hidden = a.integer("ffn-hidden-size", 1, 1 << 24, default_ffn);
  if (!a.integer("kv-channels", 1, 1 << 16) && m.hidden % m.heads)
    throw InputError(
        Arguments::where("num-attention-heads", std::to_string(m.heads)),
        "--hidden-size must be a multiple of --num-attention-heads unless --kv-channels is given");
  m.head_dim = a.integer("kv-channels", 1, 1 << 16, m.hidden / m.heads);
  m.kv_heads = m.heads;
  if (a.flag("group-query-attention")) m.kv_heads = a.integer("num-query-groups", 1, m.heads, 1);
  t.seq_len = a.required("seq-length", 1, 1 << 26);
  m.seq_len = a.integer("max-position-embeddings", t.seq_len, 1 << 26, t.seq_len);
  const auto padded = a.integer("padded-vocab-size", 1, 1 << 26);
  const auto vocab = a.integer("vocab-size", 1, 1 << 26);
  if (!padded && !vocab)
    throw InputError(Arguments::where("vocab-size", ""),
                     "--vocab-size is required: the twin needs the vocabulary");
  m.vocab = static_cast<int>(padded ? *padded : *vocab);
  // alibi: Megatron-DeepSpeed's (BLOOM's launches); Megatron-LM has learned_absolute and rope.
  const auto position = a.choice("position-embedding-type", {"learned_absolute", "rope", "alibi"});
  m.position = position == "rope"    ? PositionKind::Rope
               : position == "alibi" ? PositionKind::Alibi
                                     : PositionKind::Learned;
  const auto norm = a.choice("normalization", {"LayerNorm", "RMSNorm"});
  m.norm = norm == "RMSNorm" ? NormKind::RmsNorm : NormKind::LayerNorm;
  m.tied_embeddings = !a.flag("untie-embeddings-and-output-weights");
  m.bias = !a.flag("disable-bias-linear");
  // Megatron's dropouts default to 0.1; the twin has one switch for both.
  const double attention_dropout = a.real("attention-dropout", 0, 1).value_or(0.1);
  const double hidden_dropout = a.real("hidden-dropout", 0, 1).value_or(0.1);
  m.dropout = attention_dropout > 0 || hidden_dropout > 0;
  if ((attention_dropout > 0) != (hidden_dropout > 0))
    warnings.push_back(
        "--attention-dropout and --hidden-dropout differ in being 0: the twin counts dropout "
        "in both");
  read_moe(a, m, warnings);
  return m;
}

// Megatron's --pipeline-model-parallel-layout in its simple form: chunks separated by '|', each a
// comma-separated list of E (embedding, first chunk), L (loss, last chunk), t and t*N (transformer layers).
std::vector<StagePlan> read_layout(const std::string& layout, int layers) {
  const std::string text =
      layout.size() > 1 && layout.front() == '"' ? layout.substr(1, layout.size() - 2) : layout;
  const Location where = Arguments::where("pipeline-model-parallel-layout", layout);
  std::vector<StagePlan> stages;
  std::istringstream chunks(text);
  std::string chunk;
  int next = 0;
  while (std::getline(chunks, chunk, '|')) {
    StagePlan st;
    st.layer_begin = next;
    std::istringstream tokens(chunk);
    std::string token;
    while (std::getline(tokens, token, ',')) {
      std::smatch m;
      if (token == "E" || token == "L" || token.empty()) continue;
      if (!std::regex_match(token, m, std::regex(R"(t(\*(\d+))?)")))
        throw InputError(where, "--pipeline-model-parallel-layout: the import reads E, L, t and t*N; got '" +
                                    token + "' (a layout with other layers has no scenario form)");
      next += m[2].matched ? std::stoi(m[2]) : 1;
    }
    if (next == st.layer_begin)
      throw InputError(where, "--pipeline-model-parallel-layout: chunk " + std::to_string(stages.size()) +
                                  " has no transformer layers; a scenario's stages each hold some");
    st.layer_end = next;
    stages.push_back(st);
  }
  if (next != layers)
    throw InputError(where, "--pipeline-model-parallel-layout holds " + std::to_string(next) +
                                " transformer layers; --num-layers says " + std::to_string(layers));
  return stages;
}

// --decoder-first/last-pipeline-num-layers (one chunk per rank): the first and last stages take what they
// say, the stages between share the rest evenly, as Megatron-LM asserts they can.
std::vector<StagePlan> first_and_last_stages(Arguments& a, const Plan& p, int layers) {
  const auto first = a.integer("decoder-first-pipeline-num-layers", 1, layers);
  const auto last = a.integer("decoder-last-pipeline-num-layers", 1, layers);
  if (!first && !last) return {};
  const Location where =
      Arguments::where(first ? "decoder-first-pipeline-num-layers" : "decoder-last-pipeline-num-layers",
                       std::to_string(first ? *first : *last));
  if (p.pp < 2)
    throw InputError(where, "an uneven first or last stage needs --pipeline-model-parallel-size > 1");
  const int middle = p.pp - (first ? 1 : 0) - (last ? 1 : 0);
  const long long rest = layers - first.value_or(0) - last.value_or(0);
  if (rest < middle || (middle == 0 && rest != 0) || (middle > 0 && rest % middle))
    throw InputError(where, "the " + std::to_string(rest) +
                                " layers left by the first and last stages do not "
                                "split evenly over the " +
                                std::to_string(middle) + " stages between");
  std::vector<int> sizes;
  if (first) sizes.push_back(static_cast<int>(*first));
  for (int i = 0; i < middle; ++i) sizes.push_back(static_cast<int>(rest / middle));
  if (last) sizes.push_back(static_cast<int>(*last));
  std::vector<StagePlan> stages;
  int next = 0;
  for (int k : sizes) stages.push_back({next, next += k, "", Recompute::None});
  return stages;
}

void read_pipeline(Arguments& a, ImportedLaunch& out) {
  Plan& p = out.plan;
  const int layers = out.model.layers;
  // Megatron-Core's account_for_*_in_pipeline_split: the embedding and the loss count as layers when the
  // layers are split evenly, so the first and last chunks hold one transformer layer less.
  const PipelineSplit split{a.flag("account-for-embedding-in-pipeline-split"),
                            a.flag("account-for-loss-in-pipeline-split")};
  const std::string split_flag =
      split.embedding ? "account-for-embedding-in-pipeline-split" : "account-for-loss-in-pipeline-split";
  if (split.extra_layers() &&
      (a.flag("decoder-first-pipeline-num-layers") || a.flag("decoder-last-pipeline-num-layers") ||
       a.flag("pipeline-model-parallel-layout")))
    throw InputError(Arguments::where(split_flag, ""),
                     "--" + split_flag +
                         " splits the layers evenly; the import reads it without an uneven first or last "
                         "stage or a layout");
  if (auto stages = first_and_last_stages(a, p, layers); !stages.empty()) {
    if (a.flag("num-layers-per-virtual-pipeline-stage") || a.flag("pipeline-model-parallel-layout"))
      throw InputError(Arguments::where("decoder-first-pipeline-num-layers", ""),
                       "the import reads uneven first and last stages without interleaving; give "
                       "--pipeline-model-parallel-layout instead");
    p.stages = std::move(stages);
    out.uneven_stages = true;
    p.virtual_stages = 1;
  } else if (const auto layout = a.text("pipeline-model-parallel-layout")) {
    p.stages = read_layout(*layout, layers);
    out.uneven_stages = true;
    const int chunks = static_cast<int>(p.stages.size());
    if (chunks % p.pp)
      throw InputError(Arguments::where("pipeline-model-parallel-layout", *layout),
                       "--pipeline-model-parallel-layout has " + std::to_string(chunks) +
                           " chunks, not a multiple of --pipeline-model-parallel-size " +
                           std::to_string(p.pp));
    p.virtual_stages = chunks / p.pp;
  } else if (const auto per_chunk = a.integer("num-layers-per-virtual-pipeline-stage", 1, layers)) {
    const int counted = layers + split.extra_layers();
    if (counted % (*per_chunk * p.pp))
      throw InputError(Arguments::where("num-layers-per-virtual-pipeline-stage", std::to_string(*per_chunk)),
                       "--num-layers-per-virtual-pipeline-stage x --pipeline-model-parallel-size must divide "
                       "--num-layers (" +
                           std::to_string(counted) +
                           (split.extra_layers() ? " with the embedding and loss it counts)" : ")"));
    p.virtual_stages = static_cast<int>(counted / (*per_chunk * p.pp));
  } else {
    p.virtual_stages = a.integer("num-virtual-stages-per-pipeline-rank", 1, layers, 1);
  }
  if (split.extra_layers()) {
    if (const std::string problem = split.problem(layers, p.chunks()); !problem.empty())
      throw InputError(Arguments::where(split_flag, ""), "--" + split_flag + ": " + problem);
    p.stages = even_stages(layers, p.chunks(), "", Recompute::None, 1, split);
    out.uneven_stages = true;
  }
  p.schedule = p.virtual_stages > 1 ? Schedule::Interleaved : Schedule::OneFOneB;
  p.overlap_pp = !a.flag("no-overlap-p2p-communication");
}

// The recompute mode, and under full granularity with the block method the layers it recomputes at the
// start of each model chunk (StagePlan::recompute_layers; 0: every layer).
std::pair<Recompute, int> read_recompute(Arguments& a, const Plan& p, int layers) {
  const bool activations = a.flag("recompute-activations");  // the older spelling of selective
  const auto granularity = a.choice("recompute-granularity", {"selective", "full"});
  const auto method = a.choice("recompute-method", {"uniform", "block"});
  const int count = a.integer("recompute-num-layers", 0, layers, 1);
  if (granularity == "full") {
    if (method == "block" && count == 0)
      throw InputError(Arguments::where("recompute-num-layers", "0"),
                       "--recompute-method block with --recompute-num-layers 0 recomputes no layer; give "
                       "--recompute-num-layers 1 or more, or leave --recompute-granularity out");
    const bool some = method == "block" && count < (layers + p.chunks() - 1) / p.chunks();
    return {Recompute::Full, some ? count : 0};
  }
  return {granularity == "selective" || activations ? Recompute::Selective : Recompute::None, 0};
}

// Megatron-Core's --recompute-modules (default core_attn) under selective granularity; the modules the
// twin does not model are left out with a warning.
RecomputeModules recompute_modules_of(Arguments& a, std::vector<std::string>& warnings) {
  const auto text = a.text("recompute-modules");
  if (!text) return {};
  RecomputeModules m{.core_attn = false};
  std::istringstream words(*text);
  for (std::string word; words >> word;) {
    if (add_recompute_module(m, word)) continue;
    if (std::ranges::find(kUnmodelledRecomputeModules, word) == kUnmodelledRecomputeModules.end())
      throw InputError(Arguments::where("recompute-modules", *text),
                       "--recompute-modules: Megatron-Core takes " + join(kRecomputeModuleNames) + ", " +
                           join(kUnmodelledRecomputeModules) + "; got '" + word + "'" +
                           did_you_mean(word, kRecomputeModuleNames));
    warnings.push_back("--recompute-modules " + word + ": not modelled, left out (the twin recomputes " +
                       join(kRecomputeModuleNames) + ")");
  }
  return m;
}

// ZeRO from the distributed optimizer (1) and Megatron-FSDP's sharding strategy (2: gradients, 3: params).
int read_zero(Arguments& a) {
  int zero = a.flag("use-distributed-optimizer") ? 1 : 0;
  const bool fsdp = a.flag("use-megatron-fsdp") || a.flag("use-custom-fsdp");
  const auto strategy =
      a.choice("data-parallel-sharding-strategy", {"no_shard", "optim", "optim_grads", "optim_grads_params"});
  if (fsdp) {
    const std::string s = strategy.value_or("no_shard");
    zero = std::max(zero, s == "optim_grads_params" ? 3 : s == "optim_grads" ? 2 : s == "optim" ? 1 : 0);
  }
  return zero;
}

void read_training(Arguments& a, ImportedLaunch& out) {
  TrainingSpec& t = out.training;
  const bool fp16 = a.flag("fp16"), bf16 = a.flag("bf16");
  const auto fp8 = a.choice("fp8-format", {"hybrid", "e4m3"});
  t.precision = fp8 ? Precision::Fp8 : fp16 ? Precision::Fp16 : bf16 ? Precision::Bf16 : Precision::Fp32;
  // Megatron-LM turns fp32 gradient accumulation and reduction on for bf16 itself.
  const bool in_bf16 = a.flag("grad-reduce-in-bf16"), in_fp32 = a.flag("accumulate-allreduce-grads-in-fp32");
  if ((bf16 && !in_bf16) || (fp16 && in_fp32)) t.grad_reduce = Precision::Fp32;
  // Without the fusion each weight gradient is added into the fp32 main_grad by a hook of its own.
  if (a.flag("no-gradient-accumulation-fusion") && t.grad_reduce == Precision::Fp32)
    t.grad_accumulation = GradAccumulation::Unfused;
  t.fp8_param_gather = fp8 && a.flag("fp8-param-gather");
  // Megatron-LM's --fp8-recipe: delayed (its default) is Transformer Engine's DelayedScaling,
  // tensorwise its Float8CurrentScaling; the block-scaled recipes (mxfp8, blockwise) are not modelled.
  if (a.choice("fp8-recipe", {"delayed", "tensorwise"}) == "tensorwise" && fp8)
    t.fp8_recipe = Fp8Recipe::TeCurrent;
  // Without the fusion Megatron-LM runs tensor_parallel.vocab_parallel_cross_entropy's eager passes.
  t.cross_entropy = a.flag("cross-entropy-loss-fusion") ? CrossEntropy::Fused : CrossEntropy::VocabParallel;
  // Megatron-Core's DistributedDataParallel buckets the first pipeline rank's gradients only.
  t.dp_buckets = DpBuckets::FirstStage;
  // The flex dispatcher (DeepEP, HybridEP) places the token copies in its own kernels; allgather is
  // costed as alltoall's traffic.
  const auto dispatcher = a.choice("moe-token-dispatcher-type", {"alltoall", "allgather", "flex"});
  if (dispatcher == "flex") t.moe_dispatcher = MoeDispatcher::Fused;
  if (dispatcher == "allgather")
    out.warnings.push_back("--moe-token-dispatcher-type allgather: imported as moe_dispatcher: alltoall");
  a.flag("moe-flex-dispatcher-backend");  // deepep or hybridep: costed alike
  const auto backend = a.choice("attention-backend", {"auto", "flash", "fused", "unfused", "local"});
  t.attention = backend == "unfused" || backend == "local" ? AttentionKind::Unfused : AttentionKind::Flash;
  if (backend == "flash")
    out.warnings.push_back(
        "--attention-backend flash: FlashAttention's generation is the installed package's; "
        "imported as attention: flash (the device's newest)");
  // Megatron-Core runs context parallelism in Transformer Engine's attention: --cp-comm-type p2p (the
  // default, and the only kind before TE 1.10) is TE's p2p ring, allgather the gather; the all-to-all
  // kinds are costed as the gather.
  const auto cp_comm = a.choice("cp-comm-type", {"p2p", "a2a", "allgather", "a2a+p2p"});
  if (!cp_comm || *cp_comm == "p2p")
    t.cp_attention = CpAttention::TeP2p;
  else if (*cp_comm != "allgather")
    out.warnings.push_back("--cp-comm-type " + *cp_comm + ": imported as cp_attention: gather");
  t.optimizer = a.choice("optimizer", {"adam", "sgd"}) == "sgd" ? OptimizerKind::Sgd : OptimizerKind::AdamW;
  if (const auto iters = a.integer("train-iters", 1, 1LL << 40)) t.steps = *iters;
}

void read_plan(Arguments& a, ImportedLaunch& out, std::optional<int> gpus) {
  Plan& p = out.plan;
  p.tp = a.integer("tensor-model-parallel-size", 1, 1024, 1);
  p.pp = a.integer("pipeline-model-parallel-size", 1, 4096, 1);
  p.cp = a.integer("context-parallel-size", 1, 1024, 1);
  p.ep = a.integer("expert-model-parallel-size", 1, 4096, 1);
  // The experts over the TP group (Megatron-Core's default), or whole, folded over tp x cp x dp
  // (Plan::expert_tp 1); another width is a plan a scenario cannot say.
  if (const int etp = a.integer("expert-tensor-parallel-size", 1, 1024, p.tp); etp != p.tp) {
    if (etp != 1)
      throw InputError(Arguments::where("expert-tensor-parallel-size", std::to_string(etp)),
                       "--expert-tensor-parallel-size " + std::to_string(etp) +
                           " differs from --tensor-model-parallel-size " + std::to_string(p.tp) +
                           ": the twin shards each expert over the TP group (Megatron-Core's default) or "
                           "folds whole experts (--expert-tensor-parallel-size 1); nearest: 1");
    p.expert_tp = 1;
  }
  if (!gpus)
    throw InputError(argument_location("--gpus", ""),
                     "the world size is unknown: give torchrun's --nnodes and --nproc-per-node before the "
                     "script, or --gpus");
  const int model_parallel = p.tp * p.pp * p.cp;
  if (*gpus % model_parallel)
    throw InputError(argument_location("--gpus", std::to_string(*gpus)),
                     std::to_string(*gpus) +
                         " GPUs are not a multiple of tp x pp x cp = " + std::to_string(model_parallel));
  out.world = *gpus;
  p.dp = *gpus / model_parallel;
  p.order = a.flag("use-tp-pp-dp-mapping") ? "tp-cp-pp-dp" : "tp-cp-dp-pp";
  p.sequence_parallel = a.flag("sequence-parallel") && p.tp > 1;
  p.micro_batch = a.integer("micro-batch-size", 1, 1 << 20, 1);
  const long long per_step = static_cast<long long>(p.micro_batch) * p.dp;
  out.training.global_batch = a.integer("global-batch-size", 1, 1LL << 40).value_or(per_step);
  if (out.training.global_batch % per_step)
    throw InputError(
        Arguments::where("global-batch-size", std::to_string(out.training.global_batch)),
        "--global-batch-size must be a multiple of --micro-batch-size x dp = " + std::to_string(per_step));
  p.num_microbatches = static_cast<int>(out.training.global_batch / per_step);
  read_pipeline(a, out);
  const auto [recompute, first_layers] = read_recompute(a, p, out.model.layers);
  const RecomputeModules modules =
      recompute == Recompute::Selective ? recompute_modules_of(a, out.warnings) : RecomputeModules{};
  if (p.stages.empty()) p.stages = even_stages(out.model.layers, p.chunks(), "", recompute);
  for (auto& st : p.stages)
    st.recompute = recompute, st.recompute_modules = modules, st.recompute_layers = first_layers;
  p.zero = read_zero(a);
  p.offload_optimizer = a.flag("optimizer-cpu-offload");
  p.offload_activations = a.integer("cpu-offloading-num-layers", 0, out.model.layers, 0) > 0;
  // Megatron's default bucket: max(40M, 1M x dp) elements.
  const long long elements =
      a.integer("ddp-bucket-size", 1, 1LL << 40).value_or(std::max(40000000LL, 1000000LL * p.dp));
  p.bucket_size = Bytes(static_cast<double>(elements) * cost::gradient_bytes(out.training));
  p.overlap_dp = a.flag("overlap-grad-reduce");
  p.overlap_param_gather = a.flag("overlap-param-gather") && p.zero == 1 && p.overlap_dp;
  p.overlap_ep = a.flag("overlap-moe-expert-parallel-comm");
  p.overlap_tp = a.flag("tp-comm-overlap") && p.tp > 1;
  // --tp-comm-overlap is Transformer Engine's userbuffers overlap (Megatron-Core's initialize_ub).
  if (p.overlap_tp) out.training.tp_overlap = TpOverlap::Userbuffers;
}

// torchrun's world size from the words before the script, or nullopt.
std::optional<int> launcher_world(const std::vector<std::string>& words) {
  long long nodes = 1, procs = 0;
  for (size_t i = 0; i < words.size(); ++i) {
    std::string w = words[i], value;
    if (const auto eq = w.find('='); eq != std::string::npos)
      value = w.substr(eq + 1), w = w.substr(0, eq);
    else if (i + 1 < words.size())
      value = words[i + 1];
    if (w != "--nnodes" && w != "--nproc-per-node" && w != "--nproc_per_node") continue;
    if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos || value.size() > 6)
      throw InputError(argument_location(w, value), w + ": expected a whole number, got '" + value + "'");
    (w == "--nnodes" ? nodes : procs) = std::stoll(value);
  }
  if (procs == 0) return std::nullopt;
  return static_cast<int>(nodes * procs);
}

}  // namespace

ImportedLaunch import_megatron(const std::vector<std::string>& words, std::optional<int> gpus) {
  ImportedLaunch out;
  size_t script = 0;
  for (size_t i = 0; i < words.size() && !script; ++i)
    if (words[i].size() > 3 && words[i].compare(words[i].size() - 3, 3, ".py") == 0) script = i + 1;
  if (script) {
    const auto world = launcher_world({words.begin(), words.begin() + static_cast<long>(script) - 1});
    if (world && gpus && *world != *gpus)
      throw InputError(
          argument_location("--gpus", std::to_string(*gpus)),
          "--gpus " + std::to_string(*gpus) + " differs from torchrun's world of " + std::to_string(*world));
    if (world) gpus = world;
  }
  // CUDA_LAUNCH_BLOCKING=1 before the script: exported by the launch script, or the command's prefix.
  out.training.launch_blocking = std::find(words.begin(), words.begin() + static_cast<long>(script),
                                           kLaunchBlocking) != words.begin() + static_cast<long>(script);
  Arguments a({words.begin() + static_cast<long>(script), words.end()}, out.warnings);
  out.model = read_model(a, out.training, out.warnings);
  read_training(a, out);
  read_plan(a, out, gpus);
  for (const auto& name : a.unread())
    out.warnings.push_back("--" + name + ": not read (unknown to the import, or nothing the twin models)");
  return out;
}

std::vector<std::string> launch_script_words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    if (line.compare(first, 7, "export ") == 0) {
      // Of the environment, what the twin models: synchronous launches (training.launch_blocking).
      std::istringstream exported(line.substr(first + 7));
      for (std::string w; exported >> w;)
        if (w == kLaunchBlocking) words.push_back(w);
      continue;
    }
    std::istringstream in(line);
    std::string w;
    while (in >> w) {
      if (w == "\\") continue;
      std::string unquoted;
      for (char c : w)
        if (c != '"') unquoted += c;
      words.push_back(unquoted);
    }
  }
  return words;
}

std::string imported_scenario_yaml(const ImportedLaunch& l, const std::string& cluster,
                                   const std::string& pool, int gpus_per_node) {
  auto n = [](long long v) { return std::to_string(v); };
  auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  const Plan& p = l.plan;
  const TrainingSpec& t = l.training;
  std::string y = "# Imported from " + l.source + " by `paratwin import`.\n";
  for (const auto& w : l.warnings) y += "# warning: " + w + "\n";
  y += "name: imported\ndescription: " + l.source + " on " + n(l.world) + " GPUs\nmodel:\n";
  std::istringstream model(to_yaml(l.model));
  for (std::string line; std::getline(model, line);) y += "  " + line + "\n";
  // Whole nodes when the world fills them; else one node of the world's size, as torchrun would run it.
  if (l.world % gpus_per_node == 0)
    y += "cluster: {from: " + cluster + ", nodes: " + n(l.world / gpus_per_node) + "}\n";
  else
    y += "cluster: {from: " + cluster + ", pools: {" + pool + ": {nodes: 1, gpus_per_node: " + n(l.world) +
         "}}}  # " + n(l.world) + " GPUs do not fill nodes of " + n(gpus_per_node) + "\n";
  y += "training:\n  global_batch: " + n(t.global_batch) + "\n  seq_len: " + n(t.seq_len) +
       "\n  precision: " + enum_name(t.precision, kPrecisionNames) +
       "\n  optimizer: " + enum_name(t.optimizer, kOptimizerNames) +
       "\n  attention: " + enum_name(t.attention, kAttentionNames) + "\n";
  if (t.grad_reduce) y += "  grad_reduce: " + enum_name(*t.grad_reduce, kGradReduceNames) + "\n";
  if (t.grad_accumulation != GradAccumulation::InPlace)
    y += "  grad_accumulation: " + enum_name(t.grad_accumulation, kGradAccumulationNames) + "\n";
  if (t.fp8_param_gather) y += "  fp8_param_gather: true\n";
  if (t.fp8_recipe != Fp8Recipe::TeDelayed)
    y += "  fp8_recipe: " + enum_name(t.fp8_recipe, kFp8RecipeNames) + "\n";
  if (t.moe_dispatcher != MoeDispatcher::AllToAll)
    y += "  moe_dispatcher: " + enum_name(t.moe_dispatcher, kMoeDispatcherNames) + "\n";
  if (t.cross_entropy != CrossEntropy::Unfused)
    y += "  cross_entropy: " + enum_name(t.cross_entropy, kCrossEntropyNames) + "\n";
  if (t.launch_blocking) y += "  launch_blocking: true\n";
  if (t.dp_buckets != DpBuckets::EveryStage)
    y += "  dp_buckets: " + enum_name(t.dp_buckets, kDpBucketsNames) + "\n";
  if (p.cp > 1) y += "  cp_attention: " + enum_name(t.cp_attention, kCpAttentionNames) + "\n";
  if (t.tp_overlap != TpOverlap::AsyncTp)
    y += "  tp_overlap: " + enum_name(t.tp_overlap, kTpOverlapNames) + "\n";
  if (t.steps) y += "  steps: " + n(*t.steps) + "\n";
  y +=
      "plan:\n  tp: " + n(p.tp) + "\n  pp: " + n(p.pp) + "\n  cp: " + n(p.cp) + "\n  ep: " + n(p.ep) +
      (p.expert_tp > 0 ? "\n  expert_tp: " + n(p.expert_tp) : std::string()) + "\n  dp: " + n(p.dp) +
      "\n  order: " + p.order + "\n  micro_batch: " + n(p.micro_batch) +
      "\n  schedule: " + enum_name(p.schedule, kScheduleNames) +
      "\n  virtual_stages: " + n(p.virtual_stages) +
      "\n  recompute: " + enum_name(p.stages.front().recompute, kRecomputeNames) +
      (p.stages.front().recompute_modules != RecomputeModules{}
           ? "\n  recompute_modules: [" + p.stages.front().recompute_modules.names() + "]"
           : std::string()) +
      (p.stages.front().recompute_layers > 0 ? "\n  recompute_layers: " + n(p.stages.front().recompute_layers)
                                             : std::string()) +
      "\n  sequence_parallel: " + b(p.sequence_parallel) + "\n  zero: " + n(p.zero) +
      (p.dp_replicate > 1 ? "\n  dp_replicate: " + n(p.dp_replicate) : std::string()) +
      "\n  offload: {optimizer: " + b(p.offload_optimizer) + ", activations: " + b(p.offload_activations) +
      "}\n  bucket_size: " + n(static_cast<long long>(p.bucket_size.value())) + "B" +
      "\n  overlap: {dp: " + b(p.overlap_dp) + ", tp: " + b(p.overlap_tp) + ", pp: " + b(p.overlap_pp) +
      (p.overlap_param_gather ? ", param_gather: true" : "") + (p.overlap_ep ? ", ep: true" : "") + "}\n";
  if (l.uneven_stages) {
    y += "  stages:\n";
    for (const auto& st : p.stages)
      y += "    - {layers: [" + n(st.layer_begin) + ", " + n(st.layer_end) +
           "], recompute: " + enum_name(st.recompute, kRecomputeNames) +
           (st.recompute_layers > 0 ? ", recompute_layers: " + n(st.recompute_layers) : std::string()) +
           "}\n";
  }
  return y;
}

}  // namespace paratwin
