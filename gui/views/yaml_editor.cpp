// YAML editor with a problem gutter.
#include "gui/views/yaml_editor.hpp"

#include <QHelpEvent>
#include <QPainter>
#include <QRegularExpression>
#include <QSyntaxHighlighter>
#include <QTextBlock>
#include <QToolTip>

#include "gui/views/style.hpp"

namespace paratwin::gui {

class LineGutter : public QWidget {
 public:
  explicit LineGutter(YamlEditor* editor) : QWidget(editor), editor_(editor) {}
  QSize sizeHint() const override { return {editor_->gutter_width(), 0}; }

 protected:
  void paintEvent(QPaintEvent* event) override { editor_->paint_gutter(event); }

 private:
  YamlEditor* editor_;
};

namespace {

// Keys, comments, quoted strings and quantities with units in their own colours.
class YamlHighlighter : public QSyntaxHighlighter {
 public:
  explicit YamlHighlighter(QTextDocument* doc) : QSyntaxHighlighter(doc) {
    key_.setForeground(QColor(0x05, 0x50, 0xae));
    comment_.setForeground(QColor(0x6e, 0x77, 0x81));
    comment_.setFontItalic(true);
    string_.setForeground(QColor(0x0a, 0x30, 0x69));
    number_.setForeground(QColor(0x95, 0x38, 0x00));
  }

 protected:
  void highlightBlock(const QString& text) override {
    static const QRegularExpression key(R"(^(\s*-?\s*)([A-Za-z0-9_.\-]+)(\s*:))");
    static const QRegularExpression number(R"((?<=[\s:\[{,])-?\d[\d.eE+\-]*[A-Za-z$/%]*(?=[\s,\]}]|$))");
    static const QRegularExpression quoted(R"("[^"]*"|'[^']*')");
    if (auto m = key.match(text); m.hasMatch())
      setFormat(int(m.capturedStart(2)), int(m.capturedLength(2)), key_);
    for (auto it = number.globalMatch(text); it.hasNext();) {
      const auto m = it.next();
      setFormat(int(m.capturedStart()), int(m.capturedLength()), number_);
    }
    for (auto it = quoted.globalMatch(text); it.hasNext();) {
      const auto m = it.next();
      setFormat(int(m.capturedStart()), int(m.capturedLength()), string_);
    }
    // A comment starts at '#' outside quotes, at the line start or after a space.
    bool in_single = false, in_double = false;
    for (int i = 0; i < text.size(); ++i) {
      const QChar c = text[i];
      if (c == '\'' && !in_double) in_single = !in_single;
      if (c == '"' && !in_single) in_double = !in_double;
      if (c == '#' && !in_single && !in_double && (i == 0 || text[i - 1].isSpace())) {
        setFormat(i, int(text.size()) - i, comment_);
        break;
      }
    }
  }

 private:
  QTextCharFormat key_, comment_, string_, number_;
};

}  // namespace

YamlEditor::YamlEditor(QWidget* parent) : QPlainTextEdit(parent), gutter_(new LineGutter(this)) {
  QFont mono("DejaVu Sans Mono");
  mono.setStyleHint(QFont::TypeWriter);
  mono.setPointSizeF(9.5);
  setFont(mono);
  setLineWrapMode(QPlainTextEdit::NoWrap);
  setTabStopDistance(QFontMetricsF(mono).horizontalAdvance(' ') * 2);
  new YamlHighlighter(document());
  connect(this, &QPlainTextEdit::blockCountChanged, this,
          [this] { setViewportMargins(gutter_width(), 0, 0, 0); });
  connect(this, &QPlainTextEdit::updateRequest, this, [this](const QRect& rect, int dy) {
    if (dy)
      gutter_->scroll(0, dy);
    else
      gutter_->update(0, rect.y(), gutter_->width(), rect.height());
  });
  setViewportMargins(gutter_width(), 0, 0, 0);
}

int YamlEditor::gutter_width() const {
  const int digits = QString::number(std::max(1, blockCount())).size();
  return 22 + fontMetrics().horizontalAdvance('9') * std::max(3, digits);
}

void YamlEditor::resizeEvent(QResizeEvent* event) {
  QPlainTextEdit::resizeEvent(event);
  const QRect cr = contentsRect();
  gutter_->setGeometry(QRect(cr.left(), cr.top(), gutter_width(), cr.height()));
}

void YamlEditor::set_problems(const std::vector<LineProblem>& problems) {
  problems_.clear();
  for (const LineProblem& p : problems)
    if (p.line > 0) problems_[p.line].push_back(p);
  update_highlights();
  gutter_->update();
}

void YamlEditor::go_to(int line, int column) {
  QTextCursor c(document()->findBlockByNumber(std::max(0, line - 1)));
  c.movePosition(QTextCursor::Right, QTextCursor::MoveAnchor, std::max(0, column - 1));
  setTextCursor(c);
  centerCursor();
  setFocus();
}

void YamlEditor::update_highlights() {
  QList<QTextEdit::ExtraSelection> selections;
  for (const auto& [line, list] : problems_) {
    const bool error = std::any_of(list.begin(), list.end(), [](const LineProblem& p) { return p.error; });
    QTextEdit::ExtraSelection line_sel;
    line_sel.format.setBackground(error ? QColor(0xff, 0xeb, 0xe9) : QColor(0xff, 0xf8, 0xc5));
    line_sel.format.setProperty(QTextFormat::FullWidthSelection, true);
    line_sel.cursor = QTextCursor(document()->findBlockByNumber(line - 1));
    selections.append(line_sel);
    // The column itself: a wavy underline from it to the end of the word.
    for (const LineProblem& p : list) {
      QTextCursor c(document()->findBlockByNumber(line - 1));
      if (p.column <= 0) continue;
      c.movePosition(QTextCursor::Right, QTextCursor::MoveAnchor, p.column - 1);
      c.movePosition(QTextCursor::EndOfWord, QTextCursor::KeepAnchor);
      if (!c.hasSelection()) c.movePosition(QTextCursor::Right, QTextCursor::KeepAnchor);
      QTextEdit::ExtraSelection word;
      word.cursor = c;
      word.format.setUnderlineStyle(QTextCharFormat::WaveUnderline);
      word.format.setUnderlineColor(p.error ? colors::kBad : QColor(0xbf, 0x87, 0x00));
      selections.append(word);
    }
  }
  setExtraSelections(selections);
}

void YamlEditor::paint_gutter(QPaintEvent* event) {
  QPainter p(gutter_);
  p.fillRect(event->rect(), colors::kPanel);
  QTextBlock block = firstVisibleBlock();
  int number = block.blockNumber() + 1;
  double top = blockBoundingGeometry(block).translated(contentOffset()).top();
  const int w = gutter_->width();
  while (block.isValid() && top <= event->rect().bottom()) {
    const double h = blockBoundingRect(block).height();
    if (block.isVisible()) {
      auto it = problems_.find(number);
      if (it != problems_.end()) {
        const bool error =
            std::any_of(it->second.begin(), it->second.end(), [](const LineProblem& q) { return q.error; });
        p.setRenderHint(QPainter::Antialiasing);
        p.setPen(Qt::NoPen);
        p.setBrush(error ? colors::kBad : QColor(0xbf, 0x87, 0x00));
        p.drawEllipse(QRectF(5, top + h / 2 - 5, 10, 10));
        p.setPen(Qt::white);
        QFont f = p.font();
        f.setBold(true);
        f.setPointSizeF(7);
        p.setFont(f);
        p.drawText(QRectF(5, top + h / 2 - 5, 10, 10), Qt::AlignCenter, error ? "!" : "?");
        p.setFont(font());
      }
      p.setPen(it != problems_.end() ? colors::kText : colors::kMuted);
      p.drawText(QRectF(0, top, w - 6, h), Qt::AlignRight | Qt::AlignVCenter, QString::number(number));
    }
    block = block.next();
    top += h;
    ++number;
  }
}

bool YamlEditor::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    const QTextCursor c = cursorForPosition(viewport()->mapFromGlobal(help->globalPos()));
    auto it = problems_.find(c.blockNumber() + 1);
    if (it != problems_.end()) {
      QStringList lines;
      for (const LineProblem& p : it->second) lines << p.message;
      QToolTip::showText(help->globalPos(), lines.join('\n'), this);
    } else {
      QToolTip::hideText();
    }
    return true;
  }
  return QPlainTextEdit::event(event);
}

}  // namespace paratwin::gui
