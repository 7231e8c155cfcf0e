// Live view.
#include "gui/views/live_view.hpp"

#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPainter>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QVBoxLayout>

#include "gui/model/live_run.hpp"
#include "gui/model/session.hpp"
#include "gui/views/line_plot.hpp"
#include "gui/views/style.hpp"

namespace paratwin::gui {

// Measured beside predicted: one pair of horizontal bars per figure.
class PredictionBars : public QWidget {
 public:
  PredictionBars() {
    setBackgroundRole(QPalette::Base);
    setAutoFillBackground(true);
    setMinimumHeight(150);
  }
  void set(std::optional<LiveComparison> c) {
    comparison_ = std::move(c);
    update();
  }

 protected:
  void paintEvent(QPaintEvent*) override {
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    QFont bold = font();
    bold.setBold(true);
    p.setFont(bold);
    p.drawText(QPointF(12, 18), "Iteration time: measured beside the twin's prediction");
    p.setFont(font());
    const QColor measured(0x4e, 0x79, 0xa7), predicted(0xba, 0xb0, 0xac);
    draw_legend(p, 12, 26, {{measured, "measured"}, {predicted, "predicted (analytic, same plan)"}});
    if (!comparison_) {
      draw_placeholder(p, QRectF(0, 40, width(), height() - 40),
                       "The comparison appears when a run finishes.");
      return;
    }
    std::vector<std::tuple<QString, double, double>> rows = {
        {"iteration", comparison_->measured_iteration_s, comparison_->predicted_iteration_s}};
    for (const auto& r : comparison_->breakdown) rows.push_back(r);
    double top = 1e-12;
    for (const auto& [l, m, pr] : rows) top = std::max({top, m, pr});
    const double left = 190, right = width() - 90, row_h = std::max(20.0, (height() - 56.0) / rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& [label, m, pr] = rows[i];
      const double y = 50 + i * row_h;
      p.setPen(colors::kText);
      p.drawText(QRectF(12, y, left - 20, row_h - 4), Qt::AlignVCenter | Qt::AlignRight, label);
      const double bh = (row_h - 6) / 2;
      p.setPen(Qt::NoPen);
      p.setBrush(measured);
      p.drawRect(QRectF(left, y, (right - left) * m / top, bh));
      p.setBrush(predicted);
      p.drawRect(QRectF(left, y + bh, (right - left) * pr / top, bh));
      p.setPen(colors::kMuted);
      p.drawText(QRectF(left + (right - left) * m / top + 4, y - 2, 90, bh + 4), Qt::AlignVCenter,
                 format_time(m, m / 100));
      p.drawText(QRectF(left + (right - left) * pr / top + 4, y + bh - 2, 90, bh + 4), Qt::AlignVCenter,
                 format_time(pr, pr / 100));
    }
  }

 private:
  std::optional<LiveComparison> comparison_;
};

LiveView::LiveView(Session& session, QWidget* parent)
    : QWidget(parent),
      session_(session),
      run_(new LiveRun(this)),
      ranks_(new QSpinBox),
      steps_(new QSpinBox),
      start_(new QPushButton("Start live run")),
      stop_(new QPushButton("Stop")),
      status_(new QLabel),
      loss_(new LinePlot("Training loss", "step", "")),
      throughput_(new LinePlot("Throughput", "step", "tok/s")),
      bars_(new PredictionBars),
      log_(new QPlainTextEdit) {
  start_->setProperty("primary", true);
  ranks_->setRange(1, 64);
  ranks_->setValue(2);
  ranks_->setPrefix("ranks ");
  steps_->setRange(1, 1000000);
  steps_->setValue(50);
  steps_->setPrefix("steps ");
  status_->setProperty("role", "muted");
  auto* bar = new QHBoxLayout;
  bar->addWidget(new QLabel("paratwin run <open scenario> --backend cpu"));
  bar->addWidget(ranks_);
  bar->addWidget(steps_);
  bar->addWidget(start_);
  bar->addWidget(stop_);
  bar->addWidget(status_, 1);
  loss_->set_placeholder("Start a live run of the open scenario (e.g. scenarios/live-cpu-tiny.yaml).");
  throughput_->set_placeholder("Tokens per second of each step appear here.");
  throughput_->set_y_format([](double v) { return format_si(v); });
  QFont mono("DejaVu Sans Mono");
  mono.setPointSizeF(8);
  log_->setFont(mono);
  log_->setReadOnly(true);
  log_->setMaximumBlockCount(2000);

  auto* plots = new QHBoxLayout;
  plots->addWidget(loss_);
  plots->addWidget(throughput_);
  auto* bottom = new QSplitter(Qt::Horizontal);
  bottom->addWidget(bars_);
  bottom->addWidget(log_);
  bottom->setSizes({600, 500});
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(bar);
  layout->addLayout(plots, 3);
  layout->addWidget(bottom, 2);

  stop_->setEnabled(false);
  connect(start_, &QPushButton::clicked, this, [this] { start(ranks_->value(), steps_->value()); });
  connect(stop_, &QPushButton::clicked, run_, &LiveRun::stop);
  connect(run_, &LiveRun::stepped, this, &LiveView::on_step);
  connect(run_, &LiveRun::logged, log_, &QPlainTextEdit::appendPlainText);
  connect(run_, &LiveRun::finished, this, &LiveView::on_finished);
  connect(&session_, &Session::checked, this, [this] {
    // Default ranks: the open scenario's data-parallel degree when it fixes one.
    if (!run_->running() && session_.scenario() && session_.scenario()->plan.dp)
      ranks_->setValue(*session_.scenario()->plan.dp);
  });
}

void LiveView::start(int ranks, long long steps) {
  ranks_->setValue(ranks);
  steps_->setValue(int(steps));
  log_->clear();
  bars_->set(std::nullopt);
  LiveRunRequest r{session_.scenario_file_for_children(), session_.overrides(), ranks, steps};
  run_->start(r);
  log_->appendPlainText("$ " + run_->command_line());
  status_->setText("running...");
  start_->setEnabled(false);
  stop_->setEnabled(true);
  on_step();
}

void LiveView::on_step() {
  std::vector<std::pair<double, double>> loss, tokens;
  for (const LiveStep& s : run_->steps()) {
    loss.push_back({double(s.step), s.loss});
    tokens.push_back({double(s.step), s.tokens_per_s});
  }
  loss_->set_series({{"loss", QColor(0xe1, 0x57, 0x59), loss, false, loss.size() < 80}});
  std::vector<PlotSeries> series{
      {"measured tokens/s", QColor(0x4e, 0x79, 0xa7), tokens, false, tokens.size() < 80}};
  if (const auto& c = run_->comparison(); c && !tokens.empty())
    series.push_back({"predicted",
                      QColor(0x59, 0x5f, 0x69),
                      {{tokens.front().first, c->predicted_tokens_per_s},
                       {tokens.back().first, c->predicted_tokens_per_s}},
                      true});
  throughput_->set_series(series);
  if (!run_->steps().empty()) {
    const LiveStep& s = run_->steps().back();
    status_->setText(QString("step %1 of %2 · loss %3 · %4 tok/s")
                         .arg(s.step)
                         .arg(s.steps)
                         .arg(s.loss, 0, 'f', 4)
                         .arg(s.tokens_per_s, 0, 'f', 0));
  }
}

void LiveView::on_finished(bool ok, const QString& message) {
  start_->setEnabled(true);
  stop_->setEnabled(false);
  status_->setText(message.section('\n', 0, 0));
  status_->setToolTip(message);
  if (!ok) return;
  bars_->set(run_->comparison());
  on_step();
  if (run_->trace()) session_.set_measured_trace(run_->trace());
}

}  // namespace paratwin::gui
