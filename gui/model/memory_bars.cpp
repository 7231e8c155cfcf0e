// Memory bars from a report.
#include "gui/model/memory_bars.hpp"

#include <algorithm>

namespace paratwin::gui {

QString memory_part_label(MemoryPart part) {
  static const char* names[kMemoryParts] = {"weights", "gradients", "optimizer state", "activations",
                                            "buffers"};
  return names[int(part)];
}

std::vector<StageBar> stage_bars(const Report& report) {
  std::vector<StageBar> out;
  for (const StageMemory& s : report.stages) {
    StageBar bar;
    bar.label = QString("stage %1 (%2)").arg(s.stage).arg(QString::fromStdString(s.pool));
    const Bytes parts[kMemoryParts] = {s.weights, s.gradients, s.optimizer, s.activations, s.buffers};
    for (int i = 0; i < kMemoryParts; ++i) bar.parts_gib[i] = gib(parts[i]);
    bar.peak_gib = gib(s.peak);
    bar.capacity_gib = gib(s.capacity);
    bar.fits = s.fits();
    out.push_back(bar);
  }
  return out;
}

MemoryChartGeometry layout_memory_chart(const std::vector<StageBar>& bars, const QRectF& plot) {
  double top = 1;
  for (const StageBar& b : bars) {
    double sum = 0;
    for (double g : b.parts_gib) sum += g;
    top = std::max({top, b.capacity_gib, b.peak_gib, sum});
  }
  MemoryChartGeometry g;
  g.y = ValueAxis(0, top * 1.05, plot.bottom(), plot.top());
  const double slot = plot.width() / std::max<size_t>(1, bars.size());
  const double width = std::min(slot * 0.6, 140.0);
  for (size_t i = 0; i < bars.size(); ++i) {
    MemoryChartGeometry::Bar bar;
    const double left = plot.left() + slot * i + (slot - width) / 2;
    double base = 0;
    for (int p = 0; p < kMemoryParts; ++p) {
      const double y0 = g.y.pixel(base), y1 = g.y.pixel(base + bars[i].parts_gib[p]);
      bar.segments[p] = QRectF(left, y1, width, y0 - y1);
      base += bars[i].parts_gib[p];
    }
    bar.whole = QRectF(left, g.y.pixel(base), width, g.y.pixel(0) - g.y.pixel(base));
    bar.capacity_y = g.y.pixel(bars[i].capacity_gib);
    g.bars.push_back(bar);
  }
  return g;
}

}  // namespace paratwin::gui
