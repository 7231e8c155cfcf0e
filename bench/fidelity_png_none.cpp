// Builds without Qt 6 Gui draw no pictures; the tables and JSON need none.
#include <stdexcept>

#include "bench/fidelity_png.hpp"

namespace paratwin::fidelity {

void write_figure_png(const viz::Figure&, const std::string& path) {
  throw std::runtime_error("cannot write " + path + ": PNG pictures need Qt 6 Gui, which this build lacks");
}

}  // namespace paratwin::fidelity
