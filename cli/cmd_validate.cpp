// `paratwin validate FILE...`: checks models, clusters and scenarios; exit 2 when any has an error.
#include <iostream>

#include "cli/commands.hpp"
#include "plan/spec/validate.hpp"

namespace paratwin::cli {

void add_validate_command(CLI::App& app, int& exit_status) {
  struct Options {
    std::vector<std::string> files;
    std::vector<std::string> sets;
  };
  auto opts = std::make_shared<Options>();
  auto* cmd =
      app.add_subcommand("validate", "check YAML files (models, clusters, scenarios); exit 2 on errors");
  cmd->add_option("files", opts->files, "files to check")->required();
  cmd->add_option("--set", opts->sets, "override a scenario field, e.g. --set plan.tp=8")
      ->type_name("KEY=VALUE");
  cmd->callback([opts, &exit_status] {
    const std::vector<Override> overrides = parse_overrides(opts->sets);
    int failed = 0;
    for (const auto& file : opts->files) {
      try {
        const Validation v = validate_file(file, overrides);
        print_diagnostics(v.warnings);
        std::cout << "ok   " << file << ": " << v.summary << "\n";
      } catch (const InputError& e) {
        print_diagnostics(e.diagnostics());
        std::cout << "FAIL " << file << " (" << e.diagnostics().size() << " error"
                  << (e.diagnostics().size() == 1 ? "" : "s") << ")\n";
        ++failed;
      }
    }
    exit_status = failed ? kExitBadInput : kExitOk;
  });
}

}  // namespace paratwin::cli
