// Charts as plain values: series of (x, y) points, axes, ringed points and reference lines, laid out
// side by side in a figure. What to draw, with no Qt in sight; render.hpp draws it.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace paratwin::viz {

struct XY {
  double x = 0, y = 0;
};

enum class Marker { None, Circle, Square, Triangle, Diamond };

struct Series {
  std::string label;
  std::vector<XY> points;  // joined by a line in this order, unless `joined` is false
  int color = 0;           // index into the palette (10 colours, repeating)
  bool dashed = false;
  Marker marker = Marker::Circle;
  bool joined = true;    // false: markers only (a scatter)
  double bar_width = 0;  // > 0: each point a bar from y = 0, this wide in x units (no line, no marker)
};

struct Axis {
  std::string title;
  int log_base = 0;  // 0: linear; 2 or 10: logarithmic, ticks at powers of the base
  std::function<std::string(double)> label = nullptr;  // tick text; the default prints %g
};

// Points ringed over the series' markers, such as a Pareto front, with their own legend entry.
struct Rings {
  std::vector<XY> points;
  std::string label;
  bool red = false;   // black otherwise
  double radius = 8;  // pixels
};

// A horizontal line across the plot, such as a deadline or a budget.
struct Reference {
  double y = 0;
  std::string label;
};

struct Chart {
  std::string title;
  Axis x, y;
  std::vector<Series> series;
  std::vector<Rings> rings;
  std::vector<Reference> references;
};

struct Figure {
  std::string title;
  std::vector<Chart> panels;  // left to right
  int panel_width = 640;      // pixels
  int height = 520;
};

}  // namespace paratwin::viz
