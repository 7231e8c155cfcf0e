// Timeline view.
#include "gui/views/timeline_view.hpp"

#include <QCheckBox>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QPainter>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include "gui/model/candidate_table.hpp"
#include "gui/model/session.hpp"
#include "gui/views/style.hpp"
#include "gui/views/timeline_widget.hpp"
#include "plan/spec/diagnostics.hpp"

namespace paratwin::gui {
namespace {

// The colour key of task kinds.
class KindLegend : public QWidget {
 public:
  KindLegend() { setMinimumHeight(20); }

 protected:
  void paintEvent(QPaintEvent*) override {
    QPainter p(this);
    std::vector<std::pair<QColor, QString>> entries;
    for (int k = 0; k < kSpanKinds - 1; ++k)
      entries.push_back({kind_color(SpanKind(k)), span_kind_label(SpanKind(k))});
    draw_legend(p, 4, 2, entries);
  }
};

}  // namespace

TimelineView::TimelineView(Session& session, QWidget* parent)
    : QWidget(parent),
      session_(session),
      timeline_(new TimelineWidget),
      show_predicted_(new QCheckBox("predicted")),
      show_simulated_(new QCheckBox("simulated")),
      show_measured_(new QCheckBox("measured")),
      simulate_(new QPushButton("Simulate this plan")),
      measured_step_(new QSpinBox),
      status_(new QLabel),
      hover_(new QLabel) {
  auto* fit = new QPushButton("Fit");
  auto* zoom_in = new QPushButton("+");
  auto* zoom_out = new QPushButton("−");
  auto* open = new QPushButton("Open trace...");
  for (QCheckBox* box : {show_predicted_, show_simulated_, show_measured_}) box->setChecked(true);
  simulate_->setToolTip("paratwin simulate with this plan (a child process): contention on shared links");
  auto* bar = new QHBoxLayout;
  bar->addWidget(fit);
  bar->addWidget(zoom_in);
  bar->addWidget(zoom_out);
  bar->addSpacing(12);
  bar->addWidget(show_predicted_);
  bar->addWidget(show_simulated_);
  bar->addWidget(show_measured_);
  measured_step_->setPrefix("measured step ");
  measured_step_->setToolTip("The step of the live run lined up with the predicted iteration");
  measured_step_->setVisible(false);
  bar->addWidget(measured_step_);
  bar->addStretch(1);
  bar->addWidget(status_);
  bar->addWidget(simulate_);
  bar->addWidget(open);
  hover_->setProperty("role", "muted");
  hover_->setMinimumHeight(34);
  hover_->setText(
      "Wheel: zoom around the pointer · drag: pan · Shift+wheel: scroll lanes · hover a task for details");

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(bar);
  layout->addWidget(new KindLegend);
  layout->addWidget(timeline_, 1);
  layout->addWidget(hover_);

  connect(fit, &QPushButton::clicked, timeline_, &TimelineWidget::fit);
  connect(zoom_in, &QPushButton::clicked, this, [this] { timeline_->zoom(2); });
  connect(zoom_out, &QPushButton::clicked, this, [this] { timeline_->zoom(0.5); });
  connect(open, &QPushButton::clicked, this, [this] {
    const QString path =
        QFileDialog::getOpenFileName(this, "Open a trace", {}, "Trace (*.json *.json.gz *.pftrace)");
    if (!path.isEmpty()) open_trace(path);
  });
  connect(simulate_, &QPushButton::clicked, this, [this] { session_.simulate({}); });
  connect(timeline_, &TimelineWidget::hovered, this, [this](const QString& text) {
    if (!text.isEmpty()) hover_->setText(text);
  });
  for (QCheckBox* box : {show_predicted_, show_simulated_, show_measured_})
    connect(box, &QCheckBox::toggled, this, &TimelineView::rebuild);
  connect(&session_, &Session::selection_changed, this, &TimelineView::rebuild);
  connect(&session_, &Session::simulation_finished, this, &TimelineView::rebuild);
  connect(&session_, &Session::measured_changed, this, [this] {
    const auto measured = session_.measured_trace();
    measured_step_->setVisible(measured && measured->steps > 1);
    if (measured && measured->steps > 1) {
      measured_step_->setRange(1, measured->steps);
      measured_step_->setValue(measured->steps);  // the last: past the warm-up
      align_measured_step(measured->steps);
    } else {
      rebuild();
    }
  });
  connect(measured_step_, &QSpinBox::valueChanged, this, &TimelineView::align_measured_step);
  connect(&session_, &Session::simulation_started, this, [this] {
    status_->setText("simulating...");
    simulate_->setEnabled(false);
  });
  connect(&session_, &Session::simulation_failed, this, [this](const QString& message) {
    status_->setText(message.section('\n', 0, 0));
    status_->setToolTip(message);
    simulate_->setEnabled(true);
  });
  rebuild();
}

void TimelineView::open_trace(const QString& path) {
  try {
    session_.set_measured_trace(std::make_shared<Trace>(load_chrome_trace(path)));
  } catch (const InputError& e) {
    status_->setText(QString::fromStdString(e.diagnostics().front().str()));
  }
}

void TimelineView::align_measured_step(int step) {
  if (measured_step_->value() != step) {
    measured_step_->setValue(step);  // comes back here through valueChanged
    return;
  }
  rebuild();
  const auto measured = session_.measured_trace();
  const auto span = measured ? step_span(*measured, step) : std::nullopt;
  if (!span) return;
  double length = span->second - span->first;
  if (const auto predicted = session_.predicted_trace())
    length = std::max(length, predicted->end_s - predicted->begin_s);
  timeline_->show_range(-0.02 * length, 1.15 * length);
}

void TimelineView::rebuild() {
  simulate_->setEnabled(session_.selected_candidate() && !session_.simulating());
  std::vector<TimelineSection> sections;
  if (show_predicted_->isChecked() && session_.predicted_trace())
    sections.push_back({"predicted (analytic)", session_.predicted_trace(), std::nullopt});
  // A simulation of another plan than the chosen one is left out.
  const Candidate* chosen = session_.selected_candidate();
  if (show_simulated_->isChecked() && session_.simulated_trace() && chosen &&
      session_.simulated_plan() == plan_summary(chosen->plan))
    sections.push_back({"simulated (SimGrid)", session_.simulated_trace(), std::nullopt});
  if (const auto measured = session_.measured_trace(); show_measured_->isChecked() && measured) {
    std::optional<double> offset;
    if (measured->steps > 1)
      if (const auto span = step_span(*measured, measured_step_->value())) offset = -span->first;
    // A live run's trace has steps; a file opened may be any trace ParaTwin wrote.
    const QString title = measured->steps > 1
                              ? QString("measured (live run, step %1 at 0)").arg(measured_step_->value())
                          : measured->steps == 1 ? QString("measured (live run)")
                                                 : QString("opened trace");
    sections.push_back({title, measured, offset});
  }
  timeline_->set_sections(std::move(sections));
  if (!session_.simulating() && status_->text() == "simulating...") status_->clear();
}

}  // namespace paratwin::gui
