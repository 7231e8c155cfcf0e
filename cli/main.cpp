// paratwin: plan, simulate and run hybrid-parallel LLM training. Only main() decides exit statuses.
#include <malloc.h>

#include <iostream>

#include "cli/commands.hpp"
#include "exec/backend_info.hpp"
#include "plan/spec/diagnostics.hpp"
#include "plan/sweep/point.hpp"
#include "sim/engine_info.hpp"

namespace paratwin::cli {

std::vector<Override> parse_overrides(const std::vector<std::string>& arguments) {
  std::vector<Override> out;
  for (const auto& a : arguments) out.push_back(parse_override(a));
  return out;
}

ScenarioSpec load_scenario_point(const std::string& path, const std::vector<std::string>& sets,
                                 const std::string& point) {
  if (point.empty()) return load_scenario(path, parse_overrides(sets));
  const ScenarioSpec file = load_scenario(path);
  return point_scenario(file, named_sweep_point(file, point), Catalog::installed(), parse_overrides(sets));
}

void add_point_option(CLI::App* command, std::string& point) {
  command
      ->add_option("--point", point,
                   "evaluate the sweep.list entry with this name (e.g. a run of bench/fidelity/); --set "
                   "applies after its settings")
      ->type_name("NAME");
}

void print_diagnostics(const std::vector<Diagnostic>& diagnostics) {
  for (const auto& d : diagnostics) std::cerr << d.str() << "\n";
}

static std::string version_text() {
  const exec::CudaDevices cuda = exec::query_cuda_devices();
  return std::string("paratwin ") + PARATWIN_VERSION + "\n  " + sim::simgrid_version() + "\n  " +
         exec::mpi_library_version() + "\n  " + (cuda.built ? "CUDA backend: " : "") + cuda.detail + "\n";
}

}  // namespace paratwin::cli

int main(int argc, char** argv) {
  using namespace paratwin::cli;
  // The optimizer lowers and frees one Program per candidate it evaluates; glibc would hand the freed
  // heap back to the system each time and fault it in again for the next, several times slower.
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  CLI::App app{"ParaTwin: a digital twin of hybrid-parallel LLM training", "paratwin"};
  app.require_subcommand(0, 1);
  bool show_version = false;
  app.add_flag("--version", show_version, "print versions of ParaTwin and the libraries it runs on");

  int status = kExitOk;
  add_list_command(app, status);
  add_validate_command(app, status);
  add_describe_command(app, status);
  add_plan_command(app, status);
  add_simulate_command(app, status);
  add_gui_command(app, status);
  add_run_command(app, status, std::vector<std::string>(argv, argv + argc));
  add_tokenize_command(app, status);
  add_sweep_command(app, status, std::vector<std::string>(argv, argv + argc));
  add_calibrate_command(app, status);
  add_import_command(app, status);

  try {
    app.parse(argc, argv);
    if (show_version) {
      std::cout << version_text();
      return kExitOk;
    }
    if (app.get_subcommands().empty()) {
      std::cout << app.help();
      return kExitBadInput;
    }
    return status;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitBadInput;
  } catch (const paratwin::InputError& e) {
    print_diagnostics(e.diagnostics());
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "paratwin: error: " << e.what() << "\n";
    return kExitFailure;
  }
}
