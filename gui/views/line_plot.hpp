// A small line chart: series of points, shaded x-intervals (e.g. downtime), vertical markers
// (e.g. failures), axes with nice ticks. Used by the live and reliability views.
#pragma once

#include <QColor>
#include <QWidget>
#include <functional>
#include <optional>
#include <vector>

namespace paratwin::gui {

struct PlotSeries {
  QString name;
  QColor color;
  std::vector<std::pair<double, double>> points;
  bool dashed = false;
  bool dots = false;  // draw each point
};

struct PlotMarker {
  double x = 0;
  QColor color;
  QString tooltip;
};

class LinePlot : public QWidget {
  Q_OBJECT

 public:
  explicit LinePlot(QString title, QString x_label, QString y_unit, QWidget* parent = nullptr);

  void set_series(std::vector<PlotSeries> series);
  void set_intervals(std::vector<std::pair<double, double>> intervals, QColor color, QString label);
  void set_markers(std::vector<PlotMarker> markers);
  void set_x_range(std::optional<std::pair<double, double>> range) {
    x_range_ = range;
    update();
  }
  void set_y_range(std::optional<std::pair<double, double>> range) {
    y_range_ = range;
    update();
  }
  void set_x_format(std::function<QString(double value, double step)> format) {
    x_format_ = std::move(format);
  }
  // Ticks fall on nice multiples of this unit (86400: whole days for times in seconds).
  void set_x_unit(double unit) {
    x_unit_ = unit;
    update();
  }
  void set_y_format(std::function<QString(double value)> format) { y_format_ = std::move(format); }
  void set_placeholder(QString text) {
    placeholder_ = std::move(text);
    update();
  }
  const std::vector<PlotSeries>& series() const { return series_; }

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  QString title_, x_label_, y_unit_, placeholder_, interval_label_;
  std::vector<PlotSeries> series_;
  std::vector<std::pair<double, double>> intervals_;
  QColor interval_color_;
  std::vector<PlotMarker> markers_;
  std::optional<std::pair<double, double>> x_range_, y_range_;
  std::function<QString(double, double)> x_format_;
  std::function<QString(double)> y_format_;
  double x_unit_ = 1;
};

}  // namespace paratwin::gui
