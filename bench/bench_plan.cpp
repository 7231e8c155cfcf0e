// Evaluates the Megatron-LM GPT family with the plans of Narayanan et al. 2021 (Table 1) on
// dgx-a100-80g, every catalog scenario with a fixed plan, and the 16,384-GPU Program size: predicted
// iteration time, model TFLOP/s per GPU, MFU and memory, and the wall time to lower and evaluate.
// The published throughput is printed beside the prediction for reference only; nothing is fitted to it.
#include <chrono>
#include <cstdio>
#include <string>

#include "plan/analytic/evaluate.hpp"
#include "plan/ir/program.hpp"
#include "plan/report/report.hpp"
#include "plan/spec/jobs.hpp"
#include "source_tree.hpp"

using namespace paratwin;

namespace {

struct Timed {
  Report report;
  size_t tasks = 0;
  double lower_ms = 0, evaluate_ms = 0;
};

Timed evaluate_scenario(const ScenarioSpec& s) {
  const Plan plan = complete_plan(s);
  if (auto problems = verify(plan, s.model, s.cluster, s.training); !problems.empty())
    throw InputError(s.document.location, problems.front());
  using clock = std::chrono::steady_clock;
  Timed t;
  const auto t0 = clock::now();
  const Program program = lower(plan, s.model, s.cluster, s.training);
  const auto t1 = clock::now();
  const Evaluation ev = evaluate(program, s.cluster, s.training);
  const auto t2 = clock::now();
  t.report = make_report(s.name, program, ev);
  t.tasks = program.task_count();
  t.lower_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  t.evaluate_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  return t;
}

void row(const char* name, const std::string& plan, const Timed& t, const char* published) {
  const Metrics& m = t.report.metrics;
  std::printf("| %-22s | %-30s | %8.2f | %6.1f | %5.1f%% | %6.1f / %.0f | %7zu | %7.1f | %s |\n", name,
              plan.c_str(), m.iteration_time_s, m.model_tflops_per_gpu, 100 * m.mfu, m.peak_memory_gib,
              m.memory_capacity_gib, t.tasks, t.lower_ms + t.evaluate_ms, published);
}

const char* kHeader = "| %-22s | %-30s | %8s | %6s | %6s | %12s | %7s | %7s | %s |\n";

}  // namespace

int main() {
  const Catalog catalog(paratwin_test::source_dir());
  std::printf("## Megatron-LM GPT family on dgx-a100-80g, plans of Narayanan et al. 2021 Table 1\n\n");
  std::printf("micro-batch 1, 1F1B, full recompute, no sequence parallelism, ZeRO 0 (as in 2021).\n\n");
  std::printf(kHeader, "model", "plan (tp x pp x dp, batch)", "iter s", "TF/GPU", "MFU", "mem GiB", "tasks",
              "eval ms", "published TF/GPU");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  struct Config {
    const char* model;
    int tp, pp, gpus, batch;
    const char* published;
  };
  const Config family[] = {
      {"gpt3-1.7b", 1, 1, 32, 512, "137"},       {"gpt3-3.6b", 2, 1, 64, 512, "138"},
      {"gpt3-7.5b", 4, 1, 128, 512, "142"},      {"gpt3-18.4b", 8, 1, 256, 1024, "135"},
      {"gpt3-39.1b", 8, 2, 512, 1536, "138"},    {"gpt3-76.1b", 8, 4, 1024, 1792, "140"},
      {"gpt3-145.6b", 8, 8, 1536, 2304, "148"},  {"gpt3-310.1b", 8, 16, 1920, 2160, "155"},
      {"gpt3-529.6b", 8, 35, 2520, 2520, "163"}, {"gpt3-1t", 8, 64, 3072, 3072, "163"}};
  for (const auto& c : family) {
    const int dp = c.gpus / (c.tp * c.pp);
    const std::string yaml = std::string("name: ") + c.model + "\nmodel: " + c.model +
                             "\ncluster: {from: dgx-a100-80g, nodes: " + std::to_string(c.gpus / 8) +
                             "}\ntraining: {global_batch: " + std::to_string(c.batch) +
                             "}\nplan: {tp: " + std::to_string(c.tp) + ", pp: " + std::to_string(c.pp) +
                             ", dp: " + std::to_string(dp) + ", micro_batch: 1, recompute: full}\n";
    const Timed t = evaluate_scenario(load_scenario(parse_yaml(yaml, c.model), {}, catalog));
    const std::string plan = std::to_string(c.tp) + " x " + std::to_string(c.pp) + " x " +
                             std::to_string(dp) + ", " + std::to_string(c.batch);
    row(c.model, plan, t, c.published);
  }

  std::printf("\n## Catalog scenarios with a fixed plan\n\n");
  std::printf(kHeader, "scenario", "plan (tp x pp x dp, batch)", "iter s", "TF/GPU", "MFU", "mem GiB",
              "tasks", "eval ms", "");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---|\n");
  for (const auto& e : catalog.list(CatalogKind::Scenario)) {
    if (holds_jobs(load_yaml_file(e.path))) continue;  // several jobs (docs/multi-job.md)
    const ScenarioSpec s = load_scenario(e.path, {}, catalog);
    if (!s.plan.tp || !s.plan.pp || !s.plan.micro_batch) {
      std::printf(
          "| %-22s | plan: auto (optimizer)         |          |        |        |              |         "
          "|         | |\n",
          e.name.c_str());
      continue;
    }
    const Timed t = evaluate_scenario(s);
    const Plan& p = t.report.plan;
    const std::string plan = std::to_string(p.tp) + " x " + std::to_string(p.pp) + " x " +
                             std::to_string(p.dp) + ", " + std::to_string(s.training.global_batch);
    row(e.name.c_str(), plan, t, "");
  }

  std::printf("\n## Program size at 16,384 GPUs\n\n");
  const ScenarioSpec big = load_scenario(
      parse_yaml("name: llama3-405b-16k\nmodel: llama3-405b\ncluster: h100-roce\n"
                 "training: {global_batch: 2048, seq_len: 8192}\n"
                 "plan: {tp: 8, pp: 16, dp: 128, micro_batch: 1, schedule: interleaved, virtual_stages: 2,"
                 " recompute: selective, sequence_parallel: true, zero: 1}\n",
                 "llama3-405b-16k"),
      {}, catalog);
  const Timed t = evaluate_scenario(big);
  std::printf(
      "llama3-405b on 16,384 H100 (tp 8 x pp 16 x dp 128, 128 micro-batches, interleaved v=2): %zu tasks "
      "in 16 roles for 16,384 ranks; lowering %.1f ms, evaluation %.1f ms; predicted %.2f s per iteration, "
      "MFU %.1f%%, peak memory %.1f GiB.\n",
      t.tasks, t.lower_ms, t.evaluate_ms, t.report.metrics.iteration_time_s, 100 * t.report.metrics.mfu,
      t.report.metrics.peak_memory_gib);
  return 0;
}
