// Handing the results to paratwin-plot.
#include "cli/sweep/plotter.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>

#include "plan/io/atomic_file.hpp"
#include "plan/util/child_process.hpp"

namespace paratwin::cli {

bool png_available() {
  return ::access(sibling_executable("paratwin-plot").c_str(), X_OK) == 0;
}

namespace {

void plot(const std::string& what, const std::string& json, const std::string& path) {
  const ChildProcess plotter = spawn_process({sibling_executable("paratwin-plot"), what, json, path});
  const int status = wait_for_process(plotter.pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error("paratwin-plot could not draw " + path + " (see its message above)");
}

}  // namespace

void write_sweep_png(const std::string& results_json, const std::string& path) {
  plot("sweep", results_json, path);
}

void write_report_png(const std::string& figure, const std::string& report_json, const std::string& path) {
  const std::string json = path + ".report.json";
  write_file_atomically(json, report_json + "\n");
  try {
    plot(figure, json, path);
  } catch (...) {
    std::filesystem::remove(json);
    throw;
  }
  std::filesystem::remove(json);
}

}  // namespace paratwin::cli
