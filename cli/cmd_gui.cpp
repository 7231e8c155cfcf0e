// `paratwin gui [SCENARIO]`: starts paratwin-gui, which is installed beside this binary.
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "cli/commands.hpp"

namespace paratwin::cli {

void add_gui_command(CLI::App& app, int& exit_status, const std::string& argv0) {
  auto scenario = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("gui", "open the Qt GUI (paratwin-gui), optionally on a scenario");
  cmd->add_option("scenario", *scenario, "scenario file to open");
  cmd->callback([scenario, argv0, &exit_status] {
    std::error_code ec;
    std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) self = argv0;
    const std::string gui = (self.parent_path() / "paratwin-gui").string();
    if (::access(gui.c_str(), X_OK) != 0) {
      std::cerr << "paratwin: error: " << gui << " not found; build it with Qt 6 (make build)\n";
      exit_status = kExitFailure;
      return;
    }
    std::vector<char*> args{const_cast<char*>(gui.c_str())};
    if (!scenario->empty()) args.push_back(scenario->data());
    args.push_back(nullptr);
    ::execv(gui.c_str(), args.data());
    std::cerr << "paratwin: error: cannot start " << gui << "\n";
    exit_status = kExitFailure;
  });
}

}  // namespace paratwin::cli
