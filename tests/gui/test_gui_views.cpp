// The views driven as a user would, headless: open the quickstart scenario, break and fix its YAML,
// override fields, search plans, choose and compare candidates, look at the timeline, memory and
// topology, simulate (a child process), simulate a horizon, and run live training (a child process)
// and stop one. Each view is saved as a PNG in build/screenshots/ once it shows something.
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QHeaderView>
#include <QLabel>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QTest>

#include "gui/model/candidate_table.hpp"
#include "gui/model/live_run.hpp"
#include "gui/model/session.hpp"
#include "gui/views/line_plot.hpp"
#include "gui/views/live_view.hpp"
#include "gui/views/main_window.hpp"
#include "gui/views/memory_view.hpp"
#include "gui/views/plans_view.hpp"
#include "gui/views/reliability_view.hpp"
#include "gui/views/scenario_view.hpp"
#include "gui/views/style.hpp"
#include "gui/views/timeline_view.hpp"
#include "gui/views/timeline_widget.hpp"
#include "gui/views/topology_view.hpp"
#include "gui/views/yaml_editor.hpp"
#include "source_tree.hpp"

using namespace paratwin;
using namespace paratwin::gui;

namespace {

QString catalog_scenario(const char* name) {
  return QString::fromStdString(*Catalog::installed().find(CatalogKind::Scenario, name));
}

// Lines of `text` (1-based) that start with `prefix`.
int line_of(const QString& text, const QString& prefix) {
  const QStringList lines = text.split('\n');
  for (int i = 0; i < lines.size(); ++i)
    if (lines[i].startsWith(prefix)) return i + 1;
  return 0;
}

}  // namespace

class TestGuiViews : public QObject {
  Q_OBJECT

 private:
  MainWindow* window_ = nullptr;
  Session* session_ = nullptr;
  QString original_;

  void screenshot(QWidget* view, const QString& name) {
    window_->tabs()->setCurrentWidget(view);
    QCoreApplication::processEvents();
    const QString dir = QString::fromStdString(paratwin_test::build_dir() + "/screenshots");
    QDir().mkpath(dir);
    const QString path = dir + "/" + name + ".png";
    const QImage image = window_->grab().toImage();
    QVERIFY(image.save(path));
    // The picture is not blank: a view that painted nothing would be one colour.
    QVERIFY(image.width() >= 1200 && image.height() >= 700);
    QSet<QRgb> colours;
    for (int y = 0; y < image.height(); y += 7)
      for (int x = 0; x < image.width(); x += 7) colours.insert(image.pixel(x, y));
    QVERIFY2(colours.size() > 20, qPrintable(name + ": " + QString::number(colours.size()) + " colours"));
  }

  void wait_for_simulation() {
    QSignalSpy done(session_, &Session::simulation_finished), failed(session_, &Session::simulation_failed);
    QTRY_VERIFY_WITH_TIMEOUT(done.count() + failed.count() > 0, 120000);
    QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.front().front().toString()));
  }

 private slots:
  void initTestCase() {
    qputenv("PARATWIN_BIN", QByteArray::fromStdString(paratwin_test::bin_dir() + "/paratwin"));
    window_ = new MainWindow;
    session_ = &window_->session();
    window_->resize(1440, 900);
    window_->show();
    QVERIFY(session_->open(catalog_scenario("quickstart")));
    original_ = session_->text();
  }

  void cleanupTestCase() { delete window_; }

  void the_scenario_view_shows_the_file_and_its_summary() {
    ScenarioView* view = window_->scenario_view();
    QCOMPARE(view->editor()->toPlainText(), original_);
    QCOMPARE(view->problems()->count(), 0);
    QVERIFY(view->editor()->problems().empty());
    screenshot(view, "scenario");
  }

  void an_invalid_yaml_shows_its_error_at_its_line() {
    ScenarioView* view = window_->scenario_view();
    // A misspelt key: the error sits on its line, with the nearest valid key.
    QString text = original_;
    const int zero = line_of(text, "  zero:");
    text.replace("  zero: 1", "  zeroo: 1");
    view->editor()->setPlainText(text);
    view->check_now();
    QVERIFY(!session_->scenario());
    QVERIFY(view->editor()->problems().count(zero) == 1);
    QVERIFY(view->problems()->count() >= 1);
    QVERIFY(view->problems()->item(0)->text().contains(QString(":%1:").arg(zero)));
    QVERIFY(view->problems()->item(0)->text().contains("zero"));
    screenshot(view, "scenario-error");
    // A syntax error: an unclosed bracket, reported where it opens.
    text = original_;
    const int plan = line_of(text, "plan:");
    text.replace("plan:\n", "plan: [\n");
    view->editor()->setPlainText(text);
    view->check_now();
    QVERIFY(!session_->scenario());
    QVERIFY2(view->editor()->problems().count(plan) == 1, qPrintable(view->problems()->item(0)->text()));
    // Typed back: valid again, no marks left.
    view->editor()->setPlainText(original_);
    view->check_now();
    QVERIFY(session_->scenario());
    QVERIFY(view->editor()->problems().empty());
    QCOMPARE(view->problems()->count(), 0);
  }

  void form_fields_become_set_overrides() {
    ScenarioView* view = window_->scenario_view();
    view->set_field("plan.tp", "4");
    QVERIFY(session_->overrides().contains("plan.tp=4"));
    QVERIFY(!session_->scenario());  // the file's dp 16 stays: 4 x 16 = 64 GPUs, but the cluster has 32
    QVERIFY(view->problems()->item(0)->text().contains("32 GPUs"));
    view->set_field("plan.dp", "8");
    QCOMPARE(session_->overrides(), QStringList({"plan.tp=4", "plan.dp=8"}));
    QVERIFY(session_->scenario());
    QCOMPARE(session_->selected_candidate()->plan.tp, 4);
    QCOMPARE(session_->selected_candidate()->plan.dp, 8);
    view->set_field("plan.zero", "seven");
    QVERIFY(!session_->scenario());
    QVERIFY(view->problems()->item(0)->text().startsWith("<--set plan.zero=seven>"));
    for (const char* key : {"plan.tp", "plan.dp", "plan.zero"}) view->set_field(key, "");
    QVERIFY(session_->overrides().isEmpty());
    QCOMPARE(session_->selected_candidate()->plan.tp, 2);
  }

  void the_plans_view_searches_and_lists_candidates_in_a_sortable_table() {
    PlansView* view = window_->plans_view();
    window_->tabs()->setCurrentWidget(view);
    QVERIFY(view->every_field()->isChecked());
    QSignalSpy finished(session_, &Session::search_finished);
    QTest::mouseClick(view->search_button(), Qt::LeftButton);
    QVERIFY(session_->searching() || finished.count() > 0);
    QVERIFY(finished.count() > 0 || finished.wait(60000));
    QCOMPARE(view->table()->model()->rowCount(), 20);
    QCOMPARE(view->model()->rowCount(), int(session_->candidates().size()));
    const auto* proxy = view->table()->model();
    for (int row = 0; row < proxy->rowCount(); ++row) {
      const Candidate& c = session_->candidates()[size_t(row)];
      QCOMPARE(proxy->index(row, CandidateTable::Rank).data().toString(), QString::number(row + 1));
      QCOMPARE(proxy->index(row, CandidateTable::Dp).data().toInt(), c.plan.dp);
      QCOMPARE(proxy->index(row, CandidateTable::Mfu).data().toString(),
               QString::number(100 * c.report.metrics.mfu, 'f', 1) + "%");
    }
    // Sorting by MFU, highest first.
    view->table()->sortByColumn(CandidateTable::Mfu, Qt::DescendingOrder);
    for (int row = 1; row < proxy->rowCount(); ++row)
      QVERIFY(proxy->index(row, CandidateTable::Mfu).data(CandidateTable::kSortRole).toDouble() <=
              proxy->index(row - 1, CandidateTable::Mfu).data(CandidateTable::kSortRole).toDouble());
    view->table()->sortByColumn(CandidateTable::Rank, Qt::AscendingOrder);
  }

  void choosing_a_candidate_redraws_the_timeline_and_the_memory() {
    PlansView* plans = window_->plans_view();
    plans->table()->selectRow(2);
    QCOMPARE(session_->selected(), 2);
    const Candidate& chosen = *session_->selected_candidate();

    TimelineWidget* timeline = window_->timeline_view()->timeline();
    window_->tabs()->setCurrentWidget(window_->timeline_view());
    QCoreApplication::processEvents();
    const TimelineLayout& layout = timeline->layout();
    QCOMPARE(layout.sections().size(), size_t(1));
    QCOMPARE(layout.rows().size(), session_->predicted_trace()->lanes.size());
    QVERIFY(std::abs(layout.duration_s() - chosen.report.metrics.iteration_time_s) <
            1e-6 * chosen.report.metrics.iteration_time_s);
    // Fitted: the iteration spans the axis; every item sits in its row, inside the axis.
    const TimeAxis& axis = timeline->axis();
    double rightmost = 0;
    for (const TimelineRow& row : layout.rows())
      for (const TimelineItem& it : layout.items(row, axis)) {
        QVERIFY(it.rect.left() >= axis.left() - 1e-6 && it.rect.right() <= axis.left() + axis.width() + 1e-6);
        QVERIFY(it.rect.top() > row.top && it.rect.bottom() < row.top + row.height);
        rightmost = std::max(rightmost, it.rect.right());
      }
    QVERIFY(std::abs(rightmost - axis.x(layout.duration_s())) < 1.5);
    // Hovering the middle of the first task of the first row finds that task.
    const TimelineRow& row = layout.rows().front();
    const TimelineItem first = layout.items(row, axis).front();
    const QPoint at(int(first.rect.center().x()), int(first.rect.center().y()));
    const auto hit = timeline->hit_at(at);
    QVERIFY(hit.has_value());
    QCOMPARE(hit->row, 0);
    if (first.span >= 0) QCOMPARE(hit->span, first.span);
    // Zooming in 8 times around the centre shows an eighth of the time.
    const double span = axis.end() - axis.begin();
    timeline->zoom(8);
    QVERIFY(std::abs((timeline->axis().end() - timeline->axis().begin()) - span / 8) < 1e-9 * span);
    timeline->fit();

    MemoryView* memory = window_->memory_view();
    window_->tabs()->setCurrentWidget(memory);
    QCOMPARE(memory->bars().size(), chosen.report.stages.size());
    const MemoryChartGeometry g = memory->geometry();
    QCOMPARE(g.bars.size(), chosen.report.stages.size());
    QVERIFY(g.bars[0].whole.height() > 10);
    QVERIFY(std::abs(g.bars[0].capacity_y - g.y.pixel(chosen.report.stages[0].capacity.value() / (1 << 30))) <
            1e-6);
  }

  void two_candidates_compare_side_by_side() {
    PlansView* plans = window_->plans_view();
    plans->table()->selectRow(0);
    plans->compare(0, 1);
    QTableWidget* table = plans->comparison();
    QVERIFY(table->rowCount() > 12);
    QCOMPARE(table->horizontalHeaderItem(0)->text(), QString("#1"));
    QCOMPARE(table->horizontalHeaderItem(1)->text(), QString("#2"));
    // Both columns carry the table's figures.
    bool found = false;
    for (int r = 0; r < table->rowCount(); ++r)
      if (table->verticalHeaderItem(r)->text() == "tokens/s") found = true;
    QVERIFY(found);
    // Compare the best with the fifth, and show it.
    plans->table()->selectRow(0);
    plans->table()->selectionModel()->select(plans->table()->model()->index(4, 0),
                                             QItemSelectionModel::Select | QItemSelectionModel::Rows);
    QCOMPARE(table->horizontalHeaderItem(1)->text(), QString("#5"));
    screenshot(plans, "plans");
  }

  void a_pipeline_what_if_shows_stages_bubbles_and_memory_per_stage() {
    // The quickstart with four pipeline stages instead of data parallelism, from the form.
    ScenarioView* view = window_->scenario_view();
    view->set_field("plan.pp", "4");
    view->set_field("plan.dp", "4");
    QVERIFY(session_->scenario());
    QCOMPARE(session_->candidates().size(), size_t(1));
    const Candidate& c = *session_->selected_candidate();
    QCOMPARE(c.plan.pp, 4);
    const Trace& trace = *session_->predicted_trace();
    QSet<int> stages;
    bool sends = false, bubbles = false;
    for (const Lane& lane : trace.lanes) {
      stages.insert(lane.pid);
      for (const Span& s : lane.spans) {
        sends |= s.kind == SpanKind::PpComm;
        bubbles |= s.kind == SpanKind::Idle && s.end_s - s.start_s > 1e-3;
      }
    }
    QCOMPARE(stages.size(), 4);
    QVERIFY(sends && bubbles);
    QCOMPARE(window_->timeline_view()->timeline()->layout().rows().size(), trace.lanes.size());
    // 1F1B: stage k holds activations of pp - k micro-batches (the last one also the loss's backward
    // transients, cost::head_backward_transient_bytes).
    const std::vector<StageBar>& bars = window_->memory_view()->bars();
    QCOMPARE(bars.size(), size_t(4));
    const int activations = int(MemoryPart::Activations);
    QVERIFY(bars[0].parts_gib[activations] > bars[1].parts_gib[activations]);
    QVERIFY(bars[1].parts_gib[activations] > bars[2].parts_gib[activations]);
    QVERIFY(bars[0].parts_gib[activations] > bars[3].parts_gib[activations]);
  }

  void a_simulation_runs_as_a_child_process_and_colours_the_links() {
    window_->plans_view()->table()->selectRow(0);
    window_->tabs()->setCurrentWidget(window_->timeline_view());
    session_->simulate({});
    QVERIFY(session_->simulating());
    wait_for_simulation();
    QVERIFY(session_->simulated_trace());
    const TimelineLayout& layout = window_->timeline_view()->timeline()->layout();
    QCOMPARE(layout.sections().size(), size_t(2));
    QVERIFY(layout.headers()[1].second > layout.rows().front().top);
    screenshot(window_->timeline_view(), "timeline");

    MemoryView* memory = window_->memory_view();
    screenshot(memory, "memory");

    const Topology& topology = window_->topology_view()->canvas()->topology();
    int coloured = 0;
    for (const TopologyLink& l : topology.links) {
      if (!l.load) continue;
      ++coloured;
      QVERIFY(l.load->utilization >= 0 && l.load->utilization <= 1.0 + 1e-9);
      QVERIFY(l.load->capacity_GBps > 0);
    }
    QVERIFY(coloured >= 16);                                    // node 0's 8 NVLinks and 8 NICs
    window_->topology_view()->colour_by()->setCurrentIndex(1);  // peak: the busiest moment of each link
    screenshot(window_->topology_view(), "topology");
  }

  void a_horizon_shows_failures_restarts_and_goodput_over_time() {
    ReliabilityView* view = window_->reliability_view();
    view->set_inputs("30d", "150d", "300d", "");
    view->set_spread_inputs({.iterations = 12,
                             .kernel_cv = "0.05",
                             .step_cv = "0.01",
                             .step_correlation = "0.5",
                             .gpu_cv = "0.02"});
    QSignalSpy started(session_, &Session::simulation_started);
    view->simulate();
    wait_for_simulation();
    // Each what-if reaches the simulator as the --set a user would type.
    QCOMPARE(started.count(), 1);
    const QString command = started.front().front().toString();
    for (const char* set : {"variability.kernels.cv=0.05", "variability.steps.cv=0.01",
                            "variability.steps.correlation=0.5", "variability.ranks.cv=0.02"})
      QVERIFY2(command.contains(set), qPrintable(command));
    // The spread of the 12 steps under kernel, step and GPU variability, as a distribution function.
    const auto& sp = session_->simulation_report()["simulation"]["spread"];
    QCOMPARE(sp["iterations"].get<int>(), 12);
    QVERIFY(sp["p95_s"].get<double>() > sp["noise_free_s"].get<double>());
    QVERIFY(!view->spread_plot()->series().empty());
    QCOMPARE(view->spread_plot()->series().front().points.size(), size_t(24));  // a staircase of 12 steps
    QCOMPARE(view->spread_plot()->series().front().points.back().second, 1.0);
    const auto& h = session_->reliability();
    QVERIFY(h.has_value());
    QCOMPARE(h->horizon_s, 30 * 86400.0);
    QCOMPARE(int(h->failure_markers.size()), h->failures);
    QVERIFY(h->failures > 0);
    QVERIFY(!h->checkpoints.empty());
    QVERIFY(h->goodput > 0 && h->goodput < 1);
    QVERIFY(!view->goodput_plot()->series().empty());
    QVERIFY(view->goodput_plot()->series().front().points.size() >= 2);
    screenshot(view, "reliability");
  }

  void a_live_run_streams_its_steps_and_ends_beside_the_prediction() {
    QVERIFY(session_->open(catalog_scenario("live-cpu-tiny")));
    LiveView* view = window_->live_view();
    window_->tabs()->setCurrentWidget(view);
    QSignalSpy finished(&view->run(), &LiveRun::finished);
    view->start(2, 40);
    QVERIFY(finished.wait(120000));
    QVERIFY2(finished.front()[0].toBool(), qPrintable(finished.front()[1].toString()));
    QCOMPARE(view->run().steps().size(), size_t(40));
    const auto& points = view->loss_plot()->series().front().points;
    QCOMPARE(points.size(), size_t(40));
    QVERIFY(points.back().second < points.front().second);
    QVERIFY(view->run().comparison().has_value());
    QVERIFY(view->run().comparison()->predicted_iteration_s > 0);
    QCOMPARE(view->throughput_plot()->series().size(), size_t(2));  // measured and predicted
    screenshot(view, "live");
    // The measured timeline under the predicted one of the same plan.
    TimelineWidget* timeline = window_->timeline_view()->timeline();
    QCOMPARE(timeline->layout().sections().size(), size_t(2));
    QCOMPARE(timeline->layout().sections()[1].title, QString("measured (live run, step 40 at 0)"));
    // Step 40 of the run starts where the predicted iteration does.
    const auto step = step_span(*session_->measured_trace(), 40);
    QVERIFY(step.has_value());
    QCOMPARE(timeline->layout().offset(1), -step->first);
    QVERIFY(timeline->axis().begin() < 0 && timeline->axis().end() < 2 * (step->second - step->first) + 0.1);
    QCOMPARE(timeline->layout().task_count(),
             session_->predicted_trace()->task_count + session_->measured_trace()->task_count);
    screenshot(window_->timeline_view(), "timeline-live");
  }

  void a_live_run_stops_on_request() {
    LiveView* view = window_->live_view();
    QSignalSpy stepped(&view->run(), &LiveRun::stepped), finished(&view->run(), &LiveRun::finished);
    view->start(2, 100000);
    QVERIFY(stepped.wait(60000));
    view->run().stop();
    QVERIFY(finished.count() > 0 || finished.wait(10000));
    QCOMPARE(finished.front()[0].toBool(), false);
    QCOMPARE(finished.front()[1].toString(), QString("stopped"));
    QVERIFY(!view->run().running());
  }

  void unbalanced_expert_routing_shows_its_imbalance_cost_and_bars() {
    QVERIFY(session_->open(catalog_scenario("moe-skew-mixtral")));
    PlansView* plans = window_->plans_view();
    window_->tabs()->setCurrentWidget(plans);
    const Candidate* c = session_->selected_candidate();
    QVERIFY(c && c->report.routing);
    QVERIFY(c->report.routing->imbalance > 1);
    QVERIFY(c->report.routing->cost_s > 0);  // worked out for the plan inspected
    QVERIFY(plans->report()->toPlainText().contains("imbalance"));
    QVERIFY(plans->routing_picture()->isVisibleTo(plans));
    QVERIFY(!plans->routing_picture()->pixmap().isNull());
    screenshot(plans, "plans-routing");
    // Balanced again: no section, no picture.
    QVERIFY(session_->open(catalog_scenario("quickstart")));
    QVERIFY(!plans->routing_picture()->isVisibleTo(plans));
  }

  void a_scenario_of_several_jobs_colours_the_topology_by_job() {
    QVERIFY(session_->open(catalog_scenario("two-jobs")));
    QVERIFY(session_->jobs().has_value());
    const Topology& topology = window_->topology_view()->canvas()->topology();
    QCOMPARE(topology.job_names.size(), size_t(3));
    int shared = 0, by_job = 0;
    for (const TopologyLink& l : topology.links) {
      shared += l.jobs.size() > 1;
      by_job += l.jobs.size() == 1;
    }
    QCOMPARE(shared, 1);               // pod 1's uplink, where jobs a and b meet
    QCOMPARE(by_job, 3 * 4 * 16 + 3);  // 12 nodes' NVLinks and NICs, and pods 0, 2 and 3's uplinks
    screenshot(window_->topology_view(), "topology-jobs");
    QVERIFY(session_->open(catalog_scenario("quickstart")));
    QVERIFY(topology.job_names.empty());
  }
};

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  apply_style(app);
  TestGuiViews test;
  return QTest::qExec(&test, argc, argv);
}
#include "test_gui_views.moc"
