// `paratwin import megatron [--cluster NAME] [-o SCENARIO.yaml] -- ARGS...`: a Megatron-LM launch read back
// into a scenario that `paratwin plan` evaluates.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/commands.hpp"
#include "plan/io/atomic_file.hpp"
#include "plan/report/import_deepspeed.hpp"
#include "plan/report/import_megatron.hpp"
#include "plan/spec/suggest.hpp"

namespace paratwin::cli {
namespace {

// The one pool of the cluster a name or path stands for.
PoolSpec cluster_pool(const std::string& cluster) {
  const Catalog& catalog = Catalog::installed();
  auto file = catalog.find(CatalogKind::Topology, cluster);
  if (!file && std::filesystem::exists(cluster)) file = cluster;
  if (!file)
    throw InputError(
        argument_location("--cluster", cluster),
        "unknown cluster '" + cluster + "'" + did_you_mean(cluster, catalog.names(CatalogKind::Topology)));
  const ClusterSpec spec = load_cluster_file(*file);
  if (spec.pools.size() > 1)
    throw InputError(argument_location("--cluster", cluster),
                     "cluster '" + cluster + "' has " + std::to_string(spec.pools.size()) +
                         " pools; a Megatron-LM launch says nothing of which runs which stage: give one "
                         "with a single pool");
  return spec.pools.front();
}

// A catalog model or a model file.
ModelSpec model_named(const std::string& name) {
  const Catalog& catalog = Catalog::installed();
  auto file = catalog.find(CatalogKind::Model, name);
  if (!file && std::filesystem::exists(name)) file = name;
  if (!file)
    throw InputError(argument_location("--model", name),
                     "unknown model '" + name + "'" + did_you_mean(name, catalog.names(CatalogKind::Model)));
  return load_model_file(*file);
}

// The scenario on standard output or in `output`; the warnings on standard error.
void write_scenario(const ImportedLaunch& launch, const std::string& cluster, const std::string& output) {
  const PoolSpec pool = cluster_pool(cluster);
  for (const auto& warning : launch.warnings) std::cerr << "warning: " << warning << "\n";
  const std::string yaml = imported_scenario_yaml(launch, cluster, pool.name, pool.gpus_per_node);
  if (output.empty()) {
    std::cout << yaml;
  } else {
    write_file_atomically(output, yaml);
    std::cout << output << ": " << launch.world << " GPUs of " << cluster << ", " << launch.warnings.size()
              << " warnings\n";
  }
}

void add_deepspeed(CLI::App& import, int& exit_status) {
  struct Options {
    std::string config, model, cluster = "dgx-h100", output;
    int gpus = 0, seq_len = 0;
  };
  auto opts = std::make_shared<Options>();
  auto* cmd = import.add_subcommand("deepspeed", "a DeepSpeed config (JSON) and the model it trains");
  cmd->add_option("config", opts->config, "DeepSpeed config")->required()->check(CLI::ExistingFile);
  cmd->add_option("--model", opts->model, "catalog model or model file")->required();
  cmd->add_option("--cluster", opts->cluster, "catalog cluster or file the scenario runs on")
      ->capture_default_str();
  cmd->add_option("--gpus", opts->gpus, "world size, when the config leaves out gradient_accumulation_steps")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--seq-len", opts->seq_len, "training sequence length (default: the model's)")
      ->check(CLI::Range(1, 1 << 26));
  cmd->add_option("-o,--output", opts->output, "scenario file to write (default: standard output)")
      ->type_name("SCENARIO.yaml");
  cmd->callback([opts, &exit_status] {
    std::ifstream in(opts->config);
    std::stringstream text;
    text << in.rdbuf();
    const ImportedLaunch launch =
        import_deepspeed(text.str(), opts->config, model_named(opts->model),
                         opts->seq_len ? std::optional<int>(opts->seq_len) : std::nullopt,
                         opts->gpus ? std::optional<int>(opts->gpus) : std::nullopt);
    write_scenario(launch, opts->cluster, opts->output);
    exit_status = kExitOk;
  });
}

}  // namespace

void add_import_command(CLI::App& app, int& exit_status) {
  struct Options {
    std::string cluster = "dgx-h100", output, launch;
    int gpus = 0;
    std::vector<std::string> arguments;
  };
  auto opts = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("import", "read another framework's launch into a scenario");
  cmd->require_subcommand(1);
  auto* megatron = cmd->add_subcommand(
      "megatron", "a Megatron-LM pretrain_gpt.py argument list (torchrun's words before it give the world)");
  megatron->add_option("--cluster", opts->cluster, "catalog cluster or file the scenario runs on")
      ->capture_default_str();
  megatron
      ->add_option("--gpus", opts->gpus, "world size, when no torchrun --nnodes/--nproc-per-node is given")
      ->check(CLI::Range(1, 1 << 24));
  megatron
      ->add_option("--launch", opts->launch,
                   "read the launch from a script (as `plan --emit megatron` writes)")
      ->check(CLI::ExistingFile);
  megatron->add_option("-o,--output", opts->output, "scenario file to write (default: standard output)")
      ->type_name("SCENARIO.yaml");
  megatron->add_option("arguments", opts->arguments, "pretrain_gpt.py's arguments, after --");
  megatron->callback([opts, &exit_status] {
    std::vector<std::string> words;
    if (!opts->launch.empty()) {
      std::ifstream in(opts->launch);
      std::stringstream text;
      text << in.rdbuf();
      words = launch_script_words(text.str());
    }
    words.insert(words.end(), opts->arguments.begin(), opts->arguments.end());
    const ImportedLaunch launch =
        import_megatron(words, opts->gpus ? std::optional<int>(opts->gpus) : std::nullopt);
    write_scenario(launch, opts->cluster, opts->output);
    exit_status = kExitOk;
  });
  add_deepspeed(*cmd, exit_status);
}

}  // namespace paratwin::cli
