// Draws a Figure into a PNG with Qt 6 Gui (QImage + QPainter), without a display: a QGuiApplication
// on the offscreen platform is created on first use when the program has none.
#pragma once

#include <string>

#include "viz/chart.hpp"

namespace paratwin::viz {

// The figure as PNG bytes.
std::string render_png(const Figure& figure);

// Writes the PNG atomically (a temporary file renamed into place). Throws std::runtime_error naming
// the path when it cannot be written.
void write_png(const Figure& figure, const std::string& path);

}  // namespace paratwin::viz
