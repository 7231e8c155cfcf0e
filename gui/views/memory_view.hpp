// Memory view: per pipeline stage of the chosen plan, stacked bars of weights, gradients, optimizer
// state, activations and buffers against the device's capacity.
#pragma once

#include <QWidget>

class QTableWidget;

#include "gui/model/memory_bars.hpp"

namespace paratwin::gui {

class Session;

class MemoryView : public QWidget {
  Q_OBJECT

 public:
  explicit MemoryView(Session& session, QWidget* parent = nullptr);

  const std::vector<StageBar>& bars() const { return bars_; }
  // The chart's geometry at the current size (tests check it against the numbers).
  MemoryChartGeometry geometry() const;

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  QRectF plot_area() const;

  void fill_table();

  Session& session_;
  QTableWidget* table_;  // the figures under the chart
  std::vector<StageBar> bars_;
  QString title_;
};

}  // namespace paratwin::gui
