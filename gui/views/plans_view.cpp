// Plans view.
#include "gui/views/plans_view.hpp"

#include <QCheckBox>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QPixmap>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>

#include "gui/model/candidate_table.hpp"
#include "gui/model/comparison.hpp"
#include "gui/model/session.hpp"
#include "gui/views/style.hpp"
#include "viz/render.hpp"
#include "viz/routing_figure.hpp"

namespace paratwin::gui {

PlansView::PlansView(Session& session, QWidget* parent)
    : QWidget(parent),
      session_(session),
      search_(new QPushButton("Search plans")),
      cancel_(new QPushButton("Cancel")),
      every_field_(new QCheckBox("search every plan field (as plan: auto)")),
      top_(new QSpinBox),
      progress_(new QProgressBar),
      elapsed_(new QLabel),
      summary_(new QLabel),
      explanation_(new QLabel),
      model_(new CandidateTable(this)),
      proxy_(new QSortFilterProxyModel(this)),
      table_(new QTableView),
      report_(new QPlainTextEdit),
      routing_(new QLabel),
      comparison_(new QTableWidget),
      comparison_title_(new QLabel),
      clock_(new QTimer(this)) {
  search_->setProperty("primary", true);
  top_->setRange(1, 200);
  top_->setValue(20);
  top_->setPrefix("top ");
  every_field_->setChecked(true);
  progress_->setRange(0, 1000);  // the search's front bound against its cutoff (SearchProgress)
  progress_->setMaximumWidth(180);
  progress_->setTextVisible(false);
  auto* bar = new QHBoxLayout;
  bar->addWidget(search_);
  bar->addWidget(every_field_);
  bar->addWidget(top_);
  bar->addSpacing(12);
  bar->addWidget(progress_);
  bar->addWidget(elapsed_);
  bar->addWidget(cancel_);
  bar->addStretch(1);

  summary_->setProperty("role", "title");
  explanation_->setWordWrap(true);
  explanation_->setProperty("role", "muted");
  explanation_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  proxy_->setSourceModel(model_);
  proxy_->setSortRole(CandidateTable::kSortRole);
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(CandidateTable::Rank, Qt::AscendingOrder);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  table_->setAlternatingRowColors(true);
  table_->verticalHeader()->hide();
  table_->verticalHeader()->setDefaultSectionSize(24);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->setToolTip("Click a plan to inspect it; Ctrl-click a second one to compare the two");

  QFont mono("DejaVu Sans Mono");
  mono.setPointSizeF(8.5);
  report_->setFont(mono);
  report_->setReadOnly(true);
  auto* report_box = new QGroupBox("Chosen plan (analytic evaluation)");
  auto* report_layout = new QVBoxLayout(report_box);
  report_layout->addWidget(report_);
  routing_->setToolTip("Expert routing: tokens per EP rank (the hottest sets the pace) and per expert");
  routing_->setVisible(false);
  report_layout->addWidget(routing_);

  comparison_->setColumnCount(2);
  comparison_->verticalHeader()->setDefaultSectionSize(22);
  comparison_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  comparison_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  comparison_title_->setWordWrap(true);
  comparison_title_->setProperty("role", "muted");
  auto* compare_box = new QGroupBox("Side by side (Ctrl-click two plans)");
  auto* compare_layout = new QVBoxLayout(compare_box);
  compare_layout->addWidget(comparison_title_);
  compare_layout->addWidget(comparison_);

  auto* lower = new QSplitter(Qt::Horizontal);
  lower->addWidget(report_box);
  lower->addWidget(compare_box);
  lower->setSizes({620, 520});
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(table_);
  split->addWidget(lower);
  split->setSizes({330, 420});

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(bar);
  layout->addWidget(summary_);
  layout->addWidget(explanation_);
  layout->addWidget(split, 1);

  clock_->setInterval(100);
  connect(clock_, &QTimer::timeout, this, [this] {
    elapsed_->setText(QString("searching... %1 s").arg(session_.search_elapsed_ms() / 1000.0, 0, 'f', 1));
    progress_->setValue(static_cast<int>(1000 * session_.search_fraction()));
  });
  connect(search_, &QPushButton::clicked, this,
          [this] { session_.search(every_field_->isChecked(), top_->value()); });
  connect(cancel_, &QPushButton::clicked, &session_, &Session::cancel_search);
  connect(&session_, &Session::search_started, this, [this] { set_busy(true); });
  connect(&session_, &Session::search_finished, this, &PlansView::on_search_finished);
  connect(&session_, &Session::search_failed, this, [this](const QString& message) {
    set_busy(false);
    elapsed_->setText(message.section('\n', 0, 0));
    elapsed_->setToolTip(message);
  });
  connect(&session_, &Session::selection_changed, this, &PlansView::show_report);
  connect(table_->selectionModel(), &QItemSelectionModel::selectionChanged, this, &PlansView::on_selection);
  set_busy(false);
  on_search_finished();
}

void PlansView::set_busy(bool busy) {
  progress_->setVisible(busy);
  cancel_->setVisible(busy);
  search_->setEnabled(!busy);
  if (busy)
    clock_->start();
  else
    clock_->stop();
  if (busy) elapsed_->setText("searching...");
}

void PlansView::on_search_finished() {
  if (!session_.searching()) set_busy(false);
  const SearchSummary& s = session_.search_summary();
  model_->set_candidates(session_.candidates(), s.objective_unit);
  // Context and expert parallelism columns only when some plan uses them.
  for (auto [column, degree] : {std::pair{CandidateTable::Cp, &Plan::cp}, {CandidateTable::Ep, &Plan::ep}})
    table_->setColumnHidden(column,
                            std::all_of(session_.candidates().begin(), session_.candidates().end(),
                                        [degree](const Candidate& c) { return c.plan.*degree == 1; }));
  table_->sortByColumn(CandidateTable::Rank, Qt::AscendingOrder);
  summary_->setText(session_.candidates().empty() ? (s.text.isEmpty() ? "No plans yet: search" : s.text)
                                                  : s.text);
  QString more = s.explanation.isEmpty() ? QString() : "Why #1: " + s.explanation;
  if (!s.rejected.empty()) {
    QStringList parts;
    for (const auto& [reason, n] : s.rejected)
      parts << QString("%L1 %2").arg(n).arg(QString::fromStdString(reason));
    more += (more.isEmpty() ? "" : "\n") + QString("Rejected: ") + parts.join("; ");
  }
  explanation_->setText(more);
  explanation_->setVisible(!more.isEmpty());
  if (!session_.searching() && elapsed_->text().startsWith("searching")) elapsed_->clear();
  if (session_.selected() >= 0)
    table_->selectRow(proxy_->mapFromSource(model_->index(session_.selected(), 0)).row());
  comparison_->setRowCount(0);
  comparison_title_->setText(session_.candidates().size() > 1 ? "Ctrl-click a second plan in the table."
                                                              : "Search to get several plans to compare.");
}

void PlansView::on_selection() {
  QList<int> rows;
  for (const QModelIndex& i : table_->selectionModel()->selectedRows()) rows << proxy_->mapToSource(i).row();
  if (rows.isEmpty()) return;
  // The row clicked first stays the inspected plan; a second one is compared with it.
  const int current = proxy_->mapToSource(table_->currentIndex()).row();
  if (rows.size() == 1 && rows.front() != session_.selected()) session_.select(rows.front());
  if (rows.size() >= 2) {
    const int other = rows.contains(current) && current != session_.selected() ? current : rows.back();
    compare(session_.selected() >= 0 ? session_.selected() : rows.front(), other);
  }
}

void PlansView::compare(int a, int b) {
  const auto& c = session_.candidates();
  if (a < 0 || b < 0 || a >= int(c.size()) || b >= int(c.size())) return;
  const std::vector<ComparisonRow> rows = paratwin::gui::compare(c[size_t(a)], c[size_t(b)]);
  comparison_->setRowCount(int(rows.size()));
  comparison_->setHorizontalHeaderLabels({QString("#%1").arg(a + 1), QString("#%1").arg(b + 1)});
  QStringList labels;
  for (size_t i = 0; i < rows.size(); ++i) {
    const ComparisonRow& r = rows[i];
    labels << r.label;
    auto* ia = new QTableWidgetItem(r.a);
    auto* ib = new QTableWidgetItem(r.b);
    if (r.better < 0) ia->setForeground(colors::kGood), ib->setForeground(colors::kBad);
    if (r.better > 0) ib->setForeground(colors::kGood), ia->setForeground(colors::kBad);
    if (r.differs && r.better == 0)
      ia->setBackground(QColor(0xff, 0xf8, 0xc5)), ib->setBackground(QColor(0xff, 0xf8, 0xc5));
    comparison_->setItem(int(i), 0, ia);
    comparison_->setItem(int(i), 1, ib);
  }
  comparison_->setVerticalHeaderLabels(labels);
  comparison_title_->setText(QString("#%1: %2\n#%3: %4")
                                 .arg(a + 1)
                                 .arg(plan_summary(c[size_t(a)].plan))
                                 .arg(b + 1)
                                 .arg(plan_summary(c[size_t(b)].plan)));
}

void PlansView::show_report() {
  const Candidate* c = session_.selected_candidate();
  report_->setPlainText(c ? QString::fromStdString(to_text(c->report)) : QString());
  // Unbalanced expert routing: its bars of tokens per EP rank and per expert, as paratwin-plot draws them.
  routing_->setVisible(c && c->report.routing);
  if (c && c->report.routing) {
    viz::Figure figure = viz::routing_figure(c->report.scenario, *c->report.routing);
    figure.panel_width = 420, figure.height = 300;
    const std::string png = viz::render_png(figure);
    QPixmap picture;
    picture.loadFromData(reinterpret_cast<const uchar*>(png.data()), static_cast<uint>(png.size()), "PNG");
    routing_->setPixmap(picture);
  }
}

}  // namespace paratwin::gui
