// End-to-end tests of the `paratwin` command: exit statuses, messages, and the malformed-input corpus.
//
// Every file in tests/malformed/ is one bad input. Its header comments say what must happen:
//   # expect: {file}:4:3: error: unknown key 'hiden' in model — did you mean 'hidden'?
//   # args: --set plan.tp=3          (optional extra arguments to `paratwin validate`)
//   # command: sweep                 (optional: the subcommand to run instead of validate)
// Each `expect` line must appear verbatim among the lines printed on standard error ({file} is the
// input's path), and the command must exit with status 2.
#define BOOST_TEST_MODULE cli

#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "paratwin_process.hpp"
#include "source_tree.hpp"

namespace fs = std::filesystem;
using namespace paratwin_test;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool has_line(const std::string& text, const std::string& line) {
  for (const auto& l : lines_of(text))
    if (l == line) return true;
  return false;
}

std::string header_value(const std::string& line, const std::string& key) {
  const std::string prefix = "# " + key + ":";
  if (line.rfind(prefix, 0) != 0) return "";
  std::string v = line.substr(prefix.size());
  while (!v.empty() && v.front() == ' ') v.erase(0, 1);
  return v;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
    s.replace(pos, from.size(), to);
  return s;
}

const std::string kSource = paratwin_test::source_dir();

}  // namespace

BOOST_AUTO_TEST_CASE(every_catalog_file_validates) {
  Result r = paratwin("validate " + kSource + "/models/*.yaml " + kSource + "/topologies/*.yaml " + kSource +
                      "/scenarios/*.yaml");
  BOOST_TEST_INFO(r.err);
  BOOST_TEST(r.status == 0);
  BOOST_TEST(r.out.find("FAIL") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(describe_prints_model_and_cluster_summary) {
  Result r = paratwin("describe " + kSource + "/scenarios/quickstart.yaml");
  BOOST_TEST(r.status == 0);
  BOOST_TEST(r.out.find("gpt3-1.7b: 1.65B parameters") != std::string::npos);
  BOOST_TEST(r.out.find("dgx-a100-80g: 32 GPUs") != std::string::npos);
  BOOST_TEST(r.out.find("9.98 PFLOP/s") != std::string::npos);  // 32 x 312 TFLOP/s
}

BOOST_AUTO_TEST_CASE(set_resizes_the_cluster_with_the_same_validation_as_the_file) {
  Result ok =
      paratwin("describe " + kSource + "/scenarios/quickstart.yaml --set cluster.nodes=8 --set plan.dp=32");
  BOOST_TEST_INFO(ok.err);
  BOOST_TEST(ok.status == 0);
  BOOST_TEST(ok.out.find("64 GPUs") != std::string::npos);
  Result bad = paratwin("describe " + kSource + "/scenarios/quickstart.yaml --set cluster.nodes=many");
  BOOST_TEST(bad.status == 2);
  BOOST_TEST(has_line(bad.err,
                      "<--set cluster.nodes=many>:1:15: error: expected an integer for cluster.nodes, "
                      "got 'many'"));
}

BOOST_AUTO_TEST_CASE(describe_writes_json_whole_or_not_at_all) {
  const fs::path dir = fs::temp_directory_path() / ("paratwin_json_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string json = (dir / "summary.json").string();
  Result r = paratwin("describe " + kSource + "/scenarios/quickstart.yaml --json " + json);
  BOOST_TEST(r.status == 0);
  std::ifstream in(json);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BOOST_TEST(text.find("\"gpus\": 32") != std::string::npos);
  // A failing run must not touch an existing output file.
  Result bad = paratwin("describe " + kSource + "/scenarios/quickstart.yaml --set plan.tp=3 --json " + json);
  BOOST_TEST(bad.status == 2);
  std::ifstream again(json);
  std::string after((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>());
  BOOST_TEST(after == text);
  int leftovers = 0;
  for (const auto& f : fs::directory_iterator(dir)) leftovers += f.path().filename() != "summary.json";
  BOOST_TEST(leftovers == 0);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(plan_reports_the_architecture_keys_and_writes_trace_and_plan) {
  const fs::path dir = fs::temp_directory_path() / ("paratwin_plan_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string json = (dir / "report.json").string(), trace = (dir / "trace.json").string(),
                    plan = (dir / "plan.yaml").string();
  Result r = paratwin("plan " + kSource + "/scenarios/gpt3-175b-1024-a100.yaml --json " + json + " --trace " +
                      trace + " -o " + plan);
  BOOST_TEST_INFO(r.err);
  BOOST_REQUIRE(r.status == 0);
  BOOST_TEST(r.out.find("iteration time") != std::string::npos);
  auto slurp = [](const std::string& p) {
    std::ifstream in(p);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string report = slurp(json);
  for (const char* key :
       {"\"scenario\"", "\"plan\"", "\"metrics\"", "\"iteration_time_s\"", "\"tokens_per_s\"",
        "\"model_tflops_per_gpu\"", "\"mfu\"", "\"hfu\"", "\"peak_memory_gib\"", "\"fits\"", "\"breakdown\"",
        "\"bubble_s\"", "\"exposed_comm_s\"", "\"memory\"", "\"activations_gib\""})
    BOOST_TEST(report.find(key) != std::string::npos, key);
  const std::string events = slurp(trace);
  BOOST_TEST(events.find("\"traceEvents\"") != std::string::npos);
  BOOST_TEST(events.find("\"stage 7 (dgx, 128 ranks)\"") != std::string::npos);
  // The written plan evaluates to the same report.
  Result again =
      paratwin("plan " + kSource + "/scenarios/gpt3-175b-1024-a100.yaml --plan " + plan + " --json -");
  BOOST_TEST(again.status == 0);
  BOOST_TEST(again.out.find("\"iteration_time_s\"") != std::string::npos);
  const auto time_of = [](const std::string& text) {
    const size_t k = text.find("\"iteration_time_s\": ");
    return text.substr(k, text.find(',', k) - k);
  };
  BOOST_TEST(time_of(again.out) == time_of(report));
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(plan_point_evaluates_a_named_sweep_entry_with_set_after_its_settings) {
  // A run of the validation set by name, as bench_fidelity's JSON says to replay it.
  const std::string file = "plan " + kSource + "/bench/fidelity/torchtitan-h100.yaml";
  const auto time_of = [](const std::string& text) {
    const size_t k = text.find("\"iteration_time_s\": ");
    return text.substr(k, text.find(',', k) - k);
  };
  const Result sync = paratwin(file + " --point TT-11 --json -");
  BOOST_TEST_INFO(sync.err);
  BOOST_REQUIRE(sync.status == 0);
  BOOST_TEST(sync.out.find("\"scenario\": \"TT-11\"") != std::string::npos);
  // TT-12 is TT-11 with AsyncTP: the same point with --set after its settings evaluates to it.
  const Result async = paratwin(file + " --point TT-12 --json -");
  const Result overridden = paratwin(file + " --point TT-11 --set plan.overlap.tp=true --json -");
  BOOST_REQUIRE(async.status == 0);
  BOOST_REQUIRE(overridden.status == 0);
  BOOST_TEST(time_of(overridden.out) == time_of(async.out));
  BOOST_TEST(time_of(sync.out) != time_of(async.out));
  // A name that is not there: exit 2 at the sweep section, with the nearest name.
  const Result typo = paratwin(file + " --point tt-11");
  BOOST_TEST(typo.status == 2);
  BOOST_TEST(typo.err.find("torchtitan-h100.yaml:") != std::string::npos);
  BOOST_TEST(typo.err.find("did you mean 'TT-11'") != std::string::npos, typo.err);
}

BOOST_AUTO_TEST_CASE(emit_prints_framework_configs_and_exits_2_for_a_plan_deepspeed_cannot_run) {
  const std::string quickstart = "plan " + kSource + "/scenarios/quickstart.yaml";
  Result megatron = paratwin(quickstart + " --emit megatron");
  BOOST_TEST(megatron.status == 0);
  BOOST_TEST(megatron.out.find("export CUDA_DEVICE_MAX_CONNECTIONS=1\ntorchrun --nnodes 4 --nproc-per-node 8 "
                               "pretrain_gpt.py") != std::string::npos);
  Result deepspeed = paratwin(quickstart + " --emit deepspeed");
  BOOST_TEST(deepspeed.status == 0);
  BOOST_TEST(nlohmann::json::parse(deepspeed.out)["train_batch_size"] == 512);
  BOOST_TEST(deepspeed.err.find("note: not in the DeepSpeed config: sequence_parallel") != std::string::npos);
  Result refused =
      paratwin(quickstart + " --set plan.zero=3 --set plan.pp=2 --set plan.dp=8 --emit deepspeed");
  BOOST_TEST(refused.status == 2);
  BOOST_TEST(refused.out.empty());
  BOOST_TEST(refused.err.find("quickstart.yaml") != std::string::npos);
  BOOST_TEST(refused.err.find("DeepSpeed cannot run this plan: ZeRO 3 with pipeline parallelism (pp=2)") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(plan_that_cannot_run_exits_2_with_every_reason) {
  const fs::path dir = fs::temp_directory_path() / ("paratwin_badplan_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string plan = (dir / "plan.yaml").string();
  Result ok = paratwin("plan " + kSource + "/scenarios/quickstart.yaml --emit plan");
  BOOST_REQUIRE(ok.status == 0);
  std::string text = ok.out;
  text.replace(text.find("num_microbatches: 8"), 19, "num_microbatches: 5");
  text.replace(text.find("pool: dgx"), 9, "pool: dgz");
  std::ofstream(plan) << text;
  Result bad = paratwin("plan " + kSource + "/scenarios/quickstart.yaml --plan " + plan);
  BOOST_TEST(bad.status == 2);
  BOOST_TEST(
      bad.err.find("the plan cannot run: dp x micro_batch x num_microbatches = 16 x 4 x 5 = 320 sequences, "
                   "but the global batch is 512") != std::string::npos);
  BOOST_TEST(bad.err.find("the plan cannot run: stage 0 runs on unknown pool 'dgz'") != std::string::npos);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(list_shows_each_part_of_the_catalog) {
  Result r = paratwin("list models");
  BOOST_TEST(r.status == 0);
  for (const char* name : {"gpt3-175b", "llama3-405b", "mixtral-8x7b", "tiny-gpt", "gpt2-124m"})
    BOOST_TEST(r.out.find(name) != std::string::npos, name);
  Result t = paratwin("list topologies");
  for (const char* name : {"dgx-a100-80g", "dgx-h100", "dgx-h200", "h100-roce", "a100-pcie-ethernet",
                           "hetero-h100-a100", "hetero-a100-v100", "local-cpu"})
    BOOST_TEST(t.out.find(name) != std::string::npos, name);
  BOOST_TEST(paratwin("list widgets").status == 2);
}

BOOST_AUTO_TEST_CASE(usage_errors_exit_with_status_2) {
  BOOST_TEST(paratwin("frobnicate").status == 2);
  BOOST_TEST(paratwin("validate").status == 2);
  BOOST_TEST(paratwin("validate /nonexistent/file.yaml").status == 2);
  BOOST_TEST(paratwin("describe " + kSource + "/scenarios/quickstart.yaml --set noequals").status == 2);
}

BOOST_AUTO_TEST_CASE(every_malformed_input_exits_2_with_its_expected_message) {
  std::vector<fs::path> files;
  for (const auto& f : fs::directory_iterator(fs::path(paratwin_test::source_dir()) / "tests" / "malformed"))
    if (f.is_regular_file() && f.path().extension() == ".yaml") files.push_back(f.path());
  std::sort(files.begin(), files.end());
  BOOST_TEST(files.size() >= 40u);
  for (const auto& file : files) {
    std::ifstream in(file);
    std::vector<std::string> expects;
    std::string args, command = "validate";
    for (std::string line; std::getline(in, line) && line.rfind("#", 0) == 0;) {
      if (auto e = header_value(line, "expect"); !e.empty())
        expects.push_back(replace_all(e, "{file}", file.string()));
      if (auto a = header_value(line, "args"); !a.empty()) args = a;
      if (auto c = header_value(line, "command"); !c.empty()) command = c;
    }
    BOOST_TEST_CONTEXT(file.filename().string()) {
      BOOST_TEST(!expects.empty(), "no '# expect:' header");
      Result r = paratwin(command + " " + file.string() + (args.empty() ? "" : " " + args));
      BOOST_TEST(r.status == 2);
      for (const auto& e : expects)
        BOOST_TEST(has_line(r.err, e), "missing line: " << e << "\ngot:\n" << r.err);
    }
  }
}
