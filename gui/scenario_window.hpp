// The first view of paratwin-gui: a scenario's YAML beside its summary or its errors.
#pragma once

#include <QMainWindow>

class QListWidget;
class QPlainTextEdit;
class QLabel;

namespace paratwin::gui {

class ScenarioWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit ScenarioWindow(QWidget* parent = nullptr);
  // Loads and checks a scenario; errors appear in the problems list, never as a crash.
  void open_scenario(const QString& path);

 private:
  void choose_file();

  QPlainTextEdit* source_;
  QPlainTextEdit* summary_;
  QListWidget* problems_;
  QLabel* status_;
};

}  // namespace paratwin::gui
