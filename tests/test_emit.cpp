// The Megatron-LM and DeepSpeed renderings of plans: golden texts for a fixed set of plans, and the
// arithmetic the frameworks assert (batch = micro-batch x accumulation x dp, layers per stage,
// divisibility), read back from the emitted text, so that a change cannot break what bench/emit_check.sh
// verified against the frameworks' own code. PARATWIN_UPDATE_GOLDEN=1 rewrites the golden files.
#define BOOST_TEST_MODULE emit
#include <boost/test/unit_test.hpp>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "emit_cases.hpp"
#include "plan/cost/memory.hpp"
#include "plan/report/emit.hpp"
#include "plan/report/import_deepspeed.hpp"
#include "plan/report/import_megatron.hpp"
#include "source_tree.hpp"

using namespace paratwin;
using namespace paratwin_test;

namespace {

// The golden plans and the others, each loaded once.
struct Loaded {
  std::string name;
  ScenarioSpec scenario;
  Plan plan;
};

const std::vector<Loaded>& every_plan() {
  static const std::vector<Loaded> all = [] {
    std::vector<Loaded> out;
    for (const auto* cases : {&kGolden, &kMore})
      for (const Case& c : *cases) {
        ScenarioSpec s = load(c);
        Plan p = complete_plan(s);
        out.push_back({c.name, std::move(s), std::move(p)});
      }
    return out;
  }();
  return all;
}

// The launch read back: environment, world size and pretrain_gpt.py's arguments (flag -> value).
struct Launch {
  std::map<std::string, std::string> env, args;
  long long world = 0;
  long long arg(const std::string& flag, long long otherwise) const {
    const auto it = args.find(flag);
    return it == args.end() ? otherwise : std::stoll(it->second);
  }
};

Launch read_launch(const std::string& text) {
  Launch l;
  std::istringstream lines(text);
  std::string line, flag;
  long long nodes = 0, procs = 0;
  bool in_args = false;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string w;
    words >> w;
    if (w == "export") {
      words >> w;
      l.env[w.substr(0, w.find('='))] = w.substr(w.find('=') + 1);
      continue;
    }
    for (; words; words >> w) {
      if (w == "\\" || w.empty()) continue;
      if (w == "--nnodes") words >> nodes;
      if (w == "--nproc-per-node") words >> procs;
      if (w == "pretrain_gpt.py") in_args = true;
      if (!in_args) continue;
      if (w.rfind("--", 0) == 0) {
        flag = w.substr(2);
        l.args[flag] = "";
      } else if (!flag.empty() && w != "pretrain_gpt.py") {
        l.args[flag] = w.front() == '"' ? w.substr(1, w.size() - 2) : w;
      }
      w.clear();
    }
  }
  l.world = nodes * procs;
  return l;
}

// Layers per chunk of a Megatron layout ("E,t*11|t*11,L"), read independently of the emitter.
std::vector<int> layout_layers(std::string layout) {
  std::vector<int> out;
  std::istringstream chunks(layout);
  std::string chunk;
  while (std::getline(chunks, chunk, '|')) {
    int layers = 0;
    for (size_t i = 0; i < chunk.size(); ++i)
      if (chunk[i] == 't') layers += chunk.compare(i + 1, 1, "*") == 0 ? std::stoi(chunk.substr(i + 2)) : 1;
    out.push_back(layers);
  }
  return out;
}

std::string golden(const std::string& file, const std::string& text) {
  const char* update_golden = std::getenv("PARATWIN_UPDATE_GOLDEN");
  const std::string path = paratwin_test::source_dir() + "/tests/golden/emit/" + file;
  if (update_golden && *update_golden && std::string(update_golden) != "0") std::ofstream(path) << text;
  std::ifstream in(path);
  std::stringstream expected;
  expected << in.rdbuf();
  return expected.str();
}

// What `paratwin plan --emit deepspeed` says: the JSON and its notes, or why DeepSpeed cannot run it.
std::string deepspeed_text(const Plan& plan, const ScenarioSpec& s) {
  try {
    const EmittedConfig ds = deepspeed_config(plan, s);
    std::string text = ds.text;
    for (const auto& note : ds.notes) text += "note: " + note + "\n";
    return text;
  } catch (const InputError& e) {
    std::string why = e.what();  // the scenario's path, made independent of the checkout
    const std::string source = paratwin_test::source_dir();
    if (why.rfind(source, 0) == 0) why = "<source>" + why.substr(source.size());
    return "refused: " + why + "\n";
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(emitted_texts_match_golden_files) {
  for (const Case& c : kGolden) {
    const ScenarioSpec s = load(c);
    const Plan plan = complete_plan(s);
    BOOST_TEST_CONTEXT(c.name) {
      const std::string megatron = megatron_launch(plan, s).text;
      BOOST_TEST(megatron == golden(c.name + ".megatron.sh", megatron));
      const std::string deepspeed = deepspeed_text(plan, s);
      BOOST_TEST(deepspeed == golden(c.name + ".deepspeed.txt", deepspeed));
    }
  }
}

BOOST_AUTO_TEST_CASE(megatron_launches_hold_the_arithmetic_megatron_asserts) {
  for (const auto& [name, s, p] : every_plan()) {
    BOOST_TEST_CONTEXT(name) {
      const Launch l = read_launch(megatron_launch(p, s).text);
      const long long tp = l.arg("tensor-model-parallel-size", 1),
                      pp = l.arg("pipeline-model-parallel-size", 1), cp = l.arg("context-parallel-size", 1),
                      ep = l.arg("expert-model-parallel-size", 1);
      // World size: divisible by the model-parallel product; what is left is the plan's dp.
      BOOST_REQUIRE(l.world % (tp * pp * cp) == 0);
      const long long dp = l.world / (tp * pp * cp);
      BOOST_TEST(dp == p.dp);
      BOOST_TEST(tp == p.tp);
      BOOST_TEST(pp == p.pp);
      BOOST_TEST(cp == p.cp);
      BOOST_TEST(ep == p.ep);
      // Batch: global = micro-batch x micro-batches x dp.
      const long long global = l.arg("global-batch-size", 0), micro = l.arg("micro-batch-size", 0);
      BOOST_TEST(global % (micro * dp) == 0);
      BOOST_TEST(global / (micro * dp) == p.num_microbatches);
      // Shape: heads and query groups over tp, experts over ep, the sequence over 2 cp.
      BOOST_TEST(l.arg("num-attention-heads", 0) % tp == 0);
      BOOST_TEST(l.arg("num-query-groups", l.arg("num-attention-heads", 0)) % tp == 0);
      if (ep > 1) BOOST_TEST(l.arg("num-experts", 0) % ep == 0);
      if (cp > 1) BOOST_TEST(l.arg("seq-length", 0) % (2 * cp) == 0);
      BOOST_TEST(l.arg("max-position-embeddings", 0) >= l.arg("seq-length", 0));
      // Layers per chunk: the layout's, or Megatron's even split (which must divide).
      const long long layers = l.arg("num-layers", 0);
      std::vector<int> chunks;
      if (l.args.count("pipeline-model-parallel-layout")) {
        chunks = layout_layers(l.args.at("pipeline-model-parallel-layout"));
        BOOST_TEST(static_cast<long long>(chunks.size()) % pp == 0);
      } else {
        const long long per_chunk = l.arg("num-layers-per-virtual-pipeline-stage", layers / pp);
        BOOST_TEST(layers % pp == 0);
        BOOST_TEST((layers / pp) % per_chunk == 0);
        chunks.assign(layers / per_chunk, static_cast<int>(per_chunk));
      }
      BOOST_TEST(std::accumulate(chunks.begin(), chunks.end(), 0LL) == layers);
      BOOST_TEST(chunks == emit_detail::chunk_layers(p));
      // Environment: CUDA_DEVICE_MAX_CONNECTIONS=1 for tp or cp > 1, and never beside Megatron-FSDP.
      const bool fsdp = l.args.count("use-megatron-fsdp") > 0;
      BOOST_TEST(fsdp == (p.zero >= 2));
      BOOST_TEST(l.env.count("CUDA_DEVICE_MAX_CONNECTIONS") == ((tp > 1 || cp > 1) && !fsdp ? 1u : 0u));
      if (fsdp)
        BOOST_TEST(l.args.at("data-parallel-sharding-strategy") ==
                   (p.zero == 2 ? "optim_grads" : "optim_grads_params"));
      BOOST_TEST(l.args.count("use-distributed-optimizer") == (p.zero >= 1 ? 1u : 0u));
    }
  }
}

BOOST_AUTO_TEST_CASE(deepspeed_configs_hold_the_arithmetic_deepspeed_asserts_or_are_refused) {
  for (const auto& [name, s, p] : every_plan()) {
    BOOST_TEST_CONTEXT(name) {
      const bool refused = (p.pp > 1 && p.zero >= 2) || (s.model.moe && p.zero == 3);
      BOOST_TEST(deepspeed_refusals(p, s).empty() == !refused);
      if (refused) {
        BOOST_CHECK_THROW(deepspeed_config(p, s), InputError);
        continue;
      }
      const auto ds = nlohmann::json::parse(deepspeed_config(p, s).text);
      // DeepSpeedConfig: train_batch_size = micro x accumulation x data-parallel world size.
      BOOST_TEST(ds["train_batch_size"].get<long long>() ==
                 ds["train_micro_batch_size_per_gpu"].get<long long>() *
                     ds["gradient_accumulation_steps"].get<long long>() * p.dp);
      BOOST_TEST(ds["gradient_accumulation_steps"].get<int>() == p.num_microbatches);
      BOOST_TEST(ds["zero_optimization"]["stage"].get<int>() == p.zero);
      // checkpointing.configure: contiguous buffers need partitioned activations and a checkpoint count;
      // CPU checkpoints need partitioned activations.
      const auto& ac = ds["activation_checkpointing"];
      if (ac["contiguous_memory_optimization"].get<bool>()) {
        BOOST_TEST(ac["partition_activations"].get<bool>());
        BOOST_TEST(ac.contains("number_checkpoints"));
      }
      if (ac.value("cpu_checkpointing", false)) BOOST_TEST(ac["partition_activations"].get<bool>());
      BOOST_TEST(ds.value("tensor_parallel", nlohmann::json::object()).value("autotp_size", 1) == p.tp);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_copied_gradient_accumulation_asks_deepspeed_for_its_bf16_optimizer) {
  // training.grad_accumulation copy is DeepSpeed's BF16_Optimizer, which ZeRO 1 runs only when the
  // accumulation is declared fp32: the config says so, and imports back as a copy.
  const ScenarioSpec s =
      load(Case{"", "quickstart",
                with(kLlama, {"plan.zero=1", "plan.tp=1", "plan.pp=1", "plan.dp=32",
                              "training.grad_reduce=fp32", "training.grad_accumulation=copy"})});
  const Plan p = complete_plan(s);
  const auto ds = nlohmann::json::parse(deepspeed_config(p, s).text);
  BOOST_TEST(ds["data_types"]["grad_accum_dtype"].get<std::string>() == "fp32");
  const ImportedLaunch back = import_deepspeed(deepspeed_config(p, s).text, "ds.json", s.model);
  BOOST_TEST((back.training.grad_accumulation == GradAccumulation::Copy));
  BOOST_TEST(cost::gradient_copy_bytes(back.training, back.plan.zero) == 2);
}

BOOST_AUTO_TEST_CASE(an_unfused_gradient_accumulation_emits_megatrons_flag_and_imports_back) {
  const ScenarioSpec s = load(
      Case{"", "quickstart",
           with(kLlama, {"plan.zero=1", "training.grad_reduce=fp32", "training.grad_accumulation=unfused"})});
  const Plan p = complete_plan(s);
  const std::string text = megatron_launch(p, s).text;
  BOOST_TEST(text.find("--no-gradient-accumulation-fusion") != std::string::npos);
  const ImportedLaunch back = import_megatron(launch_script_words(text));
  BOOST_TEST((back.training.grad_accumulation == GradAccumulation::Unfused));
}

BOOST_AUTO_TEST_CASE(deepspeed_refusals_name_the_combination_and_where_it_is_written) {
  const Case pipeline_zero2{"", "quickstart",
                            with(kLlama, {"plan.zero=2", "plan.tp=2", "plan.pp=4", "plan.dp=4"})};
  const ScenarioSpec s = load(pipeline_zero2);
  try {
    deepspeed_config(complete_plan(s), s);
    BOOST_FAIL("DeepSpeed cannot run ZeRO 2 with its pipeline engine");
  } catch (const InputError& e) {
    const std::string m = e.what();
    BOOST_TEST(m.find("quickstart.yaml") != std::string::npos);
    BOOST_TEST(m.find("ZeRO 2 with pipeline parallelism (pp=4)") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(megatron_tp_comm_overlap_says_it_runs_userbuffers_not_asynctp) {
  // Megatron-LM's --tp-comm-overlap is Transformer Engine's userbuffers: a plan costed as AsyncTP gets a
  // note; one costed as userbuffers does not.
  for (const std::string kind : {"async_tp", "userbuffers"}) {
    const ScenarioSpec s = load({"", "quickstart", {"plan.overlap.tp=true", "training.tp_overlap=" + kind}});
    const std::string text = megatron_launch(complete_plan(s), s).text;
    BOOST_TEST_CONTEXT(kind) {
      BOOST_TEST(text.find("--tp-comm-overlap") != std::string::npos);
      BOOST_TEST((text.find("not PyTorch's AsyncTP") != std::string::npos) == (kind == "async_tp"));
    }
  }
}

BOOST_AUTO_TEST_CASE(megatron_attention_backend_follows_the_scenarios_attention_kernel) {
  const std::map<std::string, std::string> want = {
      {"flash", ""}, {"flash2", "flash"}, {"flash3", "flash"}, {"triton", ""}, {"unfused", "unfused"}};
  for (const auto& [kind, backend] : want) {
    const ScenarioSpec s = load({"", "quickstart", {"training.attention=" + kind}});
    const std::string text = megatron_launch(complete_plan(s), s).text;
    BOOST_TEST_CONTEXT(kind) {
      if (backend.empty())
        BOOST_TEST(text.find("--attention-backend") == std::string::npos);
      else
        BOOST_TEST(text.find("--attention-backend " + backend + " ") != std::string::npos);
      // Megatron-LM has no Triton FlashAttention: its default runs, and the notes say so.
      BOOST_TEST((text.find("Megatron-LM has no Triton FlashAttention backend") != std::string::npos) ==
                 (kind == "triton"));
    }
  }
}
