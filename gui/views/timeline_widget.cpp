// Gantt painting over TimelineLayout.
#include "gui/views/timeline_widget.hpp"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QScrollBar>
#include <QToolTip>
#include <QWheelEvent>
#include <cmath>

#include "gui/views/style.hpp"

namespace paratwin::gui {

TimelineWidget::TimelineWidget(QWidget* parent) : QAbstractScrollArea(parent) {
  viewport()->setMouseTracking(true);
  viewport()->setBackgroundRole(QPalette::Base);
  setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  setFrameShape(QFrame::NoFrame);
  axis_ = TimeAxis(0, 1, kLabelWidth, 600);
}

void TimelineWidget::set_sections(std::vector<TimelineSection> sections) {
  const double begin = layout_.begin_s(), end = layout_.end_s();
  layout_.set_sections(std::move(sections));
  update_geometry();
  if (layout_.begin_s() != begin || layout_.end_s() != end) fit();
  viewport()->update();
}

void TimelineWidget::fit() {
  const double d = layout_.duration_s() > 0 ? layout_.duration_s() : 1;
  show_range(layout_.begin_s() - 0.01 * d, layout_.end_s() + 0.01 * d);
}

void TimelineWidget::show_range(double begin_s, double end_s) {
  axis_.show(begin_s, end_s);
  changed_view();
}

void TimelineWidget::zoom(double factor) {
  axis_.zoom(factor, axis_.left() + axis_.width() / 2);
  changed_view();
}

void TimelineWidget::changed_view() {
  axis_.clamp(layout_.begin_s(), std::max(layout_.end_s(), layout_.begin_s() + 1e-9));
  viewport()->update();
}

double TimelineWidget::scroll_y() const {
  return verticalScrollBar()->value();
}

void TimelineWidget::update_geometry() {
  axis_.set_geometry(kLabelWidth, std::max(50, viewport()->width() - kLabelWidth - 12));
  const int overflow = int(layout_.content_height() - viewport()->height());
  verticalScrollBar()->setRange(0, std::max(0, overflow));
  verticalScrollBar()->setPageStep(viewport()->height());
  verticalScrollBar()->setSingleStep(int(layout_.metrics().lane));
}

void TimelineWidget::resizeEvent(QResizeEvent* event) {
  QAbstractScrollArea::resizeEvent(event);
  update_geometry();
}

std::optional<TimelineHit> TimelineWidget::hit_at(QPoint p) const {
  if (p.x() < kLabelWidth || p.y() < layout_.metrics().ruler) return std::nullopt;
  return layout_.hit(p.x(), p.y() + scroll_y(), axis_);
}

void TimelineWidget::paintEvent(QPaintEvent*) {
  QPainter p(viewport());
  const double w = viewport()->width(), h = viewport()->height();
  const double ruler = layout_.metrics().ruler;
  p.fillRect(viewport()->rect(), Qt::white);
  if (layout_.rows().empty()) {
    draw_placeholder(
        p, QRectF(0, 0, w, h),
        "No timeline yet.\nChoose a plan (Plans), simulate it, run it live, or open a Chrome trace "
        "that paratwin wrote (plan/simulate/run --trace).");
    return;
  }
  const double dy = scroll_y();
  const double right = axis_.left() + axis_.width();
  const std::vector<Tick> ticks = axis_.ticks();

  // Grid lines under everything.
  p.setPen(QPen(colors::kGrid, 1));
  for (const Tick& t : ticks) p.drawLine(QPointF(t.pixel, ruler), QPointF(t.pixel, h));

  p.save();
  p.setClipRect(QRectF(0, ruler, w, h - ruler));
  p.translate(0, -dy);
  const QFontMetricsF fm(p.font());
  // Section bands.
  for (const auto& [section, top] : layout_.headers()) {
    if (top - dy > h || top + layout_.metrics().section_header - dy < ruler) continue;
    const QRectF band(0, top, w, layout_.metrics().section_header);
    p.fillRect(band, colors::kPanel);
    p.setPen(colors::kText);
    QFont bold = p.font();
    bold.setBold(true);
    p.setFont(bold);
    const TimelineSection& s = layout_.sections()[size_t(section)];
    p.drawText(band.adjusted(8, 0, -8, 0), Qt::AlignVCenter | Qt::AlignLeft,
               s.title + "  ·  " + s.trace->source);
    p.setFont(QFont(font()));
  }
  // Rows: label column, lane background, items.
  bool shade = false;
  int section = -1;
  for (const TimelineRow& row : layout_.rows()) {
    if (row.section != section) section = row.section, shade = false;
    if (!row.process.isEmpty()) shade = !shade;
    if (row.top + row.height - dy < ruler || row.top - dy > h) continue;
    if (shade) p.fillRect(QRectF(0, row.top, w, row.height), QColor(0xfa, 0xfb, 0xfc));
    if (!row.process.isEmpty()) {
      p.setPen(QPen(colors::kGrid, 1));
      p.drawLine(QPointF(0, row.top), QPointF(w, row.top));
    }
    p.setPen(colors::kText);
    p.drawText(QRectF(8, row.top, kLabelWidth - 70, row.height), Qt::AlignVCenter | Qt::AlignLeft,
               fm.elidedText(row.process, Qt::ElideRight, kLabelWidth - 76));
    p.setPen(colors::kMuted);
    p.drawText(QRectF(kLabelWidth - 64, row.top, 58, row.height), Qt::AlignVCenter | Qt::AlignRight,
               row.thread);
    p.setPen(Qt::NoPen);
    for (const TimelineItem& item : layout_.items(row, axis_)) {
      const QColor c = kind_color(item.kind);
      p.setBrush(item.merged > 1 ? c.lighter(108) : c);
      p.drawRect(item.rect);
      if (item.span >= 0 && item.rect.width() > 40 && item.kind != SpanKind::Idle) {
        const Span& s = layout_.span(row, item.span);
        p.setPen(Qt::white);
        p.drawText(item.rect.adjusted(3, 0, -2, 0), Qt::AlignVCenter | Qt::AlignLeft,
                   fm.elidedText(s.name, Qt::ElideRight, item.rect.width() - 5));
        p.setPen(Qt::NoPen);
      }
    }
  }
  // The hovered span, outlined.
  if (hover_ && size_t(hover_->row) < layout_.rows().size()) {
    const TimelineRow& row = layout_.rows()[size_t(hover_->row)];
    const Span& s = layout_.span(row, hover_->span);
    const double off = layout_.offset(row.section);
    const double x0 = std::max(axis_.left(), axis_.x(s.start_s + off));
    const double x1 = std::min(right, axis_.x(s.end_s + off));
    p.setBrush(Qt::NoBrush);
    p.setPen(QPen(colors::kText, 1.5));
    p.drawRect(QRectF(x0, row.top + 1, std::max(2.0, x1 - x0), row.height - 2));
  }
  p.restore();

  // Ruler.
  p.fillRect(QRectF(0, 0, w, ruler), Qt::white);
  p.setPen(QPen(QColor(0xd0, 0xd7, 0xde), 1));
  p.drawLine(QPointF(0, ruler - 0.5), QPointF(w, ruler - 0.5));
  p.setPen(colors::kMuted);
  for (const Tick& t : ticks) {
    p.drawLine(QPointF(t.pixel, ruler - 6), QPointF(t.pixel, ruler));
    p.drawText(QRectF(t.pixel - 60, 2, 120, ruler - 8), Qt::AlignHCenter | Qt::AlignVCenter, t.label);
  }
  p.setPen(colors::kText);
  p.drawText(QRectF(8, 0, kLabelWidth - 16, ruler), Qt::AlignVCenter | Qt::AlignLeft,
             QString("%L1 tasks").arg(layout_.task_count()));
}

void TimelineWidget::wheelEvent(QWheelEvent* event) {
  const double steps = event->angleDelta().y() / 120.0;
  if (event->modifiers() & Qt::ShiftModifier) {
    verticalScrollBar()->setValue(verticalScrollBar()->value() - int(steps * 3 * layout_.metrics().lane));
    return;
  }
  axis_.zoom(std::pow(1.25, steps), event->position().x());
  changed_view();
}

void TimelineWidget::mousePressEvent(QMouseEvent* event) {
  if (event->button() == Qt::LeftButton) drag_from_ = event->pos();
}

void TimelineWidget::mouseMoveEvent(QMouseEvent* event) {
  if (drag_from_) {
    const QPoint d = event->pos() - *drag_from_;
    drag_from_ = event->pos();
    axis_.pan(d.x());
    verticalScrollBar()->setValue(verticalScrollBar()->value() - d.y());
    changed_view();
  }
  const auto hit = hit_at(event->pos());
  const bool changed = hit.has_value() != hover_.has_value() ||
                       (hit && (hit->row != hover_->row || hit->span != hover_->span));
  hover_ = hit;
  if (changed) {
    QString text;
    if (hit) {
      const TimelineRow& row = layout_.rows()[size_t(hit->row)];
      text = describe_span(layout_.span(row, hit->span), layout_.offset(row.section));
    }
    emit hovered(text);
    viewport()->update();
  }
}

void TimelineWidget::mouseReleaseEvent(QMouseEvent*) {
  drag_from_.reset();
}

bool TimelineWidget::viewportEvent(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    if (const auto hit = hit_at(help->pos())) {
      const TimelineRow& row = layout_.rows()[size_t(hit->row)];
      QToolTip::showText(help->globalPos(),
                         describe_span(layout_.span(row, hit->span), layout_.offset(row.section)),
                         viewport());
    } else {
      QToolTip::hideText();
    }
    return true;
  }
  return QAbstractScrollArea::viewportEvent(event);
}

}  // namespace paratwin::gui
