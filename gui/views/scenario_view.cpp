// Scenario view.
#include "gui/views/scenario_view.hpp"

#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSplitter>
#include <QTimer>
#include <QTreeWidget>
#include <QVBoxLayout>

#include "gui/model/session.hpp"
#include "gui/views/style.hpp"
#include "gui/views/yaml_editor.hpp"
#include "plan/spec/summary.hpp"

namespace paratwin::gui {
namespace {

QString qs(const std::string& s) {
  return QString::fromStdString(s);
}

constexpr int kPathRole = Qt::UserRole, kKindRole = Qt::UserRole + 1;

template <class E>
QStringList choices_of(const EnumNames<E>& names) {
  QStringList out{""};
  for (const auto& [n, v] : names) out << qs(n);
  return out;
}

}  // namespace

ScenarioView::ScenarioView(Session& session, QWidget* parent)
    : QWidget(parent),
      session_(session),
      catalog_(new QTreeWidget),
      editor_(new YamlEditor),
      problems_(new QListWidget),
      file_label_(new QLabel),
      status_(new QLabel),
      save_(new QPushButton("Save")),
      summary_(new QPlainTextEdit),
      extra_sets_(new QPlainTextEdit),
      typing_(new QTimer(this)) {
  // Left: the catalog.
  catalog_->setHeaderLabels({"catalog", "description"});
  catalog_->setRootIsDecorated(true);
  catalog_->header()->setStretchLastSection(true);
  catalog_->setColumnWidth(0, 170);
  build_catalog();
  auto* open_file = new QPushButton("Open file...");
  auto* left = new QWidget;
  auto* left_layout = new QVBoxLayout(left);
  left_layout->setContentsMargins(0, 0, 0, 0);
  left_layout->addWidget(catalog_);
  left_layout->addWidget(open_file);
  connect(open_file, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, "Open scenario", {}, "YAML (*.yaml *.yml)");
    if (!path.isEmpty()) session_.open(path);
  });
  connect(catalog_, &QTreeWidget::itemActivated, this, [this](QTreeWidgetItem* item) {
    const QString path = item->data(0, kPathRole).toString();
    const int kind = item->data(0, kKindRole).toInt();
    if (path.isEmpty()) return;
    if (kind == int(CatalogKind::Scenario))
      session_.open(path);
    else
      set_field(kind == int(CatalogKind::Model) ? "model" : "cluster", item->text(0));
  });

  // Centre: file, editor, problems.
  auto* centre = new QWidget;
  auto* centre_layout = new QVBoxLayout(centre);
  centre_layout->setContentsMargins(0, 0, 0, 0);
  auto* file_row = new QHBoxLayout;
  file_label_->setProperty("role", "title");
  file_row->addWidget(file_label_, 1);
  file_row->addWidget(status_);
  file_row->addWidget(save_);
  centre_layout->addLayout(file_row);
  auto* editor_split = new QSplitter(Qt::Vertical);
  editor_split->addWidget(editor_);
  auto* problems_box = new QGroupBox("Problems (checked as you type)");
  auto* problems_layout = new QVBoxLayout(problems_box);
  problems_layout->setContentsMargins(4, 4, 4, 4);
  problems_->setFrameShape(QFrame::NoFrame);
  problems_layout->addWidget(problems_);
  editor_split->addWidget(problems_box);
  editor_split->setStretchFactor(0, 4);
  editor_split->setStretchFactor(1, 1);
  centre_layout->addWidget(editor_split);
  connect(save_, &QPushButton::clicked, this, [this] { session_.save(); });
  connect(problems_, &QListWidget::itemActivated, this, [this](QListWidgetItem* item) {
    if (item->data(Qt::UserRole).toInt() > 0)
      editor_->go_to(item->data(Qt::UserRole).toInt(), item->data(Qt::UserRole + 1).toInt());
  });

  // Typing: check once the keyboard rests for a moment.
  typing_->setSingleShot(true);
  typing_->setInterval(300);
  connect(editor_, &QPlainTextEdit::textChanged, this, [this] {
    if (!loading_) typing_->start();
  });
  connect(typing_, &QTimer::timeout, this, &ScenarioView::check_now);

  // Right: overrides and summary.
  auto* form_box = new QGroupBox("Overrides (--set), applied over the file");
  auto* form = new QFormLayout(form_box);
  const Catalog& catalog = Catalog::installed();
  auto names = [&](CatalogKind kind) {
    QStringList out{""};
    for (const auto& n : catalog.names(kind)) out << qs(n);
    return out;
  };
  const std::vector<std::tuple<QString, QString, QStringList>> specs = {
      {"model", "model", names(CatalogKind::Model)},
      {"cluster", "cluster", names(CatalogKind::Topology)},
      {"cluster.nodes", "nodes", {"", "1", "2", "4", "8", "16", "32", "64", "128", "256", "512", "1024"}},
      {"training.global_batch", "global batch", {"", "64", "128", "256", "512", "1024", "1536", "2048"}},
      {"training.seq_len", "sequence length", {"", "1024", "2048", "4096", "8192"}},
      {"plan.tp", "tensor parallel", {"", "auto", "1", "2", "4", "8"}},
      {"plan.pp", "pipeline parallel", {"", "auto", "1", "2", "4", "8", "16"}},
      {"plan.dp", "data parallel", {"", "auto", "1", "2", "4", "8", "16", "32", "64"}},
      {"plan.micro_batch", "micro-batch", {"", "auto", "1", "2", "4", "8"}},
      {"plan.schedule", "schedule", choices_of(kScheduleNames)},
      {"plan.recompute", "recompute", choices_of(kRecomputeNames)},
      {"plan.zero", "ZeRO", {"", "0", "1", "2", "3"}},
      {"plan.sequence_parallel", "sequence parallel", {"", "true", "false"}},
  };
  for (const auto& [key, label, choices] : specs) {
    auto* box = new QComboBox;
    box->setEditable(true);
    box->addItems(choices);
    box->lineEdit()->setPlaceholderText("as in the file");
    box->setToolTip("--set " + key + "=VALUE");
    form->addRow(label, box);
    fields_.push_back({key, box});
    connect(box, &QComboBox::currentTextChanged, this, [this] {
      if (!loading_) apply_overrides();
    });
  }
  extra_sets_->setPlaceholderText("more overrides, one KEY=VALUE per line\ne.g. search.objective=cost");
  extra_sets_->setMaximumHeight(70);
  form->addRow(extra_sets_);
  connect(extra_sets_, &QPlainTextEdit::textChanged, this, [this] {
    if (!loading_) apply_overrides();
  });
  auto* summary_box = new QGroupBox("Summary");
  auto* summary_layout = new QVBoxLayout(summary_box);
  QFont mono("DejaVu Sans Mono");
  mono.setPointSizeF(8.5);
  summary_->setFont(mono);
  summary_->setReadOnly(true);
  summary_->setFrameShape(QFrame::NoFrame);
  summary_layout->addWidget(summary_);
  auto* right = new QWidget;
  auto* right_layout = new QVBoxLayout(right);
  right_layout->setContentsMargins(0, 0, 0, 0);
  right_layout->addWidget(form_box);
  right_layout->addWidget(summary_box, 1);

  auto* split = new QSplitter(Qt::Horizontal);
  split->addWidget(left);
  split->addWidget(centre);
  split->addWidget(right);
  split->setSizes({280, 640, 420});
  split->setStretchFactor(1, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(split);

  connect(&session_, &Session::checked, this, &ScenarioView::refresh);
  refresh();
}

void ScenarioView::build_catalog() {
  const Catalog& catalog = Catalog::installed();
  for (auto [kind, title] : {std::pair{CatalogKind::Scenario, "scenarios"},
                             {CatalogKind::Model, "models"},
                             {CatalogKind::Topology, "topologies"}}) {
    auto* group = new QTreeWidgetItem(catalog_, {title});
    QFont bold = group->font(0);
    bold.setBold(true);
    group->setFont(0, bold);
    for (const CatalogEntry& e : catalog.list(kind)) {
      auto* item = new QTreeWidgetItem(group, {qs(e.name), qs(e.description)});
      item->setData(0, kPathRole, qs(e.path));
      item->setData(0, kKindRole, int(kind));
      item->setToolTip(0, qs(e.path));
      item->setToolTip(1, qs(e.description));
    }
    group->setExpanded(kind == CatalogKind::Scenario);
  }
}

void ScenarioView::set_field(const QString& key, const QString& value) {
  for (Field& f : fields_)
    if (f.key == key) f.box->setEditText(value);
}

void ScenarioView::check_now() {
  typing_->stop();
  session_.set_text(editor_->toPlainText());
}

QStringList ScenarioView::form_overrides() const {
  QStringList sets;
  for (const Field& f : fields_)
    if (!f.box->currentText().trimmed().isEmpty()) sets << f.key + "=" + f.box->currentText().trimmed();
  for (const QString& line : extra_sets_->toPlainText().split('\n'))
    if (!line.trimmed().isEmpty()) sets << line.trimmed();
  return sets;
}

void ScenarioView::apply_overrides() {
  session_.set_overrides(form_overrides());
}

void ScenarioView::show_overrides(const QStringList& sets) {
  loading_ = true;
  QStringList extra;
  for (Field& f : fields_) f.box->setEditText("");
  for (const QString& set : sets) {
    const QString key = set.section('=', 0, 0);
    auto it = std::find_if(fields_.begin(), fields_.end(), [&](const Field& f) { return f.key == key; });
    if (it != fields_.end())
      it->box->setEditText(set.section('=', 1));
    else
      extra << set;
  }
  extra_sets_->setPlainText(extra.join('\n'));
  loading_ = false;
}

void ScenarioView::refresh() {
  // The text: replaced only when the session's differs (a file was opened), so typing is not undone.
  if (editor_->toPlainText() != session_.text()) {
    loading_ = true;
    editor_->setPlainText(session_.text());
    loading_ = false;
  }
  if (form_overrides() != session_.overrides()) show_overrides(session_.overrides());  // a file was opened
  file_label_->setText(session_.path().isEmpty() ? "no scenario" : QFileInfo(session_.path()).fileName());
  file_label_->setToolTip(session_.path());
  save_->setEnabled(session_.modified());

  std::vector<LineProblem> lines;
  problems_->clear();
  int errors = 0, warnings = 0;
  const std::string me = session_.path().toStdString();
  for (const Diagnostic& d : session_.diagnostics()) {
    const bool error = d.severity == Severity::Error;
    (error ? errors : warnings)++;
    auto* item = new QListWidgetItem(qs(d.str()));
    item->setForeground(error ? colors::kBad : QColor(0x9a, 0x67, 0x00));
    if (d.where.file == me) {
      lines.push_back({d.where.line, d.where.column, error, qs(d.message)});
      item->setData(Qt::UserRole, d.where.line);
      item->setData(Qt::UserRole + 1, d.where.column);
    }
    problems_->addItem(item);
  }
  editor_->set_problems(lines);
  // Form fields whose override is at fault turn red.
  for (Field& f : fields_) {
    bool bad = false;
    for (const Diagnostic& d : session_.diagnostics())
      bad = bad || (is_override_location(d.where) &&
                    d.where.file.rfind("<--set " + f.key.toStdString() + "=", 0) == 0);
    f.box->setStyleSheet(bad ? "QComboBox { border: 1px solid #cf222e; background: #ffebe9; }" : "");
  }

  if (session_.scenario()) {
    summary_->setPlainText(qs(to_text(summarize(*session_.scenario()))));
    status_->setText(warnings ? QString("valid, %1 warning(s)").arg(warnings) : QString("valid"));
    status_->setStyleSheet("color: #1a7f37; font-weight: bold;");
  } else {
    status_->setText(QString("%1 error(s)").arg(errors));
    status_->setStyleSheet("color: #cf222e; font-weight: bold;");
  }
  if (!session_.scenario() && errors)
    summary_->setPlainText("The scenario has errors; see the list under the editor.");
}

}  // namespace paratwin::gui
