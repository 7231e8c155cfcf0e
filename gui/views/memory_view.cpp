// Memory chart painting.
#include "gui/views/memory_view.hpp"

#include <QHeaderView>
#include <QPainter>
#include <QTableWidget>
#include <QVBoxLayout>

#include "gui/model/candidate_table.hpp"
#include "gui/model/session.hpp"
#include "gui/views/style.hpp"

namespace paratwin::gui {

MemoryView::MemoryView(Session& session, QWidget* parent)
    : QWidget(parent), session_(session), table_(new QTableWidget) {
  setBackgroundRole(QPalette::Base);
  setAutoFillBackground(true);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->hide();
  table_->verticalHeader()->setDefaultSectionSize(22);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  table_->setFrameShape(QFrame::NoFrame);
  auto* layout = new QVBoxLayout(this);
  layout->addStretch(1);  // the chart is painted above the table
  layout->addWidget(table_);
  connect(&session_, &Session::selection_changed, this, [this] {
    const Candidate* c = session_.selected_candidate();
    bars_ = c ? stage_bars(c->report) : std::vector<StageBar>{};
    title_ = c ? plan_summary(c->plan) : QString();
    fill_table();
    update();
  });
  fill_table();
}

void MemoryView::fill_table() {
  QStringList headers{"stage"};
  for (int k = 0; k < kMemoryParts; ++k) headers << memory_part_label(MemoryPart(k)) + " GiB";
  headers << "peak GiB"
          << "capacity GiB";
  table_->setColumnCount(int(headers.size()));
  table_->setHorizontalHeaderLabels(headers);
  table_->setRowCount(int(bars_.size()));
  for (size_t i = 0; i < bars_.size(); ++i) {
    const StageBar& b = bars_[i];
    QStringList cells{b.label};
    for (double g : b.parts_gib) cells << QString::number(g, 'f', 2);
    cells << QString::number(b.peak_gib, 'f', 2) << QString::number(b.capacity_gib, 'f', 0);
    for (int c = 0; c < cells.size(); ++c) {
      auto* item = new QTableWidgetItem(cells[c]);
      item->setTextAlignment(c == 0 ? Qt::AlignLeft | Qt::AlignVCenter : Qt::AlignRight | Qt::AlignVCenter);
      if (!b.fits && c == cells.size() - 2) item->setForeground(colors::kBad);
      table_->setItem(int(i), c, item);
    }
  }
  const int rows = std::min<int>(int(bars_.size()), 8);
  table_->setFixedHeight(table_->horizontalHeader()->height() + 22 * rows + 4);
  table_->setVisible(!bars_.empty());
}

QRectF MemoryView::plot_area() const {
  const double bottom = (table_->isVisible() ? table_->y() : height()) - 40;
  return QRectF(90, 86, std::max(100, width() - 130), std::max(100.0, bottom - 86));
}

MemoryChartGeometry MemoryView::geometry() const {
  return layout_memory_chart(bars_, plot_area());
}

void MemoryView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  if (bars_.empty()) {
    draw_placeholder(p, rect(), "Choose a plan in the Plans view to see its memory per pipeline stage.");
    return;
  }
  QFont title = font();
  title.setPointSizeF(title.pointSizeF() + 2);
  title.setBold(true);
  p.setFont(title);
  p.setPen(colors::kText);
  p.drawText(QPointF(20, 28), "Device memory per pipeline stage (the rank with the highest peak)");
  p.setFont(font());
  p.setPen(colors::kMuted);
  p.drawText(QPointF(20, 48), title_);
  std::vector<std::pair<QColor, QString>> legend;
  for (int k = 0; k < kMemoryParts; ++k)
    legend.push_back({memory_color(MemoryPart(k)), memory_part_label(MemoryPart(k))});
  const double used = draw_legend(p, 20, 56, legend);
  p.setPen(QPen(colors::kBad, 2, Qt::DashLine));
  p.drawLine(QPointF(28 + used, 64), QPointF(52 + used, 64));
  p.setPen(colors::kText);
  p.drawText(QPointF(58 + used, 68), "device capacity");

  const QRectF plot = plot_area();
  const MemoryChartGeometry g = geometry();
  draw_value_axis(p, g.y, plot.left(), plot.right(), "GiB");
  const QFontMetricsF fm(font());
  for (size_t i = 0; i < bars_.size(); ++i) {
    const auto& bar = g.bars[i];
    const StageBar& s = bars_[i];
    p.setPen(Qt::NoPen);
    for (int k = 0; k < kMemoryParts; ++k) {
      p.setBrush(memory_color(MemoryPart(k)));
      p.drawRect(bar.segments[k]);
      // Labels inside segments tall enough for them.
      if (bar.segments[k].height() >= 16 && bar.segments[k].width() >= 60) {
        p.setPen(Qt::white);
        p.drawText(bar.segments[k], Qt::AlignCenter,
                   QString("%1 %2").arg(s.parts_gib[k], 0, 'f', 1).arg(memory_part_label(MemoryPart(k))));
        p.setPen(Qt::NoPen);
      }
    }
    const double slack = std::max(bar.whole.width() * 0.25, 14.0);
    p.setPen(QPen(colors::kBad, 2, Qt::DashLine));
    p.drawLine(QPointF(bar.whole.left() - slack, bar.capacity_y),
               QPointF(bar.whole.right() + slack, bar.capacity_y));
    p.setPen(s.fits ? colors::kText : colors::kBad);
    const QString peak = QString("%1 of %2 GiB%3")
                             .arg(s.peak_gib, 0, 'f', 1)
                             .arg(s.capacity_gib, 0, 'f', 0)
                             .arg(s.fits ? "" : " — does not fit");
    p.drawText(QRectF(bar.whole.center().x() - 120, bar.whole.top() - 20, 240, 18), Qt::AlignCenter, peak);
    p.setPen(colors::kText);
    p.drawText(QRectF(bar.whole.center().x() - 100, plot.bottom() + 6, 200, 18), Qt::AlignCenter,
               fm.elidedText(s.label, Qt::ElideRight, 200));
  }
  p.setPen(QPen(colors::kMuted, 1));
  p.drawLine(QPointF(plot.left(), plot.bottom()), QPointF(plot.right(), plot.bottom()));
}

}  // namespace paratwin::gui
