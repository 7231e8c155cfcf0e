// Writing the validation set's picture: with Qt 6 Gui through paratwin_viz (fidelity_png.cpp), or a
// refusal that says why (fidelity_png_none.cpp), chosen by CMake.
#pragma once

#include <string>

#include "viz/chart.hpp"

namespace paratwin::fidelity {

// Writes the figure as a PNG; throws std::runtime_error when it cannot (no Qt 6 Gui, unwritable path).
void write_figure_png(const viz::Figure& figure, const std::string& path);

}  // namespace paratwin::fidelity
