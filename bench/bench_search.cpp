// Search time of the optimizer on the three cases, and on heterogeneous clusters the chosen
// plan against the best plan that treats every GPU as the slowest type with layers split evenly.
#include <chrono>
#include <cstdio>
#include <ctime>

#include <malloc.h>

#include "catalog_scenario.hpp"
#include "plan/analytic/evaluate.hpp"
#include "plan/search/optimizer.hpp"

using namespace paratwin;
using paratwin_test::catalog;

namespace {

ScenarioSpec load(const std::string& yaml) {
  return load_scenario(parse_yaml(yaml, "bench"), {}, catalog());
}

// With `plans`, the top 5 plans in full after the row (YAML and iteration time to 9 digits), to check
// that a change to the search leaves its choices alone.
bool g_print_plans = false;

void time_search(const char* name, const std::string& yaml) {
  const ScenarioSpec s = load(yaml);
  const std::clock_t cpu0 = std::clock();
  const SearchResult r = search_plans(s, {5, false});
  const double cpu = double(std::clock() - cpu0) / CLOCKS_PER_SEC;
  if (g_print_plans)
    for (const Candidate& c : r.top)
      std::printf("%s# %.9g s/iter, objective %.9g\n%s\n", name, c.report.metrics.iteration_time_s,
                  c.objective, to_yaml(c.plan).c_str());
  const Plan& p = r.top.front().plan;
  std::printf(
      "| %-34s | %6d | %8ld | %7ld | %6ld | %6ld | %7.2f | %7.2f | %7.0f | tp %d pp %d dp %d mb %d %s v%d, "
      "%.2f "
      "s/iter |\n",
      name, s.cluster.gpus(), r.enumerated, r.refined, r.evaluated, r.dominated, r.seconds, cpu,
      r.evaluated / cpu, p.tp, p.pp, p.dp, p.micro_batch, enum_name(p.schedule, kScheduleNames).c_str(),
      p.virtual_stages, r.top.front().report.metrics.iteration_time_s);
  std::fflush(stdout);
}

// The best plan on a cluster where every pool has the slowest pool's device, with its layers split
// evenly, evaluated on the real cluster.
double slowest_even_baseline(const ScenarioSpec& real, const std::string& slow_device) {
  ScenarioSpec slow = real;
  for (auto& pool : slow.cluster.pools) pool.device = slow_device;
  const SearchResult r = search_plans(slow, {1, false});
  Plan plan = r.top.front().plan;
  const auto even = even_stages(real.model.layers, plan.chunks(), "", Recompute::None);
  for (size_t c = 0; c < plan.stages.size(); ++c) {
    plan.stages[c].layer_begin = even[c].layer_begin;
    plan.stages[c].layer_end = even[c].layer_end;
  }
  const auto problems = verify(plan, real.model, real.cluster, real.training);
  if (!problems.empty()) return -1;
  return evaluate(lower(plan, real.model, real.cluster, real.training), real.cluster, real.training)
      .iteration_time_s;
}

void hetero(const char* name, const std::string& yaml, const std::string& slow_device) {
  const ScenarioSpec s = load(yaml);
  const SearchResult r = search_plans(s, {1, false});
  const double chosen = r.top.front().report.metrics.iteration_time_s;
  const double baseline = slowest_even_baseline(s, slow_device);
  std::string layers;
  for (const auto& st : r.top.front().plan.stages)
    layers += (layers.empty() ? "" : " ") + st.pool + ":" + std::to_string(st.layer_end - st.layer_begin);
  std::printf("| %-30s | %8.2f s | %8.2f s | %5.2fx | %s |\n", name, chosen, baseline, baseline / chosen,
              layers.c_str());
  std::fflush(stdout);
}

// Every bound of the pruned search against the exact objective it bounds, over a grid of small
// scenarios: the exhaustive search evaluates every candidate and throws where a bound is above it.
// Too slow for `make test` (minutes); test_search keeps a few of these cases.
int check_bounds() {
  const std::vector<std::string> models = {
      "model: {name: dense, layers: 8, hidden: 1024, heads: 8, vocab: 4096, seq_len: 1024}\n",
      "model: {name: moe, layers: 4, hidden: 512, heads: 8, vocab: 4096, seq_len: 1024,\n"
      "        moe: {experts: 8, top_k: 2}}\n"};
  const std::vector<std::string> clusters = {
      "cluster: {from: dgx-a100-80g, nodes: 2}\n", "cluster: {from: a100-pcie-ethernet, nodes: 2}\n",
      "cluster: {from: a100-pcie-ethernet, nodes: 4}\n",
      "cluster: {from: hetero-h100-a100, pools: {h100: {nodes: 1}, a100: {nodes: 1}}}\n"};
  const std::vector<std::string> trainings = {
      "training: {global_batch: 32, seq_len: 1024}\n",
      "training: {global_batch: 32, seq_len: 1024, dp_buckets: first_stage}\n"};
  const std::vector<std::string> plans = {"plan: auto\n",
                                          "plan: {zero: 1, overlap: {dp: false}}\n",
                                          "plan: {zero: 1, bucket_size: 1MiB}\n",
                                          "plan: {zero: 1, overlap: {param_gather: true}}\n",
                                          "plan: {zero: 2}\n",
                                          "plan: {zero: 2, schedule: interleaved}\n",
                                          "plan: {zero: 3, reshard: after_forward}\n",
                                          "plan: {zero: 3, reshard: after_backward}\n",
                                          "plan: {zero: 3, reshard: after_step}\n",
                                          "plan: {zero: 3, recompute: full}\n",
                                          "plan: {zero: 1, recompute: selective, pp: 2}\n",
                                          "plan: {zero: 1, pp: 4, bucket_size: 1MiB}\n",
                                          "plan: {zero: 2, pp: 2, bucket_size: 1MiB}\n",
                                          "plan: {cp: 2}\n",
                                          "plan: {tp: 2, sequence_parallel: true, overlap: {tp: true}}\n",
                                          "plan: {zero: 1, offload: {optimizer: true}}\n",
                                          "plan: {zero: 3, dp_replicate: 2}\n",
                                          "plan: {zero: 3, dp_replicate: 2, offload: {optimizer: true}}\n",
                                          "plan: {zero: 3, dp_replicate: 2, reshard: after_step}\n"};
  int checked = 0, refused = 0, violations = 0;
  for (const std::string& model : models)
    for (const std::string& cluster : clusters)
      for (const std::string& training : trainings)
        for (const std::string& plan : plans) {
          const std::string yaml = model + cluster + training + plan;
          try {
            const SearchResult r = search_plans(load(yaml), {1, true});
            ++checked;
            std::printf("ok   %5ld evaluated  %s", r.evaluated, (cluster + training + plan).c_str());
          } catch (const std::logic_error& e) {
            ++violations;
            std::printf("BOUND ABOVE EXACT: %s\n%s\n", yaml.c_str(), e.what());
          } catch (const std::exception& e) {
            ++refused;  // a combination the language or the model refuses: nothing to check
            std::printf("skip (%s)\n", std::string(e.what()).substr(0, 100).c_str());
          }
          std::fflush(stdout);
        }
  std::printf("\n%d scenarios searched exhaustively, %d refused, %d with a bound above its exact objective\n",
              checked, refused, violations);
  return violations == 0 ? 0 : 1;
}

}  // namespace

// `bench_search [time] [hetero] [plans] [bounds]`: time and hetero by default; `plans` prints the top
// plans too; `bounds` alone checks the search's bounds by brute force.
int main(int argc, char** argv) {
  // As `paratwin` does: keep freed heap memory rather than return it to the system after every
  // candidate's Program and fault it back in for the next (a several-fold slowdown of lowering).
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  auto wanted = [&](const std::string& section) {
    if (argc < 2) return true;
    for (int i = 1; i < argc; ++i)
      if (section == argv[i]) return true;
    return false;
  };
  g_print_plans = wanted("plans") && argc > 1;
  if (argc > 1 && wanted("bounds")) return check_bounds();
  if (wanted("time") || (argc == 2 && g_print_plans)) {
    std::printf("## Search time (one core)\n\n");
    std::printf(
        "| case | GPUs | candidates | refined | exact evaluations | skipped twins | wall s | CPU s | "
        "evaluations per "
        "CPU s "
        "| best plan |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    time_search("gpt3-175b, 1024 A100, full space",
                "model: gpt3-175b\ncluster: {from: dgx-a100-80g, nodes: 128}\n"
                "training: {global_batch: 1536, seq_len: 2048}\nplan: auto\n");
    time_search("llama3-405b, 16,384 H100",
                "model: llama3-405b\ncluster: h100-roce\ntraining: {global_batch: 2048, seq_len: "
                "8192}\nplan: auto\n");
    time_search("llama2-70b, 256 H100 + 256 A100",
                "model: llama2-70b\ncluster: {from: hetero-h100-a100, pools: {h100: {nodes: 32}, a100: "
                "{nodes: 32}}}\n"
                "training: {global_batch: 1024, seq_len: 4096}\nplan: auto\n");
  }
  if (!wanted("hetero") || (argc == 2 && g_print_plans)) return 0;

  std::printf("\n## Heterogeneous clusters: chosen plan vs every GPU as the slowest type, layers even\n\n");
  std::printf("| scenario | chosen | slowest-even | speed-up | layers per stage (pool:layers) |\n");
  std::printf("|---|---:|---:|---:|---|\n");
  hetero("hetero-h100-a100 (llama2-70b)",
         "model: llama2-70b\ncluster: hetero-h100-a100\ntraining: {global_batch: 1024, seq_len: 4096}\nplan: "
         "auto\n",
         "a100-sxm-80g");
  hetero("hetero-a100-v100 (gpt3-18.4b)",
         "model: gpt3-18.4b\ncluster: hetero-a100-v100\n"
         "training: {global_batch: 512, seq_len: 2048, precision: fp16}\nplan: auto\n",
         "v100-sxm2-32g");
  return 0;
}
