// Live view: `paratwin run` on the open scenario as a child process, its loss and tokens/s plotted
// as the steps come, stop at any time, and at the end the measured iteration beside the twin's
// prediction for the same plan (and the measured timeline under the predicted one).
#pragma once

#include <QWidget>

class QLabel;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;

namespace paratwin::gui {

class LinePlot;
class LiveRun;
class Session;
class PredictionBars;

class LiveView : public QWidget {
  Q_OBJECT

 public:
  explicit LiveView(Session& session, QWidget* parent = nullptr);

  LiveRun& run() const { return *run_; }
  void start(int ranks, long long steps);
  LinePlot* loss_plot() const { return loss_; }
  LinePlot* throughput_plot() const { return throughput_; }

 private:
  void on_step();
  void on_finished(bool ok, const QString& message);

  Session& session_;
  LiveRun* run_;
  QSpinBox* ranks_;
  QSpinBox* steps_;
  QPushButton* start_;
  QPushButton* stop_;
  QLabel* status_;
  LinePlot* loss_;
  LinePlot* throughput_;
  PredictionBars* bars_;
  QPlainTextEdit* log_;
};

}  // namespace paratwin::gui
