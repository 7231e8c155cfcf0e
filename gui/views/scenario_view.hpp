// Scenario view: the catalog (scenarios, models, topologies), the scenario's YAML with problems at
// their lines as you type, `--set` overrides from form fields, and the scenario's summary.
#pragma once

#include <QStringList>
#include <QWidget>
#include <vector>

class QComboBox;
class QLabel;
class QListWidget;
class QPlainTextEdit;
class QPushButton;
class QTimer;
class QTreeWidget;

namespace paratwin::gui {

class Session;
class YamlEditor;

class ScenarioView : public QWidget {
  Q_OBJECT

 public:
  explicit ScenarioView(Session& session, QWidget* parent = nullptr);

  YamlEditor* editor() const { return editor_; }
  QListWidget* problems() const { return problems_; }
  // Sets the form field for a scenario key ("plan.tp") as a user would; "" clears it.
  void set_field(const QString& key, const QString& value);
  void check_now();  // checks the editor's text without waiting for typing to pause

 private:
  struct Field {
    QString key;
    QComboBox* box;
  };

  void build_catalog();
  void refresh();
  void apply_overrides();
  QStringList form_overrides() const;
  void show_overrides(const QStringList& sets);

  Session& session_;
  QTreeWidget* catalog_;
  YamlEditor* editor_;
  QListWidget* problems_;
  QLabel* file_label_;
  QLabel* status_;
  QPushButton* save_;
  QPlainTextEdit* summary_;
  QPlainTextEdit* extra_sets_;
  std::vector<Field> fields_;
  QTimer* typing_;
  bool loading_ = false;
};

}  // namespace paratwin::gui
