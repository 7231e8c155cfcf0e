// Reliability view: the chosen plan simulated over a horizon (failures, restarts, checkpoints),
// with what-if failure rates and checkpoint policy as overrides; goodput over time with downtime
// shaded and failures marked, the events counted over time, and the horizon's figures; and the spread
// of the simulated iteration times (with what-if kernel and GPU variability), as a distribution.
#pragma once

#include <QWidget>

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;

namespace paratwin::gui {

class LinePlot;
class Session;

class ReliabilityView : public QWidget {
  Q_OBJECT

 public:
  explicit ReliabilityView(Session& session, QWidget* parent = nullptr);

  // What-if settings, as a user would type them ("" keeps the scenario's).
  void set_inputs(const QString& horizon, const QString& gpu_mtbf, const QString& host_mtbf,
                  const QString& checkpoint_interval);
  // Iterations to simulate and the variability to try ("" keeps the scenario's).
  struct SpreadInputs {
    int iterations = 1;
    QString kernel_cv;         // each kernel's own coefficient of variation
    QString step_cv;           // a GPU's whole step: one draw shared by its kernels
    QString step_correlation;  // how much two GPUs' step draws move together, 0 to 1
    QString gpu_cv;            // each GPU's lasting slowness
  };
  void set_spread_inputs(const SpreadInputs& inputs);
  void simulate();
  LinePlot* goodput_plot() const { return goodput_; }
  LinePlot* events_plot() const { return events_; }
  LinePlot* spread_plot() const { return spread_; }

 private:
  void refresh();
  void refresh_spread();

  Session& session_;
  QLineEdit* horizon_;
  QSpinBox* seed_;
  QLineEdit* gpu_mtbf_;
  QLineEdit* host_mtbf_;
  QLineEdit* interval_;
  QComboBox* policy_;
  QSpinBox* iterations_;
  QLineEdit* kernel_cv_;
  QLineEdit* step_cv_;
  QLineEdit* step_correlation_;
  QLineEdit* gpu_cv_;
  QPushButton* run_;
  QLabel* status_;
  QLabel* figures_;
  LinePlot* goodput_;
  LinePlot* events_;
  LinePlot* spread_;
  QString spread_html_;
};

}  // namespace paratwin::gui
