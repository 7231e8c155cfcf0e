// The Gantt chart: a ruler on top, lane labels on the left, one row per lane of each trace
// section. Wheel zooms around the pointer, dragging pans, hovering shows a task's details.
#pragma once

#include <QAbstractScrollArea>
#include <optional>

#include "gui/model/timeline_layout.hpp"

namespace paratwin::gui {

class TimelineWidget : public QAbstractScrollArea {
  Q_OBJECT

 public:
  explicit TimelineWidget(QWidget* parent = nullptr);

  void set_sections(std::vector<TimelineSection> sections);  // keeps the zoom when the duration stays
  void fit();                                                // the whole of every section
  void show_range(double begin_s, double end_s);  // in timeline time (sections after their offsets)
  void zoom(double factor);                       // around the centre
  const TimelineLayout& layout() const { return layout_; }
  const TimeAxis& axis() const { return axis_; }
  // The item under a viewport point, for tests and tooltips.
  std::optional<TimelineHit> hit_at(QPoint viewport_point) const;
  static constexpr int kLabelWidth = 240;

 signals:
  void hovered(const QString& text);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;
  void wheelEvent(QWheelEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  bool viewportEvent(QEvent* event) override;

 private:
  void update_geometry();
  void changed_view();  // keeps the axis on the sections and repaints
  double scroll_y() const;

  TimelineLayout layout_;
  TimeAxis axis_;
  std::optional<QPoint> drag_from_;
  std::optional<TimelineHit> hover_;
};

}  // namespace paratwin::gui
