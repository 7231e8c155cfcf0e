// How the GUI's timeline copes with large schedules: for Programs of 150 to 330,000 tasks, the time
// to turn a plan into the timeline (lower, evaluate, build the trace, as choosing a candidate does),
// to open the same schedule as a Chrome trace file, and to paint the Gantt chart (1400 x 860,
// offscreen) fitted and zoomed in, with the rectangles drawn. Run with QT_QPA_PLATFORM=offscreen.
#include <QApplication>
#include <QImage>
#include <QPainter>
#include <chrono>
#include <cstdio>

#include "gui/views/style.hpp"
#include "gui/views/timeline_widget.hpp"
#include "plan/analytic/evaluate.hpp"
#include "plan/report/trace.hpp"
#include "source_tree.hpp"

using namespace paratwin;
using namespace paratwin::gui;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Mean milliseconds of one paint, and the rectangles of the rows on screen.
std::pair<double, size_t> paint(TimelineWidget& w) {
  QImage image(w.size(), QImage::Format_ARGB32_Premultiplied);
  w.render(&image);  // warm-up
  const int repeats = 5;
  const auto t0 = Clock::now();
  for (int i = 0; i < repeats; ++i) w.render(&image);
  const double ms = ms_since(t0) / repeats;
  size_t items = 0;
  const double visible = w.viewport()->height();
  for (const TimelineRow& row : w.layout().rows())
    if (row.top < visible) items += w.layout().items(row, w.axis()).size();
  return {ms, items};
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  apply_style(app);
  const Catalog catalog(paratwin_test::source_dir());
  struct Config {
    const char* name;
    std::string yaml;
  };
  auto megatron = [](const char* model, int tp, int pp, int gpus, int batch) {
    return std::string("name: ") + model + "\nmodel: " + model +
           "\ncluster: {from: dgx-a100-80g, nodes: " + std::to_string(gpus / 8) +
           "}\ntraining: {global_batch: " + std::to_string(batch) + "}\nplan: {tp: " + std::to_string(tp) +
           ", pp: " + std::to_string(pp) + ", dp: " + std::to_string(gpus / (tp * pp)) +
           ", micro_batch: 1, recompute: full}\n";
  };
  const std::vector<Config> configs = {
      {"quickstart", "from_file:quickstart"},
      {"gpt3-175b-1024-a100", "from_file:gpt3-175b-1024-a100"},
      {"gpt3-310.1b (8 x 16 x 15)", megatron("gpt3-310.1b", 8, 16, 1920, 2160)},
      {"gpt3-1t (8 x 64 x 6)", megatron("gpt3-1t", 8, 64, 3072, 3072)},
  };
  std::printf(
      "| Program | tasks | lanes | plan -> timeline ms | open trace file ms (MB) | paint fitted ms | rects "
      "fitted | paint zoomed x1000 ms | rects zoomed |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Config& c : configs) {
    const ScenarioSpec s =
        c.yaml.rfind("from_file:", 0) == 0
            ? load_scenario(*catalog.find(CatalogKind::Scenario, c.yaml.substr(10)), {}, catalog)
            : load_scenario(parse_yaml(c.yaml, c.name), {}, catalog);
    const auto t0 = Clock::now();
    const Plan plan = complete_plan(s);
    const Program program = lower(plan, s.model, s.cluster, s.training);
    const Evaluation ev = evaluate(program, s.cluster, s.training);
    auto trace = std::make_shared<Trace>(trace_of(program, ev, c.name));
    const double prepare_ms = ms_since(t0);
    // The same schedule as a trace file (`paratwin plan --trace`), opened in the GUI.
    const QByteArray file = QByteArray::fromStdString(chrome_trace(program, ev));
    const auto t1 = Clock::now();
    const Trace opened = parse_chrome_trace(file, c.name);
    const double open_ms = ms_since(t1);

    TimelineWidget w;
    w.resize(1400, 860);
    w.set_sections({{"predicted", trace}});
    w.fit();
    const auto fitted = paint(w);
    w.show_range(ev.iteration_time_s * 0.5, ev.iteration_time_s * 0.501);
    const auto zoomed = paint(w);
    std::printf("| %s | %zu | %zu | %.0f | %.0f (%.1f) | %.1f | %zu | %.1f | %zu |\n", c.name,
                trace->task_count, trace->lanes.size(), prepare_ms, open_ms, file.size() / 1e6, fitted.first,
                fitted.second, zoomed.first, zoomed.second);
    if (opened.task_count != trace->task_count) return 1;
  }
  return 0;
}
