// Main window wiring.
#include "gui/views/main_window.hpp"

#include <QFileDialog>
#include <QFileInfo>
#include <QLabel>
#include <QMenuBar>
#include <QStatusBar>
#include <QTabWidget>

#include "gui/model/candidate_table.hpp"
#include "gui/model/session.hpp"
#include "gui/views/live_view.hpp"
#include "gui/views/memory_view.hpp"
#include "gui/views/plans_view.hpp"
#include "gui/views/reliability_view.hpp"
#include "gui/views/scenario_view.hpp"
#include "gui/views/timeline_view.hpp"
#include "gui/views/topology_view.hpp"

namespace paratwin::gui {

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent), session_(new Session(this)), tabs_(new QTabWidget), status_(new QLabel) {
  scenario_ = new ScenarioView(*session_);
  plans_ = new PlansView(*session_);
  timeline_ = new TimelineView(*session_);
  memory_ = new MemoryView(*session_);
  topology_ = new TopologyView(*session_);
  reliability_ = new ReliabilityView(*session_);
  live_ = new LiveView(*session_);
  tabs_->setDocumentMode(true);
  tabs_->addTab(scenario_, "Scenario");
  tabs_->addTab(plans_, "Plans");
  tabs_->addTab(timeline_, "Timeline");
  tabs_->addTab(memory_, "Memory");
  tabs_->addTab(topology_, "Topology");
  tabs_->addTab(reliability_, "Reliability");
  tabs_->addTab(live_, "Live");
  setCentralWidget(tabs_);
  statusBar()->addWidget(status_, 1);

  QMenu* file = menuBar()->addMenu("&File");
  file->addAction("&Open scenario...", QKeySequence::Open, this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, "Open scenario", {}, "YAML (*.yaml *.yml)");
    if (!path.isEmpty()) session_->open(path);
  });
  file->addAction("Open &trace...", this, [this] {
    const QString path =
        QFileDialog::getOpenFileName(this, "Open a trace", {}, "Trace (*.json *.json.gz *.pftrace)");
    if (path.isEmpty()) return;
    timeline_->open_trace(path);
    tabs_->setCurrentWidget(timeline_);
  });
  file->addAction("&Save scenario", QKeySequence::Save, this, [this] { session_->save(); });
  file->addSeparator();
  file->addAction("&Quit", QKeySequence::Quit, this, &QWidget::close);

  connect(session_, &Session::checked, this, &MainWindow::update_title);
  connect(session_, &Session::selection_changed, this, [this] {
    const Candidate* c = session_->selected_candidate();
    status_->setText(c ? "chosen plan: " + plan_summary(c->plan) : QString());
  });
  connect(session_, &Session::simulation_started, this,
          [this](const QString& command) { status_->setText("running: " + command); });
  connect(session_, &Session::simulation_finished, this,
          [this] { status_->setText("simulated: " + session_->simulated_plan()); });
  connect(session_, &Session::simulation_failed, this,
          [this](const QString& message) { status_->setText(message.section('\n', 0, 0)); });
  resize(1400, 860);
}

void MainWindow::update_title() {
  const QString name = session_->scenario() ? QString::fromStdString(session_->scenario()->name)
                                            : QFileInfo(session_->path()).fileName();
  setWindowTitle(QString("ParaTwin — %1%2").arg(name, session_->modified() ? " (modified)" : ""));
}

}  // namespace paratwin::gui
