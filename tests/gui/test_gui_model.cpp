// The GUI's widget-free models on their own: the time axis, trace reading, the timeline's items and
// geometry (level of detail, hit testing), the candidate table, comparison, memory bars, topology,
// reliability history, live progress lines and the session (checking, searching, selecting).
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>

#include "gui/model/candidate_table.hpp"
#include "gui/model/comparison.hpp"
#include "gui/model/live_run.hpp"
#include "gui/model/memory_bars.hpp"
#include "gui/model/reliability_history.hpp"
#include "gui/model/session.hpp"
#include "gui/model/spread_curve.hpp"
#include "gui/model/timeline_layout.hpp"
#include "gui/model/topology.hpp"
#include "plan/analytic/evaluate.hpp"
#include "plan/report/perfetto_trace.hpp"
#include "plan/report/trace.hpp"
#include "plan/report/trace_file.hpp"
#include "source_tree.hpp"

using namespace paratwin;
using namespace paratwin::gui;

namespace {

QString quickstart_path() {
  return QString::fromStdString(*Catalog::installed().find(CatalogKind::Scenario, "quickstart"));
}

ScenarioSpec quickstart() {
  return load_scenario(quickstart_path().toStdString());
}

// Two readings of one schedule: the same lanes holding the same spans, times within `tolerance_s`
// (and the same hover details when `details`).
void same_lanes(const Trace& got, const Trace& want, double tolerance_s, bool details) {
  QCOMPARE(got.task_count, want.task_count);
  QCOMPARE(got.lanes.size(), want.lanes.size());
  for (size_t l = 0; l < got.lanes.size(); ++l) {
    const Lane &x = got.lanes[l], &y = want.lanes[l];
    QCOMPARE(x.process, y.process);
    QCOMPARE(x.thread, y.thread);
    QCOMPARE(x.spans.size(), y.spans.size());
    for (size_t i = 0; i < x.spans.size(); ++i) {
      QCOMPARE(x.spans[i].name, y.spans[i].name);
      QCOMPARE(x.spans[i].kind, y.spans[i].kind);
      if (details) QCOMPARE(x.spans[i].details, y.spans[i].details);
      QVERIFY(std::abs(x.spans[i].start_s - y.spans[i].start_s) < tolerance_s);
      QVERIFY(std::abs(x.spans[i].end_s - y.spans[i].end_s) < tolerance_s);
    }
  }
}

struct Analytic {
  Program program;
  Evaluation evaluation;
  Trace trace;
};

Analytic analytic(const ScenarioSpec& s, const Plan& plan) {
  Analytic a{lower(plan, s.model, s.cluster, s.training), {}, {}};
  a.evaluation = evaluate(a.program, s.cluster, s.training);
  a.trace = parse_chrome_trace(QByteArray::fromStdString(chrome_trace(a.program, a.evaluation)), "analytic");
  return a;
}

// One lane of n back-to-back tasks of 1 ms each, alternating forward and backward.
std::shared_ptr<Trace> synthetic(int n) {
  std::string events =
      R"({"traceEvents":[{"name":"thread_name","ph":"M","pid":0,"tid":0,"args":{"name":"compute"}})";
  for (int i = 0; i < n; ++i)
    events += ",{\"name\":\"t" + std::to_string(i) + "\",\"cat\":\"" + (i % 2 ? "backward" : "forward") +
              "\",\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":" + std::to_string(i * 1000) + ",\"dur\":1000}";
  events += "]}";
  return std::make_shared<Trace>(parse_chrome_trace(QByteArray::fromStdString(events), "synthetic"));
}

}  // namespace

class TestGuiModel : public QObject {
  Q_OBJECT

 private slots:
  void the_time_axis_maps_both_ways_and_zooms_around_the_pointer() {
    TimeAxis axis(0, 10, 100, 1000);
    QCOMPARE(axis.x(0), 100.0);
    QCOMPARE(axis.x(10), 1100.0);
    QCOMPARE(axis.t(600), 5.0);
    axis.zoom(4, 350);  // the time under x = 350 (2.5 s) stays there
    QVERIFY(std::abs(axis.t(350) - 2.5) < 1e-12);
    QVERIFY(std::abs(axis.end() - axis.begin() - 2.5) < 1e-12);
    axis.pan(100);  // content moves right: the view starts 100 px worth of time earlier
    QVERIFY(std::abs(axis.t(450) - 2.5) < 1e-12);
    axis.clamp(0, 10);
    QVERIFY(axis.begin() >= -0.5 - 1e-12);
  }

  void ruler_ticks_are_nice_and_labelled_for_their_spacing() {
    QCOMPARE(nice_step(0, 1, 5), 0.2);
    QCOMPARE(nice_step(0, 7, 5), 2.0);
    QCOMPARE(nice_step(0, 0.0093, 4), 0.005);
    QCOMPARE(format_time(0.25, 0.05), QString("250 ms"));
    QCOMPARE(format_time(1.5, 0.5), QString("1.5 s"));
    QCOMPARE(format_time(4e-5, 1e-5), QString("40 us"));
    const TimeAxis axis(0, 2.65, 0, 1000);
    const std::vector<Tick> ticks = axis.ticks(90);
    QVERIFY(ticks.size() >= 5 && ticks.size() <= 12);
    for (const Tick& t : ticks) QVERIFY(std::abs(t.pixel - axis.x(t.value)) < 1e-9);
    QCOMPARE(ticks.front().label, QString("0"));
  }

  void an_analytic_trace_reads_into_lanes_of_spans() {
    const ScenarioSpec s = quickstart();
    const Analytic a = analytic(s, complete_plan(s));
    const Trace& t = a.trace;
    QCOMPARE(t.task_count, a.program.task_count());
    QVERIFY(std::abs(t.end_s - a.evaluation.iteration_time_s) < 1e-6 * a.evaluation.iteration_time_s);
    QVERIFY(!t.lanes.empty());
    bool forward = false, backward = false, dp = false, tp = false;
    for (const Lane& lane : t.lanes) {
      QVERIFY(!lane.spans.empty());
      QVERIFY(std::is_sorted(lane.spans.begin(), lane.spans.end(),
                             [](const Span& x, const Span& y) { return x.start_s < y.start_s; }));
      double covered = 0;
      for (const Span& sp : lane.spans) {
        forward |= sp.kind == SpanKind::Forward;
        backward |= sp.kind == SpanKind::Backward;
        dp |= sp.kind == SpanKind::DpComm;
        tp |= sp.kind == SpanKind::TpComm;
        QVERIFY(sp.kind != SpanKind::Idle || lane.thread == "compute");  // only compute lanes get idle gaps
        covered += sp.end_s - sp.start_s;
      }
      // A compute lane is covered end to end by its tasks and its idle gaps.
      if (lane.thread == "compute") QVERIFY(std::abs(covered - (t.end_s - t.begin_s)) < 1e-9);
    }
    QVERIFY(forward && backward && dp && tp);
  }

  void a_program_read_directly_equals_its_chrome_trace_read_back() {
    const ScenarioSpec s = load_scenario(quickstart_path().toStdString(),
                                         {parse_override("plan.pp=4"), parse_override("plan.dp=4")});
    const Analytic a = analytic(s, complete_plan(s));
    const Trace direct = trace_of(a.program, a.evaluation, "direct");
    same_lanes(direct, a.trace, 1e-9, true);  // the JSON keeps microseconds
  }

  // `--trace FILE.json.gz` and `FILE.pftrace` open as the JSON form does; damaged gzip is an
  // InputError naming the file.
  void gzip_and_perfetto_traces_open_as_their_json_trace() {
    const Analytic a = analytic(quickstart(), complete_plan(quickstart()));
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString plain = dir.filePath("t.json"), packed = dir.filePath("t.json.gz");
    for (const QString& path : {plain, packed})
      write_trace_file(path.toStdString(),
                       [&](std::ostream& out) { write_chrome_trace(out, a.program, a.evaluation); });
    const Trace want = load_chrome_trace(plain), got = load_chrome_trace(packed);
    QVERIFY(want.task_count > 0);
    QCOMPARE(got.task_count, want.task_count);
    QCOMPARE(got.lanes.size(), want.lanes.size());
    QCOMPARE(got.begin_s, want.begin_s);
    QCOMPARE(got.end_s, want.end_s);
    // `--trace FILE.pftrace`: the same lanes and tasks, times to the nanosecond it keeps.
    const QString perfetto = dir.filePath("t.pftrace");
    write_trace_file(perfetto.toStdString(),
                     [&](std::ostream& out) { write_perfetto_trace(out, a.program, a.evaluation); });
    const Trace pf = load_chrome_trace(perfetto);
    same_lanes(pf, want, 2e-9, false);  // the protobuf has no task arguments
    QFile file(packed);
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QByteArray half = file.readAll().left(int(file.size() / 2));
    file.close();
    QFile cut(dir.filePath("cut.json.gz"));
    QVERIFY(cut.open(QIODevice::WriteOnly));
    cut.write(half);
    cut.close();
    try {
      load_chrome_trace(cut.fileName());
      QFAIL("expected an InputError");
    } catch (const InputError& e) {
      const QString message = QString::fromStdString(e.diagnostics().front().str());
      QVERIFY2(message.contains("cut.json.gz") && message.contains("gzip"), qPrintable(message));
    }
  }

  void text_that_is_not_a_trace_is_an_input_error_naming_its_source() {
    for (const char* text :
         {"{\"x\": 1}", "not json", "{\"traceEvents\": [{\"ph\": \"X\", \"ts\": \"soon\"}]}"}) {
      try {
        parse_chrome_trace(text, "broken.json");
        QFAIL("expected an InputError");
      } catch (const InputError& e) {
        const QString message = QString::fromStdString(e.diagnostics().front().str());
        QVERIFY2(message.startsWith("broken.json") && message.contains("not a Chrome trace"),
                 qPrintable(message));
      }
    }
  }

  void zoomed_out_many_tasks_become_a_few_buckets_per_pixel() {
    TimelineLayout layout;
    layout.set_sections({{"synthetic", synthetic(20000)}});
    QCOMPARE(layout.task_count(), size_t(20000));
    QCOMPARE(layout.rows().size(), size_t(1));
    const TimelineRow& row = layout.rows().front();
    const TimeAxis axis(0, 20.0, 200, 1000);  // 20,000 tasks of 1 ms on 1,000 px
    const std::vector<TimelineItem> items = layout.items(row, axis);
    QVERIFY2(items.size() <= 1000 / 3 + 2, qPrintable(QString::number(items.size())));
    int merged = 0;
    for (const TimelineItem& it : items) {
      QVERIFY(it.rect.left() >= 200 - 1e-9 && it.rect.right() <= 1200 + 1e-9);
      QVERIFY(it.rect.top() >= row.top && it.rect.bottom() <= row.top + row.height);
      merged += it.merged;
    }
    QCOMPARE(merged, 20000);  // every task is in exactly one item
    QVERIFY(std::abs(items.back().rect.right() - 1200) < 1.5);
  }

  void zoomed_in_each_task_is_its_own_rectangle_where_the_axis_puts_it() {
    TimelineLayout layout;
    layout.set_sections({{"synthetic", synthetic(20000)}});
    const TimelineRow& row = layout.rows().front();
    const TimeAxis axis(5.0, 5.010, 200, 1000);  // 10 tasks on 1,000 px
    const std::vector<TimelineItem> items = layout.items(row, axis);
    QVERIFY(items.size() >= 10 && items.size() <= 12);
    for (const TimelineItem& it : items) {
      QCOMPARE(it.merged, 1);
      const Span& s = layout.span(row, it.span);
      QVERIFY(std::abs(it.rect.left() - std::max(200.0, axis.x(s.start_s))) < 1e-6);
      QVERIFY(std::abs(it.rect.right() - std::min(1200.0, axis.x(s.end_s))) < 1e-6);
      QCOMPARE(it.kind, s.kind);
    }
    // What lies under the middle of task 5004 is task 5004.
    const double x = axis.x(5.0045);
    const auto hit = layout.hit(x, row.top + row.height / 2, axis);
    QVERIFY(hit.has_value());
    QCOMPARE(layout.span(row, hit->span).name, QString("t5004"));
    QVERIFY(!layout.hit(x, row.top + row.height + 50, axis).has_value());
  }

  void sections_stack_predicted_above_measured_each_from_time_zero() {
    const ScenarioSpec s = quickstart();
    auto predicted = std::make_shared<Trace>(analytic(s, complete_plan(s)).trace);
    auto measured = synthetic(100);
    TimelineLayout layout;
    layout.set_sections({{"predicted", predicted}, {"measured", measured}});
    QCOMPARE(layout.headers().size(), size_t(2));
    QCOMPARE(layout.rows().size(), predicted->lanes.size() + 1);
    QCOMPARE(layout.rows().back().section, 1);
    QVERIFY(layout.headers()[1].second > layout.rows()[predicted->lanes.size() - 1].top);
    QCOMPARE(layout.offset(1), -measured->begin_s);
    QVERIFY(std::abs(layout.duration_s() - std::max(predicted->end_s - predicted->begin_s, 0.1)) < 1e-9);
  }

  void the_candidate_table_shows_and_sorts_the_search_results() {
    const ScenarioSpec s = load_scenario(quickstart_path().toStdString(), {parse_override("plan=auto")});
    SearchOptions options;
    options.top = 6;
    const SearchResult r = search_plans(s, options);
    CandidateTable table;
    table.set_candidates(r.top, "s");
    QCOMPARE(table.rowCount(), int(r.top.size()));
    QCOMPARE(table.columnCount(), int(CandidateTable::ColumnCount));
    QCOMPARE(table.headerData(CandidateTable::Objective, Qt::Horizontal).toString(),
             QString("objective (s)"));
    for (int row = 0; row < table.rowCount(); ++row) {
      const Candidate& c = r.top[size_t(row)];
      QCOMPARE(table.data(table.index(row, CandidateTable::Tp)).toString(), QString::number(c.plan.tp));
      QCOMPARE(
          table.data(table.index(row, CandidateTable::IterationTime), CandidateTable::kSortRole).toDouble(),
          c.report.metrics.iteration_time_s);
      QCOMPARE(table.data(table.index(row, CandidateTable::Fits)).toString(),
               QString(c.report.metrics.fits ? "yes" : "NO"));
    }
    // Best first: the objective does not decrease down the table (ties within 0.1% go to simpler plans).
    for (int row = 1; row < table.rowCount(); ++row)
      QVERIFY(
          table.data(table.index(row, CandidateTable::Objective), CandidateTable::kSortRole).toDouble() >=
          table.data(table.index(row - 1, CandidateTable::Objective), CandidateTable::kSortRole).toDouble() *
              (1 - 1e-3));
    const std::vector<ComparisonRow> rows = compare(r.top[0], r.top.back());
    auto it = std::find_if(rows.begin(), rows.end(),
                           [](const ComparisonRow& x) { return x.label == "iteration time"; });
    QVERIFY(it != rows.end());
    const double ta = r.top[0].report.metrics.iteration_time_s,
                 tb = r.top.back().report.metrics.iteration_time_s;
    QCOMPARE(it->better, ta < tb * (1 - 1e-9) ? -1 : tb < ta * (1 - 1e-9) ? 1 : 0);
    // Where the critical stage's compute goes, kernel kind by kernel kind.
    it = std::find_if(rows.begin(), rows.end(), [](const ComparisonRow& x) { return x.label == "GEMMs"; });
    QVERIFY(it != rows.end());
    QVERIFY(r.top[0].report.breakdown.kernels.gemm_s > 0);
    QCOMPARE(it->a, format_time(r.top[0].report.breakdown.kernels.gemm_s,
                                r.top[0].report.breakdown.kernels.gemm_s / 1000));
  }

  // Under failures the comparison shows each plan's expected goodput, the figure the objective divides by.
  void comparison_shows_the_goodput_under_failures() {
    const ScenarioSpec s =
        load_scenario(quickstart_path().toStdString(),
                      {parse_override("plan=auto"), parse_override("search.objective=time_to_train"),
                       parse_override("failures={host: {mtbf: 2d}, repair: 4h}"),
                       parse_override("elasticity.policy=shrink")});
    const SearchResult r = search_plans(s, {2, false});
    QVERIFY(r.top.size() == 2);
    QVERIFY(r.top[0].report.goodput.has_value());
    const std::vector<ComparisonRow> rows = compare(r.top[0], r.top[1]);
    auto it = std::find_if(rows.begin(), rows.end(),
                           [](const ComparisonRow& x) { return x.label == "goodput under failures"; });
    QVERIFY(it != rows.end());
    QCOMPARE(it->a, QString::number(100 * r.top[0].report.goodput->goodput, 'f', 1) + "%");
  }

  void memory_bars_stack_the_parts_in_proportion_against_capacity() {
    const ScenarioSpec s = load_scenario(quickstart_path().toStdString(),
                                         {parse_override("plan.pp=2"), parse_override("plan.dp=8")});
    const Plan plan = complete_plan(s);
    const Analytic a = analytic(s, plan);
    const Report report = make_report(s.name, a.program, a.evaluation);
    const std::vector<StageBar> bars = stage_bars(report);
    QCOMPARE(bars.size(), size_t(2));
    QCOMPARE(bars[0].capacity_gib, 80.0);
    const QRectF plot(100, 50, 800, 400);
    const MemoryChartGeometry g = layout_memory_chart(bars, plot);
    QCOMPARE(g.bars.size(), size_t(2));
    for (size_t i = 0; i < bars.size(); ++i) {
      const double px_per_gib = (g.y.pixel(0) - g.y.pixel(1));
      double sum = 0;
      for (int k = 0; k < kMemoryParts; ++k) {
        QVERIFY(std::abs(g.bars[i].segments[k].height() - bars[i].parts_gib[k] * px_per_gib) < 1e-6);
        sum += bars[i].parts_gib[k];
      }
      QVERIFY(std::abs(g.bars[i].whole.top() - g.y.pixel(sum)) < 1e-6);
      QVERIFY(std::abs(g.bars[i].capacity_y - g.y.pixel(80)) < 1e-6);
      QVERIFY(g.bars[i].whole.bottom() <= plot.bottom() + 1e-6 && g.y.hi() >= 80);
    }
    QVERIFY(g.bars[0].whole.right() < g.bars[1].whole.left());
  }

  void the_topology_names_links_as_the_simulator_does() {
    const ScenarioSpec s = quickstart();  // 4 DGX A100: 8 GPUs and 8 NICs per node, fat tree 1:1
    Topology t = build_topology(s.cluster);
    QCOMPARE(t.total_nodes, 4);
    QCOMPARE(t.drawn_nodes, 4);
    auto count = [&](TopologyBox::Kind kind) {
      return std::count_if(t.boxes.begin(), t.boxes.end(),
                           [&](const TopologyBox& b) { return b.kind == kind; });
    };
    QCOMPARE(count(TopologyBox::Kind::Gpu), 32);
    QCOMPARE(count(TopologyBox::Kind::Nic), 32);
    QCOMPARE(count(TopologyBox::Kind::Core), 1);
    QVERIFY(count(TopologyBox::Kind::Switch) >= 1);
    QStringList names;
    for (const TopologyLink& l : t.links) names << l.name;
    QVERIFY(names.contains("node0-gpu0-nvlink") && names.contains("node3-gpu7-nvlink"));
    QVERIFY(names.contains("nic0-link") && names.contains("nic31-link"));
    // Every box lies inside the picture.
    for (const TopologyBox& b : t.boxes)
      QVERIFY(QRectF(QPointF(0, 0), t.size).adjusted(-1, -1, 1, 1).contains(b.rect));
    const nlohmann::json report = {{"simulation",
                                    {{"links",
                                      {{{"link", "nic0-link"},
                                        {"capacity_GBps", 24.0},
                                        {"mean_GBps", 6.0},
                                        {"peak_GBps", 24.0},
                                        {"utilization", 0.25}}}}}}};
    QCOMPARE(apply_link_loads(t, link_loads(report)), 1);
    for (const TopologyLink& l : t.links)
      if (l.name == "nic0-link") QCOMPARE(l.load->utilization, 0.25);
    // A big cluster is drawn with a few nodes and one box for the rest.
    const ScenarioSpec big = load_scenario(quickstart_path().toStdString(),
                                           {parse_override("cluster.nodes=64"), parse_override("plan.dp=256"),
                                            parse_override("plan.micro_batch=2")});
    const Topology tb = build_topology(big.cluster, 4);
    QCOMPARE(tb.drawn_nodes, 4);
    QCOMPARE(std::count_if(tb.boxes.begin(), tb.boxes.end(),
                           [](const TopologyBox& b) { return b.kind == TopologyBox::Kind::More; }),
             1L);
  }

  void a_scenario_of_several_jobs_colours_links_by_the_job_on_their_nodes() {
    // scenarios/two-jobs.yaml: a on nodes 2-5, b on 6-9 (pods of four nodes), c packed into 12-15.
    Session session;
    QVERIFY(session.open(QString::fromStdString(paratwin_test::source_dir()) + "/scenarios/two-jobs.yaml"));
    QVERIFY(session.jobs().has_value());
    QVERIFY(!session.scenario().has_value());
    Topology t = build_topology(session.jobs()->cluster, 32);
    QCOMPARE(t.drawn_nodes, 16);
    QVERIFY(apply_job_placement(t, *session.jobs()) > 0);
    QCOMPARE(t.job_names.size(), size_t(3));
    std::map<QString, std::vector<int>> jobs;
    for (const TopologyLink& l : t.links) jobs[l.name] = l.jobs;
    QCOMPARE(jobs["node2-gpu0-nvlink"], std::vector<int>{0});
    QCOMPARE(jobs["node9-gpu7-nvlink"], std::vector<int>{1});
    QCOMPARE(jobs["node12-gpu0-nvlink"], std::vector<int>{2});
    QVERIFY(jobs["node0-gpu0-nvlink"].empty());                  // a node no job uses
    QCOMPARE(jobs["nic16-link"], std::vector<int>{0});           // node 2's first NIC
    QCOMPARE(jobs["domain1-uplink"], (std::vector<int>{0, 1}));  // where a and b meet
    QCOMPARE(jobs["domain3-uplink"], std::vector<int>{2});
  }

  void the_reliability_history_follows_the_markers() {
    const nlohmann::json report = {
        {"metrics", {{"tokens_per_s", 100.0}}},
        {"reliability", {{"horizon_s", 1000.0}, {"goodput", 0.5}, {"failures", 2}, {"restarts", 1}}}};
    Trace trace;
    trace.markers = {{100, "checkpoint", "checkpoint", 9000},
                     {300, "failure gpu 1 (node 0)", "failure", 9000},
                     {320, "failure gpu 9 (node 1)", "failure", 9000},
                     {400, "restart on 32 GPUs", "restart", 9000},
                     {900, "failure host 0 (node 0)", "failure", 40000}};
    const ReliabilityHistory h = reliability_history(report, trace, "r.json");
    QCOMPARE(h.failure_markers.size(), size_t(3));
    QCOMPARE(h.checkpoints.size(), size_t(1));
    QCOMPARE(h.down.size(), size_t(2));  // [300, 400) and [900, horizon)
    QCOMPARE(h.down[0], std::make_pair(300.0, 400.0));
    QCOMPARE(h.down[1], std::make_pair(900.0, 1000.0));
    QCOMPARE(h.goodput_curve.front().second, 9000 / (100 * 100.0));
    QCOMPARE(h.goodput_curve.back(), std::make_pair(1000.0, 0.5));
    QVERIFY_THROWS_EXCEPTION(InputError, reliability_history(nlohmann::json::object(), trace, "r.json"));
  }

  void the_spread_curve_rises_through_the_simulated_steps() {
    QVERIFY(!spread_curve({{"simulation", {{"iteration_times_s", {1.0}}}}}).has_value());
    const nlohmann::json report = {{"simulation",
                                    {{"iteration_times_s", {1.2, 1.0, 1.1, 1.3}},
                                     {"spread", to_json(summarize_spread({1.2, 1.0, 1.1, 1.3}, 1.0, 15))}}}};
    const std::optional<SpreadCurve> c = spread_curve(report);
    QVERIFY(c.has_value());
    QCOMPARE(c->spread.times_s.size(), size_t(4));
    QCOMPARE(c->spread.p_slower, 0.5);  // 1.2 and 1.3 are more than 15% over 1.0
    QCOMPARE(c->cdf.front(), std::make_pair(1.0, 0.0));
    QCOMPARE(c->cdf.back(), std::make_pair(1.3, 1.0));
    for (size_t i = 1; i < c->cdf.size(); ++i) QVERIFY(c->cdf[i].second >= c->cdf[i - 1].second);
  }

  void live_progress_lines_parse_into_steps() {
    const auto s = parse_live_step("step    12/50  loss 3.2145      9120 tok/s     44.1 ms/step  ETA 1.7s");
    QVERIFY(s.has_value());
    QCOMPARE(s->step, 12LL);
    QCOMPARE(s->steps, 50LL);
    QCOMPARE(s->loss, 3.2145);
    QCOMPARE(s->tokens_per_s, 9120.0);
    QVERIFY(std::abs(s->step_s - 0.0441) < 1e-12);
    QVERIFY(!parse_live_step("done: loss 5.5 -> 2.3; 10564 tokens/s measured").has_value());
    const nlohmann::json report = {
        {"metrics", {{"iteration_time_s", 0.05}, {"tokens_per_s", 10000.0}}},
        {"predicted",
         {{"iteration_time_s", 0.04}, {"tokens_per_s", 12500.0}, {"breakdown", {{"compute_s", 0.03}}}}},
        {"breakdown", {{"compute_s", 0.035}}}};
    const LiveComparison c = live_comparison(report);
    QCOMPARE(c.measured_iteration_s, 0.05);
    QCOMPARE(c.predicted_tokens_per_s, 12500.0);
    QCOMPARE(std::get<1>(c.breakdown.front()), 0.035);
    QCOMPARE(std::get<2>(c.breakdown.front()), 0.03);
  }

  void the_session_checks_text_as_typed_and_points_at_the_line() {
    Session session;
    QVERIFY(session.open(quickstart_path()));
    QVERIFY(session.scenario().has_value());
    QCOMPARE(session.candidates().size(), size_t(1));  // the fixed plan, evaluated at once
    QVERIFY(session.predicted_trace() && !session.predicted_trace()->empty());
    QStringList lines = session.text().split('\n');
    const int line = int(lines.indexOf("  zero: 1")) + 1;
    QVERIFY(line > 0);
    lines[line - 1] = "  zeroo: 1";
    QSignalSpy checked(&session, &Session::checked);
    session.set_text(lines.join('\n'));
    QCOMPARE(checked.count(), 1);
    QVERIFY(!session.scenario().has_value());
    QVERIFY(!session.diagnostics().empty());
    const Diagnostic& d = session.diagnostics().front();
    QCOMPARE(QString::fromStdString(d.where.file), quickstart_path());
    QCOMPARE(d.where.line, line);
    QVERIFY(QString::fromStdString(d.message).contains("zero"));  // the nearest valid key
    QVERIFY(session.modified());
  }

  void the_session_searches_on_a_worker_thread_and_selects() {
    Session session;
    session.open(quickstart_path());
    QSignalSpy finished(&session, &Session::search_finished);
    session.search(true, 5);
    QVERIFY(session.searching());
    QVERIFY(finished.wait(60000));
    QVERIFY(!session.searching());
    QCOMPARE(session.candidates().size(), size_t(5));
    QVERIFY(session.search_summary().text.startsWith("search:"));
    QCOMPARE(session.selected(), 0);
    const auto first = session.predicted_trace();
    session.select(3);
    QCOMPARE(session.selected(), 3);
    QVERIFY(session.predicted_trace() != first);
    // Cancelling frees the session at once; the dropped result never arrives.
    QSignalSpy failed(&session, &Session::search_failed);
    session.search(true, 5);
    session.cancel_search();
    QVERIFY(!session.searching());
    QCOMPARE(failed.count(), 1);
    QVERIFY(!finished.wait(1500) || finished.count() == 1);
  }
};

QTEST_GUILESS_MAIN(TestGuiModel)
#include "test_gui_model.moc"
