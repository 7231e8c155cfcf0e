// Timeline view: the chosen plan's predicted schedule above its simulated and measured ones (a
// simulation, a live run, or any Chrome trace file), with the kind legend and hover details.
#pragma once

#include <QWidget>

class QCheckBox;
class QLabel;
class QPushButton;
class QSpinBox;

namespace paratwin::gui {

class Session;
class TimelineWidget;

class TimelineView : public QWidget {
  Q_OBJECT

 public:
  explicit TimelineView(Session& session, QWidget* parent = nullptr);

  TimelineWidget* timeline() const { return timeline_; }
  void open_trace(const QString& path);  // shown as the measured section; errors in the status line

  // Lines step `step` of a live run's measured trace up with the predicted iteration.
  void align_measured_step(int step);

 private:
  void rebuild();

  Session& session_;
  TimelineWidget* timeline_;
  QCheckBox* show_predicted_;
  QCheckBox* show_simulated_;
  QCheckBox* show_measured_;
  QPushButton* simulate_;
  QSpinBox* measured_step_;
  QLabel* status_;
  QLabel* hover_;
};

}  // namespace paratwin::gui
