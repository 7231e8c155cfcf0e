// The memory view's data and geometry: per pipeline stage, a stacked bar of weights, gradients,
// optimizer state, activations and buffers, against the device's capacity.
#pragma once

#include <QRectF>
#include <QString>
#include <vector>

#include "gui/model/axis.hpp"
#include "plan/report/report.hpp"

namespace paratwin::gui {

enum class MemoryPart { Weights, Gradients, Optimizer, Activations, Buffers };
constexpr int kMemoryParts = 5;
QString memory_part_label(MemoryPart part);

struct StageBar {
  QString label;  // "stage 0 (dgx)"
  double parts_gib[kMemoryParts] = {};
  double peak_gib = 0, capacity_gib = 0;
  bool fits = true;
};

std::vector<StageBar> stage_bars(const Report& report);

struct MemoryChartGeometry {
  ValueAxis y;  // GiB
  struct Bar {
    QRectF segments[kMemoryParts];  // bottom to top in MemoryPart order
    QRectF whole;
    double capacity_y = 0;  // the capacity line of this stage's device
  };
  std::vector<Bar> bars;
};

// Lays the bars out in `plot` (the area inside the axes): equal slots, bars 60% of a slot wide,
// the value axis up to the largest capacity or peak.
MemoryChartGeometry layout_memory_chart(const std::vector<StageBar>& bars, const QRectF& plot);

}  // namespace paratwin::gui
