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

#include "gui/model/axis.hpp"
#include "gui/model/session.hpp"
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
      run_(new QPushButton("Simulate the horizon")),
      status_(new QLabel),
      figures_(new QLabel),
      goodput_(new LinePlot("Goodput so far", "time into the horizon", "")),
      events_(new LinePlot("Failures and restarts so far", "time into the horizon", "")) {
  run_->setProperty("primary", true);
  seed_->setRange(1, 1 << 30);
  gpu_mtbf_->setPlaceholderText("scenario's (e.g. 3867d)");
  host_mtbf_->setPlaceholderText("scenario's (e.g. 783d)");
  interval_->setPlaceholderText("scenario's (auto: best goodput)");
  policy_->addItems({"", "restart", "spares", "shrink"});
  auto* inputs = new QGroupBox("Horizon and what-if (--set)");
  auto* form = new QFormLayout(inputs);
  form->addRow("horizon", horizon_);
  form->addRow("seed", seed_);
  form->addRow("MTBF per GPU", gpu_mtbf_);
  form->addRow("MTBF per host", host_mtbf_);
  form->addRow("checkpoint interval", interval_);
  form->addRow("after a failure", policy_);
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
  goodput_->set_y_range(std::pair{0.0, 1.0});
  goodput_->set_y_format([](double v) { return QString::number(100 * v, 'f', 0) + "%"; });
  auto* charts = new QVBoxLayout;
  charts->addWidget(goodput_, 3);
  charts->addWidget(events_, 2);
  auto* layout = new QHBoxLayout(this);
  layout->addWidget(left_widget);
  layout->addLayout(charts, 1);

  connect(run_, &QPushButton::clicked, this, &ReliabilityView::simulate);
  connect(&session_, &Session::simulation_finished, this, &ReliabilityView::refresh);
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

void ReliabilityView::simulate() {
  SimulationRequest r;
  r.horizon = horizon_->text().trimmed().isEmpty() ? "30d" : horizon_->text().trimmed();
  r.seed = quint64(seed_->value());
  if (!gpu_mtbf_->text().trimmed().isEmpty()) r.sets << "failures.gpu.mtbf=" + gpu_mtbf_->text().trimmed();
  if (!host_mtbf_->text().trimmed().isEmpty()) r.sets << "failures.host.mtbf=" + host_mtbf_->text().trimmed();
  if (!interval_->text().trimmed().isEmpty()) r.sets << "checkpoint.interval=" + interval_->text().trimmed();
  if (!policy_->currentText().isEmpty()) r.sets << "elasticity.policy=" + policy_->currentText();
  session_.simulate(r);
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

  auto row = [](const QString& label, const QString& value) {
    return QString("<tr><td style='color:#6a737d; padding-right:12px'>%1</td><td><b>%2</b></td></tr>")
        .arg(label, value);
  };
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
  figures_->setText(html + "</table>");
}

}  // namespace paratwin::gui
