// A YAML editor: line numbers, syntax colours, and the checker's problems at their lines (a red or
// amber marker in the gutter, the line tinted, the message as the line's tooltip).
#pragma once

#include <QPlainTextEdit>
#include <map>

namespace paratwin::gui {

struct LineProblem {
  int line = 0;  // 1-based
  int column = 0;
  bool error = true;
  QString message;
};

class YamlEditor : public QPlainTextEdit {
  Q_OBJECT

 public:
  explicit YamlEditor(QWidget* parent = nullptr);

  void set_problems(const std::vector<LineProblem>& problems);
  // Problems by line, as shown (for tests).
  const std::map<int, std::vector<LineProblem>>& problems() const { return problems_; }
  void go_to(int line, int column);

 protected:
  void resizeEvent(QResizeEvent* event) override;
  bool event(QEvent* event) override;

 private:
  friend class LineGutter;
  int gutter_width() const;
  void paint_gutter(QPaintEvent* event);
  void update_highlights();

  QWidget* gutter_;
  std::map<int, std::vector<LineProblem>> problems_;
};

}  // namespace paratwin::gui
