// `paratwin list [models|topologies|scenarios]`: the catalog with one line per entry.
#include <cstdio>
#include <iostream>

#include "cli/commands.hpp"
#include "plan/spec/catalog.hpp"

namespace paratwin::cli {

void add_list_command(CLI::App& app, int& exit_status) {
  auto* cmd = app.add_subcommand("list", "list the catalog: models, topologies (clusters) and scenarios");
  auto what = std::make_shared<std::string>();
  cmd->add_option("what", *what, "models, topologies or scenarios (all when omitted)")
      ->check(CLI::IsMember({"models", "topologies", "scenarios"}));
  cmd->callback([what, &exit_status] {
    const Catalog& catalog = Catalog::installed();
    for (CatalogKind kind : {CatalogKind::Model, CatalogKind::Topology, CatalogKind::Scenario}) {
      if (!what->empty() && *what != kind_directory(kind)) continue;
      const auto entries = catalog.list(kind);
      if (what->empty()) std::cout << kind_directory(kind) << " (" << catalog.directory(kind) << "):\n";
      for (const auto& e : entries) {
        char line[512];
        std::snprintf(line, sizeof line, "  %-24s %s\n", e.name.c_str(), e.description.c_str());
        std::cout << line;
      }
      if (what->empty()) std::cout << "\n";
    }
    exit_status = kExitOk;
  });
}

}  // namespace paratwin::cli
