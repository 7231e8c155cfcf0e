// Plans view: run the optimizer (in the background, cancellable, with its elapsed time), the
// candidates in a sortable table, the chosen one's report, and two candidates side by side.
#pragma once

#include <QWidget>

class QCheckBox;
class QLabel;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSortFilterProxyModel;
class QSpinBox;
class QTableView;
class QTableWidget;
class QTimer;

namespace paratwin::gui {

class CandidateTable;
class Session;

class PlansView : public QWidget {
  Q_OBJECT

 public:
  explicit PlansView(Session& session, QWidget* parent = nullptr);

  QTableView* table() const { return table_; }
  CandidateTable* model() const { return model_; }
  QTableWidget* comparison() const { return comparison_; }
  QPushButton* search_button() const { return search_; }
  QCheckBox* every_field() const { return every_field_; }
  QPlainTextEdit* report() const { return report_; }
  // The chosen plan's expert routing as bars; hidden when routing is balanced.
  QLabel* routing_picture() const { return routing_; }
  // Compares the candidates at these table rows (best-first indices).
  void compare(int a, int b);

 private:
  void on_search_finished();
  void on_selection();
  void show_report();
  void set_busy(bool busy);

  Session& session_;
  QPushButton* search_;
  QPushButton* cancel_;
  QCheckBox* every_field_;
  QSpinBox* top_;
  QProgressBar* progress_;
  QLabel* elapsed_;
  QLabel* summary_;
  QLabel* explanation_;
  CandidateTable* model_;
  QSortFilterProxyModel* proxy_;
  QTableView* table_;
  QPlainTextEdit* report_;
  QLabel* routing_;  // the routing figure (viz/routing_figure.hpp), shown when routing is not balanced
  QTableWidget* comparison_;
  QLabel* comparison_title_;
  QTimer* clock_;
};

}  // namespace paratwin::gui
