// The look of paratwin-gui: the application style and palette, the colours of task kinds, memory
// parts and link utilization, and small painting helpers shared by the charts.
#pragma once

#include <QColor>
#include <QPainter>
#include <QString>
#include <utility>
#include <vector>

#include "gui/model/axis.hpp"
#include "gui/model/memory_bars.hpp"
#include "gui/model/trace.hpp"

class QApplication;

namespace paratwin::gui {

void apply_style(QApplication& app);

QColor kind_color(SpanKind kind);
QColor memory_color(MemoryPart part);
// Green (idle) through amber to red (saturated); grey when the simulation did not watch the link.
QColor utilization_color(double utilization);
QColor unsampled_color();

namespace colors {
inline const QColor kText{0x24, 0x29, 0x2f};
inline const QColor kMuted{0x6a, 0x73, 0x7d};
inline const QColor kGrid{0xe4, 0xe7, 0xeb};
inline const QColor kAccent{0x1f, 0x6f, 0xeb};
inline const QColor kBad{0xcf, 0x22, 0x2e};
inline const QColor kGood{0x1a, 0x7f, 0x37};
inline const QColor kPanel{0xf6, 0xf8, 0xfa};
}  // namespace colors

// A row of colour swatches with labels, starting at (x, y); returns the width used.
double draw_legend(QPainter& p, double x, double y, const std::vector<std::pair<QColor, QString>>& entries);
// Horizontal grid lines and labels of a value axis along [left, right].
void draw_value_axis(QPainter& p, const ValueAxis& axis, double left, double right, const QString& unit);
// Text shown centred in an empty chart ("simulate to see ...").
void draw_placeholder(QPainter& p, const QRectF& area, const QString& text);

}  // namespace paratwin::gui
