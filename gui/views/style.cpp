// Application style and chart colours.
#include "gui/views/style.hpp"

#include <QApplication>
#include <QPalette>
#include <QStyleFactory>
#include <algorithm>

namespace paratwin::gui {

void apply_style(QApplication& app) {
  app.setStyle(QStyleFactory::create("Fusion"));
  QPalette p = app.palette();
  p.setColor(QPalette::Window, QColor(0xfb, 0xfc, 0xfd));
  p.setColor(QPalette::Base, Qt::white);
  p.setColor(QPalette::AlternateBase, colors::kPanel);
  p.setColor(QPalette::Text, colors::kText);
  p.setColor(QPalette::WindowText, colors::kText);
  p.setColor(QPalette::Button, QColor(0xf3, 0xf4, 0xf6));
  p.setColor(QPalette::Highlight, QColor(0xdd, 0xeb, 0xff));
  p.setColor(QPalette::HighlightedText, colors::kText);
  p.setColor(QPalette::ToolTipBase, QColor(0xff, 0xff, 0xf4));
  app.setPalette(p);
  QFont font = app.font();
  font.setFamily("DejaVu Sans");
  font.setPointSizeF(9.5);
  app.setFont(font);
  app.setStyleSheet(
      "QTabWidget::pane { border-top: 1px solid #d0d7de; }"
      "QTabBar::tab { padding: 7px 16px; margin-right: 2px; border: 1px solid transparent; }"
      "QTabBar::tab:selected { border-bottom: 2px solid #1f6feb; font-weight: bold; }"
      "QGroupBox { font-weight: bold; border: 1px solid #d0d7de; border-radius: 6px; margin-top: 10px; "
      "padding-top: 6px; }"
      "QGroupBox::title { subcontrol-origin: margin; left: 8px; padding: 0 4px; }"
      "QPushButton { padding: 4px 12px; border: 1px solid #d0d7de; border-radius: 5px; background: #f6f8fa; }"
      "QPushButton:hover { background: #eef1f4; }"
      "QPushButton:default, QPushButton[primary=\"true\"] { background: #1f6feb; color: white; border-color: "
      "#1a5fd0; }"
      "QPushButton:disabled { color: #8c959f; background: #f6f8fa; }"
      "QHeaderView::section { background: #f6f8fa; border: none; border-bottom: 1px solid #d0d7de;"
      " border-right: 1px solid #eaeef2; padding: 4px 6px; font-weight: bold; }"
      "QTableView { gridline-color: #eaeef2; selection-background-color: #ddebff; selection-color: #24292f; }"
      "QLabel[role=\"title\"] { font-size: 12pt; font-weight: bold; }"
      "QLabel[role=\"muted\"] { color: #6a737d; }");
}

QColor kind_color(SpanKind kind) {
  switch (kind) {
    case SpanKind::Forward:
      return QColor(0x4e, 0x79, 0xa7);
    case SpanKind::Backward:
      return QColor(0x59, 0xa1, 0x4f);
    case SpanKind::Recompute:
      return QColor(0xed, 0xc9, 0x48);
    case SpanKind::TpComm:
      return QColor(0xf2, 0x8e, 0x2b);
    case SpanKind::PpComm:
      return QColor(0xe1, 0x57, 0x59);
    case SpanKind::DpComm:
      return QColor(0x76, 0xb7, 0xb2);
    case SpanKind::Optimizer:
      return QColor(0xb0, 0x7a, 0xa1);
    case SpanKind::Copy:
      return QColor(0x9c, 0x75, 0x5f);
    case SpanKind::Idle:
      return QColor(0xe9, 0xeb, 0xee);
    case SpanKind::Other:
      break;
  }
  return QColor(0xba, 0xb0, 0xac);
}

QColor memory_color(MemoryPart part) {
  switch (part) {
    case MemoryPart::Weights:
      return QColor(0x4e, 0x79, 0xa7);
    case MemoryPart::Gradients:
      return QColor(0x76, 0xb7, 0xb2);
    case MemoryPart::Optimizer:
      return QColor(0xb0, 0x7a, 0xa1);
    case MemoryPart::Activations:
      return QColor(0xf2, 0x8e, 0x2b);
    case MemoryPart::Buffers:
      return QColor(0xba, 0xb0, 0xac);
  }
  return Qt::gray;
}

QColor utilization_color(double u) {
  u = std::clamp(u, 0.0, 1.0);
  // green -> amber -> red
  const QColor a(0x2d, 0xa4, 0x4e), b(0xf0, 0xb4, 0x29), c(0xd7, 0x3a, 0x49);
  auto mix = [](const QColor& x, const QColor& y, double f) {
    return QColor::fromRgbF(float(x.redF() + (y.redF() - x.redF()) * f),
                            float(x.greenF() + (y.greenF() - x.greenF()) * f),
                            float(x.blueF() + (y.blueF() - x.blueF()) * f));
  };
  return u < 0.5 ? mix(a, b, u / 0.5) : mix(b, c, (u - 0.5) / 0.5);
}

QColor unsampled_color() {
  return QColor(0xc4, 0xc9, 0xd0);
}

double draw_legend(QPainter& p, double x, double y, const std::vector<std::pair<QColor, QString>>& entries) {
  const double start = x;
  const QFontMetricsF fm(p.font());
  for (const auto& [color, label] : entries) {
    p.setPen(QPen(color.darker(115), 1));
    p.setBrush(color);
    p.drawRoundedRect(QRectF(x, y + 2, 12, 12), 2, 2);
    p.setPen(colors::kText);
    p.drawText(QPointF(x + 16, y + 12), label);
    x += 16 + fm.horizontalAdvance(label) + 14;
  }
  return x - start;
}

void draw_value_axis(QPainter& p, const ValueAxis& axis, double left, double right, const QString& unit) {
  for (const Tick& t : axis.ticks()) {
    p.setPen(QPen(colors::kGrid, 1));
    p.drawLine(QPointF(left, t.pixel), QPointF(right, t.pixel));
    p.setPen(colors::kMuted);
    const QString label = t.label + (unit.isEmpty() ? "" : " " + unit);
    p.drawText(QRectF(left - 64, t.pixel - 8, 58, 16), Qt::AlignRight | Qt::AlignVCenter, label);
  }
}

void draw_placeholder(QPainter& p, const QRectF& area, const QString& text) {
  p.setPen(colors::kMuted);
  p.drawText(area, Qt::AlignCenter | Qt::TextWordWrap, text);
}

}  // namespace paratwin::gui
