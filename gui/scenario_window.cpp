// Scenario view: source, summary and problems.
#include "gui/scenario_window.hpp"

#include <QFile>
#include <QFileDialog>
#include <QLabel>
#include <QListWidget>
#include <QMenuBar>
#include <QPlainTextEdit>
#include <QSplitter>
#include <QStatusBar>

#include "plan/spec/scenario.hpp"
#include "plan/spec/summary.hpp"

namespace paratwin::gui {

ScenarioWindow::ScenarioWindow(QWidget* parent)
    : QMainWindow(parent),
      source_(new QPlainTextEdit),
      summary_(new QPlainTextEdit),
      problems_(new QListWidget),
      status_(new QLabel) {
  setWindowTitle("ParaTwin");
  source_->setReadOnly(true);
  summary_->setReadOnly(true);
  QFont mono("Monospace");
  mono.setStyleHint(QFont::TypeWriter);
  source_->setFont(mono);
  summary_->setFont(mono);

  auto* right = new QSplitter(Qt::Vertical);
  right->addWidget(summary_);
  right->addWidget(problems_);
  auto* split = new QSplitter(Qt::Horizontal);
  split->addWidget(source_);
  split->addWidget(right);
  setCentralWidget(split);
  statusBar()->addWidget(status_);

  QMenu* file = menuBar()->addMenu("&File");
  file->addAction("&Open scenario...", QKeySequence::Open, this, &ScenarioWindow::choose_file);
  file->addAction("&Quit", QKeySequence::Quit, this, &QWidget::close);
  resize(1100, 700);
}

void ScenarioWindow::choose_file() {
  const QString path = QFileDialog::getOpenFileName(this, "Open scenario", QString(), "YAML (*.yaml *.yml)");
  if (!path.isEmpty()) open_scenario(path);
}

void ScenarioWindow::open_scenario(const QString& path) {
  QFile f(path);
  source_->setPlainText(f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QString());
  problems_->clear();
  summary_->clear();
  try {
    const ScenarioSpec scenario = load_scenario(path.toStdString());
    summary_->setPlainText(QString::fromStdString(to_text(summarize(scenario))));
    for (const auto& w : scenario.warnings) problems_->addItem(QString::fromStdString(w.str()));
    status_->setText("ok: " + path);
  } catch (const InputError& e) {
    for (const auto& d : e.diagnostics()) problems_->addItem(QString::fromStdString(d.str()));
    status_->setText(QString("%1 error(s) in %2").arg(e.diagnostics().size()).arg(path));
  }
  setWindowTitle("ParaTwin - " + path);
}

}  // namespace paratwin::gui
