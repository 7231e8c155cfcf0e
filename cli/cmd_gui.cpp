// `paratwin gui [SCENARIO]`: starts paratwin-gui, which is installed beside this binary.
#include <unistd.h>

#include <iostream>

#include "cli/commands.hpp"
#include "plan/util/child_process.hpp"

namespace paratwin::cli {

void add_gui_command(CLI::App& app, int& exit_status) {
  auto scenario = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("gui", "open the Qt GUI (paratwin-gui), optionally on a scenario");
  cmd->add_option("scenario", *scenario, "scenario file to open");
  cmd->callback([scenario, &exit_status] {
    const std::string gui = sibling_executable("paratwin-gui");
    if (::access(gui.c_str(), X_OK) != 0) {
      std::cerr << "paratwin: error: " << gui << " not found; build it with Qt 6 (make build)\n";
      exit_status = kExitFailure;
      return;
    }
    std::vector<std::string> args{gui};
    if (!scenario->empty()) args.push_back(*scenario);
    try {
      replace_process(std::move(args));
    } catch (const std::runtime_error&) {
      std::cerr << "paratwin: error: cannot start " << gui << "\n";
      exit_status = kExitFailure;
    }
  });
}

}  // namespace paratwin::cli
