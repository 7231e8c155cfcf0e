// Reliability view.
#include "gui/views/reliability_view.hpp"

#include <QComboBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>
#include <utility>

#include "gui/model/axis.hpp"
#include "gui/model/session.hpp"
#include "gui/model/spread_curve.hpp"
#include "gui/views/line_plot.hpp"
#include "gui/views/style.hpp"

namespace paratwin::gui {
namespace {

QString days(double value, double step) {
  return step >= 86400 * 0.999 ? QString("day %1").arg(value / 86400, 0, 'f', 0) : format_time(value, step);
}

QString duration(double s) {
  return s > 0 ? format_time(s, s / 100) : QString("-");
}

// Iterations a simulation runs unless asked otherwise: enough to see a spread, still quick.
constexpr int kDefaultIterations = 20;

QString row_html(const QString& label, const QString& value) {
  return QString("<tr><td style='color:#6a737d; padding-right:12px'>%1</td><td><b>%2</b></td></tr>")
      .arg(label, value);
}

std::vector<std::pair<double, double>> cumulative(const std::vector<double>& times, double horizon) {
  std::vector<std::pair<double, double>> out{{0, 0}};
  for (size_t i = 0; i < times.size(); ++i) {
    out.push_back({times[i], double(i)});
    out.push_back({times[i], double(i + 1)});
  }
  out.push_back({horizon, double(times.size())});
  return out;
}

}  // namespace

ReliabilityView::ReliabilityView(Session& session, QWidget* parent)
    : QWidget(parent),
      session_(session),
      horizon_(new QLineEdit("30d")),
      seed_(new QSpinBox),
      gpu_mtbf_(new QLineEdit),
      host_mtbf_(new QLineEdit),
      interval_(new QLineEdit),
      policy_(new QComboBox),
      iterations_(new QSpinBox),
      kernel_cv_(new QLineEdit),
      step_cv_(new QLineEdit),
      step_correlation_(new QLineEdit),
      gpu_cv_(new QLineEdit),
      run_(new QPushButton("Simulate the horizon")),
      status_(new QLabel),
      figures_(new QLabel),
      goodput_(new LinePlot("Goodput so far", "time into the horizon", "")),
      events_(new LinePlot("Failures and restarts so far", "time into the horizon", "")),
      spread_(new LinePlot("Iteration times: fraction of simulated steps at most this long", "iteration time",
                           "")) {
  run_->setProperty("primary", true);
  seed_->setRange(1, 1 << 30);
  gpu_mtbf_->setPlaceholderText("scenario's (e.g. 3867d)");
  host_mtbf_->setPlaceholderText("scenario's (e.g. 783d)");
  interval_->setPlaceholderText("scenario's (auto: best goodput)");
  policy_->addItems({"", "restart", "spares", "shrink"});
  iterations_->setRange(1, 1000);
  iterations_->setValue(kDefaultIterations);
  kernel_cv_->setPlaceholderText("scenario's (e.g. 0.05)");
  step_cv_->setPlaceholderText("scenario's (e.g. 0.03)");
  step_correlation_->setPlaceholderText("scenario's (0 to 1, e.g. 0.5)");
  gpu_cv_->setPlaceholderText("scenario's (e.g. 0.02)");
  auto* inputs = new QGroupBox("Horizon and what-if (--set)");
  auto* form = new QFormLayout(inputs);
  form->addRow("horizon", horizon_);
  form->addRow("seed", seed_);
  form->addRow("MTBF per GPU", gpu_mtbf_);
  form->addRow("MTBF per host", host_mtbf_);
  form->addRow("checkpoint interval", interval_);
  form->addRow("after a failure", policy_);
  form->addRow("iterations", iterations_);
  form->addRow("kernel time CV", kernel_cv_);
  form->addRow("whole step CV", step_cv_);
  form->addRow("step correlation between GPUs", step_correlation_);
  form->addRow("GPU slowness CV", gpu_cv_);
  form->addRow(run_);
  status_->setWordWrap(true);
  status_->setProperty("role", "muted");
  form->addRow(status_);
  auto* figures_box = new QGroupBox("Over the horizon");
  auto* figures_layout = new QVBoxLayout(figures_box);
  figures_->setTextFormat(Qt::RichText);
  figures_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  figures_layout->addWidget(figures_);
  auto* left = new QVBoxLayout;
  left->addWidget(inputs);
  left->addWidget(figures_box, 1);
  auto* left_widget = new QWidget;
  left_widget->setLayout(left);
  left_widget->setMaximumWidth(360);

  for (LinePlot* plot : {goodput_, events_}) {
    plot->set_x_format(days);
    plot->set_placeholder("Simulate the chosen plan over a horizon to see failures, restarts and goodput.");
  }
  spread_->set_x_format(format_time);
  spread_->set_y_range(std::pair{0.0, 1.0});
  spread_->set_y_format([](double v) { return QString::number(100 * v, 'f', 0) + "%"; });
  spread_->set_placeholder(
      "Simulate several iterations (or with kernel/GPU variability) to see the spread of step times.");
  goodput_->set_y_range(std::pair{0.0, 1.0});
  goodput_->set_y_format([](double v) { return QString::number(100 * v, 'f', 0) + "%"; });
  auto* charts = new QVBoxLayout;
  charts->addWidget(goodput_, 3);
  charts->addWidget(events_, 2);
  charts->addWidget(spread_, 2);
  auto* layout = new QHBoxLayout(this);
  layout->addWidget(left_widget);
  layout->addLayout(charts, 1);

  connect(run_, &QPushButton::clicked, this, &ReliabilityView::simulate);
  connect(&session_, &Session::simulation_finished, this, [this] {
    refresh_spread();
    refresh();
  });
  connect(&session_, &Session::simulation_started, this, [this] { status_->setText("simulating..."); });
  connect(&session_, &Session::simulation_failed, this, [this](const QString& m) { status_->setText(m); });
  refresh();
}

void ReliabilityView::set_inputs(const QString& horizon, const QString& gpu_mtbf, const QString& host_mtbf,
                                 const QString& checkpoint_interval) {
  horizon_->setText(horizon);
  gpu_mtbf_->setText(gpu_mtbf);
  host_mtbf_->setText(host_mtbf);
  interval_->setText(checkpoint_interval);
}

void ReliabilityView::set_spread_inputs(const SpreadInputs& inputs) {
  iterations_->setValue(inputs.iterations);
  kernel_cv_->setText(inputs.kernel_cv);
  step_cv_->setText(inputs.step_cv);
  step_correlation_->setText(inputs.step_correlation);
  gpu_cv_->setText(inputs.gpu_cv);
}

void ReliabilityView::simulate() {
  SimulationRequest r;
  r.horizon = horizon_->text().trimmed().isEmpty() ? "30d" : horizon_->text().trimmed();
  r.seed = quint64(seed_->value());
  if (!gpu_mtbf_->text().trimmed().isEmpty()) r.sets << "failures.gpu.mtbf=" + gpu_mtbf_->text().trimmed();
  if (!host_mtbf_->text().trimmed().isEmpty()) r.sets << "failures.host.mtbf=" + host_mtbf_->text().trimmed();
  if (!interval_->text().trimmed().isEmpty()) r.sets << "checkpoint.interval=" + interval_->text().trimmed();
  if (!policy_->currentText().isEmpty()) r.sets << "elasticity.policy=" + policy_->currentText();
  r.iterations = iterations_->value();
  for (auto [field, key] : {std::pair{kernel_cv_, "variability.kernels.cv"},
                            {step_cv_, "variability.steps.cv"},
                            {step_correlation_, "variability.steps.correlation"},
                            {gpu_cv_, "variability.ranks.cv"}})
    if (!field->text().trimmed().isEmpty()) r.sets << QString(key) + "=" + field->text().trimmed();
  session_.simulate(r);
}

void ReliabilityView::refresh_spread() {
  const std::optional<SpreadCurve> c = spread_curve(session_.simulation_report());
  spread_html_.clear();
  if (!c) {
    spread_->set_series({});
    spread_->set_markers({});
    return;
  }
  const IterationSpread& s = c->spread;
  const double lo = std::min(s.noise_free_s, c->cdf.empty() ? s.noise_free_s : c->cdf.front().first);
  const double hi = std::max(s.noise_free_s, s.max_s);
  const double pad = std::max(1e-9, 0.05 * (hi - lo));
  spread_->set_x_range(std::pair{lo - pad, hi + pad});
  spread_->set_series({{"simulated iterations", colors::kAccent, c->cdf, false, c->cdf.size() < 60}});
  spread_->set_markers({{s.noise_free_s, colors::kGood, "noise-free step " + duration(s.noise_free_s)},
                        {s.p95_s, colors::kBad, "P95 " + duration(s.p95_s)}});
  spread_html_ =
      row_html("iterations", QString::number(s.times_s.size())) +
      row_html("noise-free step", duration(s.noise_free_s)) +
      row_html("P50 / P95 / P99", duration(s.p50_s) + " / " + duration(s.p95_s) + " / " + duration(s.p99_s)) +
      row_html(QString("steps > %1% slower").arg(s.slower_than_pct),
               QString::number(100 * s.p_slower, 'f', 1) + "%");
  if (!session_.reliability()) figures_->setText("<table cellspacing=3>" + spread_html_ + "</table>");
}

void ReliabilityView::refresh() {
  const auto& h = session_.reliability();
  if (!h) return;
  status_->setText("simulated: " + session_.simulated_plan());
  const std::pair<double, double> range{0.0, h->horizon_s};
  for (LinePlot* plot : {goodput_, events_}) plot->set_x_unit(h->horizon_s >= 3 * 86400 ? 86400 : 3600);
  goodput_->set_x_range(range);
  goodput_->set_series({{"goodput (useful tokens / full-speed tokens)", colors::kAccent, h->goodput_curve,
                         false, h->goodput_curve.size() < 100}});
  goodput_->set_intervals(h->down, QColor(0xcf, 0x22, 0x2e, 40), "down (failure to restart)");
  std::vector<PlotMarker> markers;
  for (const Marker& m : h->failure_markers) markers.push_back({m.at_s, colors::kBad, m.name});
  goodput_->set_markers(markers);

  std::vector<double> failures, restarts;
  for (const Marker& m : h->failure_markers) failures.push_back(m.at_s);
  for (const Marker& m : h->restart_markers) restarts.push_back(m.at_s);
  events_->set_x_range(range);
  events_->set_series({{"failures", colors::kBad, cumulative(failures, h->horizon_s)},
                       {"restarts", QColor(0xf2, 0x8e, 0x2b), cumulative(restarts, h->horizon_s), true}});

  const auto row = row_html;
  QString html = "<table cellspacing=3>";
  html += row("horizon", duration(h->horizon_s));
  html += row("goodput", QString::number(100 * h->goodput, 'f', 1) + "%");
  html +=
      row("effective training time", QString::number(100 * h->effective_training_time_ratio, 'f', 1) + "%");
  html += row("failures / restarts", QString("%1 / %2").arg(h->failures).arg(h->restarts));
  html += row("lost work", duration(h->lost_work_s));
  html += row("downtime", duration(h->downtime_s));
  html += row("checkpoint every", duration(h->checkpoint_interval_s));
  html += row("Young/Daly interval", duration(h->young_daly_interval_s));
  html += row("checkpoint cost", duration(h->checkpoint_cost_s));
  html += row("job MTBF", duration(h->job_mtbf_s));
  html += row("time to train", duration(h->time_to_train_s));
  figures_->setText(html + spread_html_ + "</table>");
}

}  // namespace paratwin::gui
