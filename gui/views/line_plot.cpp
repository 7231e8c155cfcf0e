// Line chart painting.
#include "gui/views/line_plot.hpp"

#include <QPainter>
#include <QPainterPath>
#include <algorithm>
#include <cmath>

#include "gui/model/axis.hpp"
#include "gui/views/style.hpp"

namespace paratwin::gui {

LinePlot::LinePlot(QString title, QString x_label, QString y_unit, QWidget* parent)
    : QWidget(parent), title_(std::move(title)), x_label_(std::move(x_label)), y_unit_(std::move(y_unit)) {
  setBackgroundRole(QPalette::Base);
  setAutoFillBackground(true);
  setMinimumHeight(160);
}

void LinePlot::set_series(std::vector<PlotSeries> series) {
  series_ = std::move(series);
  update();
}

void LinePlot::set_intervals(std::vector<std::pair<double, double>> intervals, QColor color, QString label) {
  intervals_ = std::move(intervals);
  interval_color_ = color;
  interval_label_ = std::move(label);
  update();
}

void LinePlot::set_markers(std::vector<PlotMarker> markers) {
  markers_ = std::move(markers);
  update();
}

void LinePlot::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  QFont bold = font();
  bold.setBold(true);
  p.setFont(bold);
  p.setPen(colors::kText);
  p.drawText(QPointF(12, 18), title_);
  p.setFont(font());
  // Legend on the title line.
  std::vector<std::pair<QColor, QString>> legend;
  for (const PlotSeries& s : series_) legend.push_back({s.color, s.name});
  if (!intervals_.empty()) legend.push_back({interval_color_, interval_label_});
  draw_legend(p, 12 + QFontMetricsF(bold).horizontalAdvance(title_) + 24, 6, legend);

  const QRectF plot(78, 34, std::max(50, width() - 96), std::max(40, height() - 34 - 40));
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  for (const PlotSeries& s : series_)
    for (const auto& [x, y] : s.points) {
      x0 = std::min(x0, x), x1 = std::max(x1, x);
      if (std::isfinite(y)) y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  if (x_range_) x0 = x_range_->first, x1 = x_range_->second;
  if (y_range_) y0 = y_range_->first, y1 = y_range_->second;
  if (x0 > x1 || y0 > y1) {
    p.setPen(QPen(colors::kGrid, 1));
    p.drawRect(plot);
    draw_placeholder(p, plot, placeholder_);
    return;
  }
  if (!y_range_) {
    const double pad = (y1 - y0) * 0.08 + (y1 == y0 ? std::max(1e-9, std::fabs(y1) * 0.1) : 0);
    y0 = y0 >= 0 && y0 - pad < 0 ? 0 : y0 - pad;
    y1 += pad;
  }
  const ValueAxis ya(y0, y1, plot.bottom(), plot.top(), 5, !y_range_);
  const ValueAxis xa(x0, x1 > x0 ? x1 : x0 + 1, plot.left(), plot.right(), 8, false);
  // Intervals under the grid.
  for (const auto& [a, b] : intervals_) {
    const double l = std::max(plot.left(), xa.pixel(a)), r = std::min(plot.right(), xa.pixel(b));
    if (r > l) p.fillRect(QRectF(l, plot.top(), std::max(1.0, r - l), plot.height()), interval_color_);
  }
  // Y grid and labels.
  for (const Tick& t : ya.ticks()) {
    p.setPen(QPen(colors::kGrid, 1));
    p.drawLine(QPointF(plot.left(), t.pixel), QPointF(plot.right(), t.pixel));
    p.setPen(colors::kMuted);
    p.drawText(QRectF(0, t.pixel - 8, plot.left() - 6, 16), Qt::AlignRight | Qt::AlignVCenter,
               (y_format_ ? y_format_(t.value) : t.label) + (y_unit_.isEmpty() ? "" : " " + y_unit_));
  }
  // X ticks.
  const int max_ticks = std::max(2, int(plot.width() / 110));
  const double step = nice_step(xa.lo() / x_unit_, xa.hi() / x_unit_, max_ticks) * x_unit_;
  for (double in_units : nice_values(xa.lo() / x_unit_, xa.hi() / x_unit_, max_ticks)) {
    const double v = in_units * x_unit_;
    const double x = xa.pixel(v);
    p.setPen(QPen(colors::kGrid, 1));
    p.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()));
    p.setPen(colors::kMuted);
    p.drawText(QRectF(x - 60, plot.bottom() + 4, 120, 16), Qt::AlignHCenter | Qt::AlignTop,
               x_format_ ? x_format_(v, step) : QString::number(v, 'g', 6));
  }
  p.drawText(QRectF(plot.left(), plot.bottom() + 20, plot.width(), 16), Qt::AlignHCenter, x_label_);
  // Markers.
  for (const PlotMarker& m : markers_) {
    const double x = xa.pixel(m.x);
    if (x < plot.left() || x > plot.right()) continue;
    p.setPen(QPen(m.color, 1.5));
    p.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()));
    p.setBrush(m.color);
    p.drawEllipse(QPointF(x, plot.top() + 4), 3.5, 3.5);
  }
  // Series.
  p.save();
  p.setClipRect(plot.adjusted(-4, -4, 4, 4));
  for (const PlotSeries& s : series_) {
    QPainterPath path;
    bool first = true;
    for (const auto& [x, y] : s.points) {
      const QPointF q(xa.pixel(x), ya.pixel(y));
      if (first)
        path.moveTo(q);
      else
        path.lineTo(q);
      first = false;
    }
    p.setPen(QPen(s.color, 2, s.dashed ? Qt::DashLine : Qt::SolidLine));
    p.setBrush(Qt::NoBrush);
    p.drawPath(path);
    if (s.dots) {
      p.setBrush(s.color);
      for (const auto& [x, y] : s.points) p.drawEllipse(QPointF(xa.pixel(x), ya.pixel(y)), 2.2, 2.2);
    }
  }
  p.restore();
  p.setPen(QPen(colors::kMuted, 1));
  p.drawLine(plot.bottomLeft(), plot.bottomRight());
}

}  // namespace paratwin::gui
