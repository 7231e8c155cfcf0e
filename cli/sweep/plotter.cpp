// Handing the results to paratwin-plot.
#include "cli/sweep/plotter.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

#include "plan/util/child_process.hpp"

namespace paratwin::cli {

bool png_available() {
  return ::access(sibling_executable("paratwin-plot").c_str(), X_OK) == 0;
}

void write_sweep_png(const SweepResults& results, const std::string& path) {
  const std::string text = to_json(results).dump();
  const ChildProcess plotter =
      spawn_process({sibling_executable("paratwin-plot"), "sweep", "-", path}, {.input = ChildStream::Pipe});
  for (size_t sent = 0; sent < text.size();) {
    const ssize_t n = ::write(plotter.to, text.data() + sent, text.size() - sent);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the plotter ended early; its status says why
    sent += size_t(n);
  }
  ::close(plotter.to);
  const int status = wait_for_process(plotter.pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error("paratwin-plot could not draw " + path + " (see its message above)");
}

}  // namespace paratwin::cli
