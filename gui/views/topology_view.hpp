// Topology view: the cluster's nodes, GPUs, NICs and switches, links coloured by the utilization a
// simulation of the chosen plan measured on them (or, for a scenario of several jobs, by job).
#pragma once

#include <QPen>
#include <QTransform>
#include <QWidget>
#include <functional>

#include "gui/model/topology.hpp"

class QComboBox;
class QLabel;
class QPushButton;

namespace paratwin::gui {

class Session;

class TopologyCanvas : public QWidget {
  Q_OBJECT

 public:
  explicit TopologyCanvas(QWidget* parent = nullptr);
  void set_topology(Topology topology);
  const Topology& topology() const { return topology_; }
  // Colour links by their peak utilization instead of the mean over the iteration.
  void set_by_peak(bool by_peak);

 protected:
  void paintEvent(QPaintEvent* event) override;
  bool event(QEvent* event) override;

 private:
  QTransform transform() const;  // topology coordinates -> widget
  QString tooltip_at(QPointF point) const;
  double utilization(const LinkLoad& load) const;
  void draw_box(QPainter& p, const TopologyBox& box, double scale) const;
  void paint_by_job(QPainter& p) const;
  // Node frames, the links (each with the pen `pen` gives it, for a width factor), then the boxes.
  void draw_picture(QPainter& p, const std::function<QPen(const TopologyLink&, double)>& pen) const;

  Topology topology_;
  bool by_peak_ = false;
};

class TopologyView : public QWidget {
  Q_OBJECT

 public:
  explicit TopologyView(Session& session, QWidget* parent = nullptr);
  TopologyCanvas* canvas() const { return canvas_; }
  QComboBox* colour_by() const { return colour_by_; }

 private:
  void rebuild();

  Session& session_;
  TopologyCanvas* canvas_;
  QLabel* status_;
  QComboBox* colour_by_;
  QPushButton* simulate_;
};

}  // namespace paratwin::gui
