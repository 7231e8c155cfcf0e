// Painting a Figure with QPainter on a QImage: panels side by side, each with a grid, ticks, axis
// titles, its series, rings on the marked points, reference lines and a legend.
#include "viz/render.hpp"

#include <QBuffer>
#include <QGuiApplication>
#include <QImage>
#include <QPainter>
#include <QPainterPath>

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "plan/io/atomic_file.hpp"
#include "viz/scale.hpp"

namespace paratwin::viz {
namespace {

QtMessageHandler previous_handler = nullptr;

// Qt notes that it has no XDG_RUNTIME_DIR, which a picture does not need; other messages pass.
void drop_runtime_dir_notice(QtMsgType type, const QMessageLogContext& context, const QString& message) {
  if (message.startsWith("QStandardPaths:")) return;
  if (previous_handler)
    previous_handler(type, context, message);
  else
    std::fprintf(stderr, "%s\n", qPrintable(qFormatLogMessage(type, context, message)));
}

// Fonts need a QGuiApplication; a PNG needs no display, so it runs on the offscreen platform unless
// the user chose another.
void ensure_gui_application() {
  if (QGuiApplication::instance()) return;
  previous_handler = qInstallMessageHandler(drop_runtime_dir_notice);
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  static int argc = 1;
  static char name[] = "paratwin";
  static char* argv[] = {name, nullptr};
  new QGuiApplication(argc, argv);  // kept for the life of the process
}

QColor palette(int i) {
  static const char* colours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                  "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return QColor(colours[((i % 10) + 10) % 10]);
}

QString tick_text(const Axis& axis, double v) {
  if (axis.label) return QString::fromStdString(axis.label(v));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

QFont font(int pixels, bool bold = false) {
  QFont f;
  f.setPixelSize(pixels);
  f.setBold(bold);
  return f;
}

void draw_marker(QPainter& p, Marker marker, QPointF at, double r) {
  switch (marker) {
    case Marker::None:
      return;
    case Marker::Circle:
      p.drawEllipse(at, r, r);
      return;
    case Marker::Square:
      p.drawRect(QRectF(at.x() - r, at.y() - r, 2 * r, 2 * r));
      return;
    case Marker::Triangle:
      p.drawPolygon(QPolygonF(
          {at + QPointF(0, -r * 1.2), at + QPointF(r * 1.1, r * 0.8), at + QPointF(-r * 1.1, r * 0.8)}));
      return;
    case Marker::Diamond:
      p.drawPolygon(QPolygonF({at + QPointF(0, -r * 1.3), at + QPointF(r * 1.1, 0), at + QPointF(0, r * 1.3),
                               at + QPointF(-r * 1.1, 0)}));
      return;
  }
}

bool drawable(const Scale& s, double v) {
  return std::isfinite(v) && (!s.log_base || v > 0);
}

void draw_chart(QPainter& p, const Chart& chart, const QRect& area) {
  const QRectF plot(area.left() + 84, area.top() + 40, area.width() - 84 - 24, area.height() - 40 - 62);
  std::vector<double> xs, ys;
  for (const auto& s : chart.series)
    for (const auto& pt : s.points) {
      xs.push_back(pt.x), ys.push_back(pt.y);
      if (s.bar_width > 0)
        xs.push_back(pt.x - s.bar_width / 2), xs.push_back(pt.x + s.bar_width / 2), ys.push_back(0);
    }
  for (const auto& r : chart.references) ys.push_back(r.y);
  Scale sx = fit_scale(xs, chart.x.log_base), sy = fit_scale(ys, chart.y.log_base);
  sx.pixel_lo = plot.left(), sx.pixel_hi = plot.right();
  sy.pixel_lo = plot.bottom(), sy.pixel_hi = plot.top();
  auto at = [&](XY v) { return QPointF(sx.to_pixel(v.x), sy.to_pixel(v.y)); };

  p.setPen(Qt::black);
  p.setFont(font(15, true));
  p.drawText(QRectF(area.left(), area.top() + 6, area.width(), 26), Qt::AlignCenter,
             QString::fromStdString(chart.title));

  // Grid and ticks.
  p.setFont(font(12));
  for (double t : ticks(sx)) {
    const double x = sx.to_pixel(t);
    p.setPen(QPen(QColor(225, 225, 225), 1));
    p.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()));
    p.setPen(Qt::black);
    p.drawText(QRectF(x - 50, plot.bottom() + 4, 100, 18), Qt::AlignHCenter | Qt::AlignTop,
               tick_text(chart.x, t));
  }
  for (double t : ticks(sy)) {
    const double y = sy.to_pixel(t);
    p.setPen(QPen(QColor(225, 225, 225), 1));
    p.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
    p.setPen(Qt::black);
    p.drawText(QRectF(area.left(), y - 9, 84 - 6, 18), Qt::AlignRight | Qt::AlignVCenter,
               tick_text(chart.y, t));
  }
  p.setPen(QPen(Qt::black, 1));
  p.setBrush(Qt::NoBrush);
  p.drawRect(plot);
  p.setFont(font(13));
  p.drawText(QRectF(plot.left(), plot.bottom() + 26, plot.width(), 22), Qt::AlignCenter,
             QString::fromStdString(chart.x.title));
  p.save();
  p.translate(area.left() + 14, plot.center().y());
  p.rotate(-90);
  p.drawText(QRectF(-plot.height() / 2, -10, plot.height(), 22), Qt::AlignCenter,
             QString::fromStdString(chart.y.title));
  p.restore();

  // Data, clipped to the plot.
  p.save();
  p.setClipRect(plot.adjusted(-8, -8, 8, 8));
  for (const auto& r : chart.references) {
    if (!drawable(sy, r.y)) continue;
    p.setPen(QPen(QColor(200, 0, 0), 1.5, Qt::DashLine));
    const double y = sy.to_pixel(r.y);
    p.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
    p.setFont(font(12));
    p.drawText(QRectF(plot.left() + 6, y + 2, plot.width() - 12, 16), Qt::AlignLeft | Qt::AlignTop,
               QString::fromStdString(r.label));
  }
  for (const auto& s : chart.series) {
    if (s.bar_width > 0) {
      p.setPen(QPen(palette(s.color).darker(130), 1));
      p.setBrush(palette(s.color));
      for (const auto& pt : s.points)
        if (drawable(sx, pt.x) && drawable(sy, pt.y))
          p.drawRect(
              QRectF(at({pt.x - s.bar_width / 2, pt.y}), at({pt.x + s.bar_width / 2, 0})).normalized());
      continue;
    }
    QPainterPath path;
    bool started = false;
    for (const auto& pt : s.points) {
      if (!drawable(sx, pt.x) || !drawable(sy, pt.y)) continue;
      started ? path.lineTo(at(pt)) : path.moveTo(at(pt));
      started = true;
    }
    p.setBrush(Qt::NoBrush);
    p.setPen(QPen(palette(s.color), 2, s.dashed ? Qt::DashLine : Qt::SolidLine));
    if (s.joined) p.drawPath(path);
    p.setPen(QPen(palette(s.color), 1));
    p.setBrush(palette(s.color));
    for (const auto& pt : s.points)
      if (drawable(sx, pt.x) && drawable(sy, pt.y)) draw_marker(p, s.marker, at(pt), 4);
  }
  p.setBrush(Qt::NoBrush);
  for (const auto& rings : chart.rings) {
    p.setPen(QPen(rings.red ? QColor(200, 0, 0) : Qt::black, 2));
    for (const auto& m : rings.points)
      if (drawable(sx, m.x) && drawable(sy, m.y)) p.drawEllipse(at(m), rings.radius, rings.radius);
  }
  p.restore();

  // Legend, top right inside the plot.
  struct Entry {
    QString text;
    const Series* series;  // or
    const Rings* rings;
  };
  std::vector<Entry> entries;
  for (const auto& s : chart.series)
    if (!s.label.empty()) entries.push_back({QString::fromStdString(s.label), &s, nullptr});
  for (const auto& r : chart.rings)
    if (!r.points.empty() && !r.label.empty())
      entries.push_back({QString::fromStdString(r.label), nullptr, &r});
  if (entries.empty()) return;
  p.setFont(font(12));
  const QFontMetrics metrics(p.font());
  int text_width = 0;
  for (const auto& e : entries) text_width = std::max(text_width, metrics.horizontalAdvance(e.text));
  const double row = 17, w = 40 + text_width + 10, h = row * entries.size() + 8;
  // In the corner of the plot that hides the fewest data points (top right on ties).
  QRectF box;
  int hidden = -1;
  for (QPointF corner :
       {QPointF(plot.right() - w - 6, plot.top() + 6), QPointF(plot.left() + 6, plot.top() + 6),
        QPointF(plot.right() - w - 6, plot.bottom() - h - 6),
        QPointF(plot.left() + 6, plot.bottom() - h - 6)}) {
    const QRectF candidate(corner, QSizeF(w, h));
    int covered = 0;
    for (const auto& s : chart.series)
      for (size_t k = 0; k < s.points.size(); ++k) {
        if (!drawable(sx, s.points[k].x) || !drawable(sy, s.points[k].y)) continue;
        covered += 10 * candidate.contains(at(s.points[k]));  // a marker counts as much as a segment
        if (s.joined && k > 0 && drawable(sx, s.points[k - 1].x) && drawable(sy, s.points[k - 1].y))
          for (int t = 1; t < 10; ++t)
            covered += candidate.contains(at(s.points[k - 1]) +
                                          (at(s.points[k]) - at(s.points[k - 1])) * (t / 10.0));
      }
    if (hidden < 0 || covered < hidden) box = candidate, hidden = covered;
  }
  p.setPen(QPen(QColor(160, 160, 160), 1));
  p.setBrush(QColor(255, 255, 255, 225));
  p.drawRect(box);
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    const double y = box.top() + 4 + row * i + row / 2;
    const QPointF mid(box.left() + 20, y);
    if (e.series) {
      p.setPen(QPen(palette(e.series->color), 2, e.series->dashed ? Qt::DashLine : Qt::SolidLine));
      if (e.series->joined) p.drawLine(QPointF(box.left() + 6, y), QPointF(box.left() + 34, y));
      p.setPen(QPen(palette(e.series->color), 1));
      p.setBrush(palette(e.series->color));
      draw_marker(p, e.series->marker, mid, 4);
    } else {
      p.setPen(QPen(e.rings->red ? QColor(200, 0, 0) : Qt::black, 2));
      p.setBrush(Qt::NoBrush);
      p.drawEllipse(mid, 7, 7);
    }
    p.setPen(Qt::black);
    p.drawText(QRectF(box.left() + 40, y - row / 2, text_width + 4, row), Qt::AlignLeft | Qt::AlignVCenter,
               e.text);
  }
}

}  // namespace

std::string render_png(const Figure& figure) {
  ensure_gui_application();
  const int header = figure.title.empty() ? 0 : 34;
  const int panels = std::max<int>(1, figure.panels.size());
  QImage image(figure.panel_width * panels, figure.height + header, QImage::Format_ARGB32);
  image.fill(Qt::white);
  {
    QPainter p(&image);
    p.setRenderHint(QPainter::Antialiasing);
    p.setRenderHint(QPainter::TextAntialiasing);
    if (header) {
      p.setPen(Qt::black);
      p.setFont(font(17, true));
      p.drawText(QRect(0, 6, image.width(), header - 6), Qt::AlignCenter,
                 QString::fromStdString(figure.title));
    }
    for (int i = 0; i < int(figure.panels.size()); ++i)
      draw_chart(p, figure.panels[i],
                 QRect(i * figure.panel_width, header, figure.panel_width, figure.height));
  }
  QByteArray bytes;
  QBuffer buffer(&bytes);
  buffer.open(QIODevice::WriteOnly);
  if (!image.save(&buffer, "PNG")) throw std::runtime_error("cannot encode the figure as PNG");
  return std::string(bytes.constData(), size_t(bytes.size()));
}

void write_png(const Figure& figure, const std::string& path) {
  write_file_atomically(path, render_png(figure));
}

}  // namespace paratwin::viz
