// The picture through paratwin_viz (Qt 6 Gui, offscreen).
#include "bench/fidelity_png.hpp"

#include "viz/render.hpp"

namespace paratwin::fidelity {

void write_figure_png(const viz::Figure& figure, const std::string& path) {
  viz::write_png(figure, path);
}

}  // namespace paratwin::fidelity
