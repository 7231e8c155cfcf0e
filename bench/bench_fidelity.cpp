// bench_fidelity: how accurate the twin is on published training runs (bench/fidelity/manifest.yaml).
// Per checked run the measured and predicted iteration time and the signed error; mean, P90 and max
// absolute error per source, per device, per kind of run and overall; the twin's peak memory against
// the peaks sources published and against the configurations they report as out of memory; the runs
// that are not expressible apart; the held-out runs, evaluated and reported apart; and the
// test_fidelity guards. Markdown on standard output; --json and --png write the data and the picture;
// --simulate also runs every checked run through the simulator (minutes) and reports it beside.
//   bench_fidelity [--manifest FILE] [--json FILE] [--png FILE] [--simulate]
#include <algorithm>
#include <cstdio>
#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/fidelity_figure.hpp"
#include "bench/fidelity_png.hpp"
#include "bench/fidelity_set.hpp"
#include "bench/fidelity_simulated.hpp"
#include "plan/io/atomic_file.hpp"
#include "source_tree.hpp"

using namespace paratwin;
using namespace paratwin::fidelity;

namespace {

std::string percent(double v, bool sign = false) {
  char buf[32];
  std::snprintf(buf, sizeof buf, sign ? "%+.1f%%" : "%.1f%%", 100 * v);
  return buf;
}

std::string seconds(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v < 10 ? "%.3f" : v < 100 ? "%.2f" : "%.1f", v);
  return buf;
}

std::string published(const Figure& f) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g %s", f.value, enum_name(f.kind, kFigureKindNames).c_str());
  return buf;
}

// `column` heads the id column ("id" for the set; the held-out tables say "held-out id", so that each
// table of the report has a header of its own for docs/fidelity.md's copies).
void print_runs(const std::string& column, const std::vector<Outcome>& outcomes) {
  std::printf(
      "| %s | source | model | GPUs | seq | device | precision | plan | measured s | predicted s | error | "
      "fits |\n",
      column.c_str());
  std::printf("|---|---|---|---:|---:|---|---|---|---:|---:|---:|---|\n");
  for (const Outcome& o : outcomes)
    std::printf("| %s | %s | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s |\n", o.id.c_str(),
                o.source.c_str(), o.model.c_str(), o.gpus, o.seq_len, o.device.c_str(), o.precision.c_str(),
                o.plan.c_str(), seconds(o.measured_s).c_str(), seconds(o.predicted_s).c_str(),
                percent(o.error(), true).c_str(), o.report.metrics.fits ? "yes" : "no");
}

void stats_row(const std::string& label, const Stats& s, const std::string& extra = "") {
  if (s.runs == 0) return;
  std::printf("| %s | %d | %s | %s | %s | %s |%s\n", label.c_str(), s.runs, percent(s.mean_abs).c_str(),
              percent(s.p90_abs).c_str(), percent(s.max_abs).c_str(), percent(s.mean_signed, true).c_str(),
              extra.c_str());
}

void print_sources(const Manifest& m, const std::vector<Outcome>& outcomes) {
  std::printf("\n## Per source\n\n");
  std::printf("| source | checked | mean abs | P90 abs | max abs | mean signed | not expressible |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  for (const Source& source : m.sources) {
    int left_out = 0;
    for (const Run& r : m.runs) left_out += r.source == source.name && !r.evaluated();
    const Stats s = stats(outcomes, [&](const Outcome& o) { return o.source == source.name; });
    if (s.runs == 0)
      std::printf("| %s | 0 | | | | | %d |\n", source.name.c_str(), left_out);
    else
      stats_row(source.name, s, " " + std::to_string(left_out) + " |");
  }
  int left_out = 0;
  for (const Run& r : m.runs) left_out += !r.evaluated();
  stats_row("**all**", stats(outcomes), " " + std::to_string(left_out) + " |");
}

// The distinct values of one of the runs' fields, in the order the runs give them.
std::vector<std::string> first_seen(const std::vector<Outcome>& outcomes, std::string Outcome::*field) {
  std::vector<std::string> values;
  for (const Outcome& o : outcomes)
    if (std::find(values.begin(), values.end(), o.*field) == values.end()) values.push_back(o.*field);
  return values;
}

// One row per device the runs' plans use, in the order the runs name them: a device file's figures
// (peak, efficiencies) are shared by every run on it, so a skew common to its rows points there.
void print_devices(const std::string& column, const std::vector<Outcome>& outcomes) {
  const std::vector<std::string> devices = first_seen(outcomes, &Outcome::device);
  std::printf("| %s | runs | mean abs | P90 abs | max abs | mean signed |\n", column.c_str());
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  for (const std::string& d : devices)
    stats_row(d, stats(outcomes, [&](const Outcome& o) { return o.device == d; }));
}

void print_kinds(const std::string& column, const std::vector<Outcome>& outcomes) {
  struct Kind {
    const char* label;
    std::function<bool(const Outcome&)> keep;
  };
  const Kind kinds[] = {
      {"ZeRO-3 / FSDP", [](const Outcome& o) { return o.zero3; }},
      {"ZeRO 0-1", [](const Outcome& o) { return !o.zero3; }},
      {"H100", [](const Outcome& o) { return o.h100; }},
      {"A100", [](const Outcome& o) { return o.device.find("a100") != std::string::npos; }},
      {"fp8", [](const Outcome& o) { return o.precision == "fp8"; }},
      {"bf16 / fp16", [](const Outcome& o) { return o.precision != "fp8"; }},
      {"tp > 1", [](const Outcome& o) { return o.report.plan.tp > 1; }},
      {"pp > 1", [](const Outcome& o) { return o.report.plan.pp > 1; }},
      {"cp > 1", [](const Outcome& o) { return o.report.plan.cp > 1; }},
      {"MoE", [](const Outcome& o) { return o.moe; }},
      {"recompute full", [](const Outcome& o) { return o.plan.find("full,") != std::string::npos; }},
      {"recompute full every n-th layer",
       [](const Outcome& o) { return o.plan.find("full every") != std::string::npos; }},
      {"recompute op", [](const Outcome& o) { return o.plan.find(", op,") != std::string::npos; }},
      {"recompute none", [](const Outcome& o) { return o.plan.find("none") != std::string::npos; }},
      {"under 5B parameters", [](const Outcome& o) { return o.parameters < 5e9; }},
      {"100B parameters and more", [](const Outcome& o) { return o.parameters >= 100e9; }},
      {"sequence of 1K and less", [](const Outcome& o) { return o.seq_len <= 1024; }},
      {"sequence of 16K and more", [](const Outcome& o) { return o.seq_len >= 16384; }},
  };
  std::printf("| %s | runs | mean abs | P90 abs | max abs | mean signed |\n", column.c_str());
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  for (const Kind& k : kinds) stats_row(k.label, stats(outcomes, k.keep));
}

// Rows by attention kernel and by the share of the critical stage's (re)compute the twin gives
// attention: an error that grows with the share points at the kernel's figures, not the rest.
void print_attention(const std::string& column, const std::vector<Outcome>& outcomes) {
  const std::vector<std::string> kernels = first_seen(outcomes, &Outcome::attention);
  const struct {
    const char* label;
    double from, to;
  } shares[] = {{"under 10%", 0, 0.1},
                {"10% to a third", 0.1, 1.0 / 3},
                {"a third to two thirds", 1.0 / 3, 2.0 / 3},
                {"two thirds and more", 2.0 / 3, 2}};
  std::printf("| %s | runs | mean abs | P90 abs | max abs | mean signed |\n", column.c_str());
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  for (const std::string& kernel : kernels)
    for (const auto& share : shares) {
      const Stats s = stats(outcomes, [&](const Outcome& o) {
        return o.attention == kernel && o.attention_share() >= share.from && o.attention_share() < share.to;
      });
      if (s.runs > 0) stats_row(kernel + ", attention " + share.label, s);
    }
  // What the runs say of the two parts: measured / predicted = (1 - share) x rest + share x attention,
  // least squares over a kernel's runs (a diagnostic to point a measurement, never a figure to use).
  std::printf("\n");
  for (const std::string& kernel : kernels) {
    double uu = 0, uv = 0, vv = 0, uy = 0, vy = 0, most = 0;
    int runs = 0;
    for (const Outcome& o : outcomes) {
      if (o.attention != kernel) continue;
      const double v = o.attention_share(), u = 1 - v, y = o.measured_s / o.predicted_s;
      uu += u * u, uv += u * v, vv += v * v, uy += u * y, vy += v * y;
      most = std::max(most, v);
      ++runs;
    }
    // Only where some runs are mostly attention can the two parts be told apart.
    if (runs < 10 || most < 1.0 / 3) continue;
    const double det = uu * vv - uv * uv;
    std::printf("- %s (%d runs): measured / predicted is x%.2f on attention, x%.2f on the rest\n",
                kernel.c_str(), runs, (uu * vy - uv * uy) / det, (uy * vv - vy * uv) / det);
  }
}

std::string gib(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

void print_memory(const Manifest& m, const std::vector<Outcome>& outcomes,
                  const std::vector<AnchorOutcome>& anchors) {
  std::printf("\n## Peak memory against published peaks\n\n");
  std::printf(
      "The twin's peak (its fullest stage) over the peak per GPU its source published; what each\n"
      "source's figure measures is in the manifest (sources.*.memory).\n\n");
  std::printf("| id | source | device GiB | published GiB | twin GiB | twin / published |\n");
  std::printf("|---|---|---:|---:|---:|---:|\n");
  for (const Outcome& o : outcomes)
    if (o.published_peak)
      std::printf("| %s | %s | %s | %s | %s | %.2f |\n", o.id.c_str(), o.source.c_str(),
                  gib(o.report.metrics.memory_capacity_gib).c_str(), gib(o.published_peak_gib()).c_str(),
                  gib(o.report.metrics.peak_memory_gib).c_str(), o.peak_ratio());
  std::printf("\n| source | runs | mean twin / published | min | max |\n|---|---:|---:|---:|---:|\n");
  auto row = [](const std::string& label, const PeakStats& p) {
    if (p.runs > 0)
      std::printf("| %s | %d | %.2f | %.2f | %.2f |\n", label.c_str(), p.runs, p.mean, p.min, p.max);
  };
  for (const Source& source : m.sources)
    row(source.name, peak_stats(outcomes, [&](const Outcome& o) { return o.source == source.name; }));
  row("**all**", peak_stats(outcomes));
  if (anchors.empty()) return;
  std::printf("\n## Configurations published as out of memory\n\n");
  std::printf(
      "| id | source | plan | twin's peak GiB | device GiB | twin's verdict "
      "|\n|---|---|---|---:|---:|---|\n");
  for (const AnchorOutcome& a : anchors)
    std::printf("| %s | %s | %s | %s | %s | %s |\n", a.id.c_str(), a.source.c_str(), a.plan.c_str(),
                gib(a.peak_gib).c_str(), gib(a.capacity_gib).c_str(),
                a.fits ? "fits (the run did not)" : "does not fit");
}

void print_not_expressible(const Manifest& m) {
  std::printf("\n## Not expressible (out of the statistics)\n\n");
  std::printf("| id | source | published | why |\n|---|---|---|---|\n");
  for (const Run& r : m.runs)
    if (!r.evaluated())
      std::printf("| %s | %s | %s | %s |\n", r.id.c_str(), r.source.c_str(), published(r.published).c_str(),
                  r.not_expressible.c_str());
}

void print_held_out(const Manifest& m, const std::vector<Outcome>& held_out) {
  if (held_out.empty()) return;
  const Stats all = stats(held_out);
  std::printf("\n## Held out (out of the statistics above)\n\n");
  std::printf(
      "Published runs that no mechanism was developed against (manifest status `held out`), evaluated as "
      "the set is: %d runs, mean abs %s, P90 abs %s, max abs %s, mean signed %s.\n\n",
      all.runs, percent(all.mean_abs).c_str(), percent(all.p90_abs).c_str(), percent(all.max_abs).c_str(),
      percent(all.mean_signed, true).c_str());
  std::printf("| held-out source | runs | mean abs | P90 abs | max abs | mean signed |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  for (const Source& source : m.sources)
    stats_row(source.name, stats(held_out, [&](const Outcome& o) { return o.source == source.name; }));
  std::printf("\n");
  print_devices("held-out device", held_out);
  std::printf("\n");
  print_kinds("held-out kind", held_out);
  std::printf("\n");
  print_attention("held-out attention kernel, share of (re)compute", held_out);
  std::printf("\n");
  print_runs("held-out id", held_out);
}

// The simulator's iteration time of every checked run (in the order of `outcomes`), progress on
// standard error.
std::vector<double> simulate_checked(const Manifest& m, const Catalog& catalog) {
  std::vector<double> simulated;
  int total = 0;
  for (const Run& r : m.runs) total += r.checked();
  for (const Run& r : m.runs) {
    if (!r.checked()) continue;
    std::fprintf(stderr, "\rsimulating %d of %d: %-10s", int(simulated.size()) + 1, total, r.id.c_str());
    simulated.push_back(simulated_iteration_time(r, catalog));
  }
  std::fprintf(stderr, "\n");
  return simulated;
}

// The simulator beside the analytic evaluator: the same Program with contention on the links.
void print_simulated(const std::vector<Outcome>& outcomes, const std::vector<double>& simulated) {
  std::printf("\n## The simulator on the set (--simulate)\n\n");
  std::printf("| id | measured s | analytic s | simulated s | simulated / analytic | error simulated |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  std::vector<Outcome> as_simulated = outcomes;
  double low = 1e9, high = 0;
  int contended = 0;  // runs the simulator finds more than 0.1% slower
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    const Outcome& o = outcomes[i];
    as_simulated[i].predicted_s = simulated[i];
    const double ratio = simulated[i] / o.predicted_s;
    low = std::min(low, ratio);
    high = std::max(high, ratio);
    contended += ratio > 1.001;
    std::printf("| %s | %s | %s | %s | %.3f | %s |\n", o.id.c_str(), seconds(o.measured_s).c_str(),
                seconds(o.predicted_s).c_str(), seconds(simulated[i]).c_str(), ratio,
                percent(as_simulated[i].error(), true).c_str());
  }
  std::printf("\n| evaluator | runs | mean abs | P90 abs | max abs | mean signed |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  stats_row("analytic", stats(outcomes));
  stats_row("simulated", stats(as_simulated));
  std::printf("\nsimulated / analytic: %.4f to %.4f; %d of %zu runs more than 0.1%% slower simulated\n", low,
              high, contended, outcomes.size());
}

nlohmann::json stats_json(const Stats& s) {
  return {{"runs", s.runs},
          {"mean_abs", s.mean_abs},
          {"p90_abs", s.p90_abs},
          {"max_abs", s.max_abs},
          {"mean_signed", s.mean_signed}};
}

// `simulated`: the simulator's times in the order of `outcomes`, or empty.
nlohmann::json runs_json(const std::vector<Outcome>& outcomes, const std::vector<double>& simulated = {}) {
  nlohmann::json runs = nlohmann::json::array();
  for (const Outcome& o : outcomes) {
    runs.push_back(
        {{"id", o.id},
         {"source", o.source},
         {"model", o.model},
         {"device", o.device},
         {"precision", o.precision},
         {"attention", o.attention},
         {"gpus", o.gpus},
         {"seq_len", o.seq_len},
         {"plan", o.plan},
         {"settings", o.settings},
         {"replay", o.replay},
         {"zero3", o.zero3},
         {"h100", o.h100},
         {"moe", o.moe},
         {"measured_s", o.measured_s},
         {"predicted_s", o.predicted_s},
         {"error", o.error()},
         {"published_peak_gib", o.published_peak ? nlohmann::json(o.published_peak_gib()) : nlohmann::json()},
         {"report", paratwin::to_json(o.report)}});
    if (!simulated.empty()) runs.back()["simulated_s"] = simulated[runs.size() - 1];
  }
  return runs;
}

nlohmann::json to_json(const Manifest& m, const std::vector<Outcome>& outcomes,
                       const std::vector<Outcome>& held_out, const std::vector<AnchorOutcome>& anchors,
                       const std::vector<double>& simulated) {
  nlohmann::json left_out = nlohmann::json::array(), out_of_memory = nlohmann::json::array();
  for (const AnchorOutcome& a : anchors)
    out_of_memory.push_back({{"id", a.id},
                             {"source", a.source},
                             {"plan", a.plan},
                             {"replay", a.replay},
                             {"peak_gib", a.peak_gib},
                             {"capacity_gib", a.capacity_gib},
                             {"fits", a.fits}});
  for (const Run& r : m.runs)
    if (!r.evaluated())
      left_out.push_back({{"id", r.id},
                          {"source", r.source},
                          {"published", {{enum_name(r.published.kind, kFigureKindNames), r.published.value}}},
                          {"why", r.not_expressible}});
  const Stats all = stats(outcomes);
  const PeakStats peaks = peak_stats(outcomes);
  return {{"manifest", m.file},
          {"guard",
           {{"mean_abs_error", m.guard.mean_abs_error},
            {"max_abs_error", m.guard.max_abs_error},
            {"max_peak_over_published", m.guard.max_peak_over_published},
            {"held_out_mean_abs_error", m.guard.held_out_mean_abs_error},
            {"held_out_max_abs_error", m.guard.held_out_max_abs_error}}},
          {"overall", stats_json(all)},
          {"memory",
           {{"runs", peaks.runs},
            {"mean_ratio", peaks.mean},
            {"min_ratio", peaks.min},
            {"max_ratio", peaks.max}}},
          {"runs", runs_json(outcomes, simulated)},
          {"held_out", {{"overall", stats_json(stats(held_out))}, {"runs", runs_json(held_out)}}},
          {"not_expressible", left_out},
          {"out_of_memory", out_of_memory}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"the twin's accuracy on published training runs", "bench_fidelity"};
  std::string manifest_path = paratwin_test::source_dir() + "/bench/fidelity/manifest.yaml";
  std::string json_path, png_path;
  bool simulate = false;
  app.add_option("--manifest", manifest_path, "the validation set")->type_name("FILE");
  app.add_option("--json", json_path, "write every run, its prediction and the statistics as JSON")
      ->type_name("FILE");
  app.add_option("--png", png_path, "draw predicted against measured")->type_name("FILE");
  app.add_flag("--simulate", simulate, "also simulate every checked run with SimGrid (minutes)");
  CLI11_PARSE(app, argc, argv);
  try {
    const Catalog catalog(paratwin_test::source_dir());
    const Manifest manifest = load_manifest(manifest_path);
    const std::vector<Outcome> outcomes = evaluate_checked(manifest, catalog);
    const std::vector<Outcome> held_out = evaluate_held_out(manifest, catalog);
    const std::vector<AnchorOutcome> anchors = evaluate_anchors(manifest, catalog);
    const Stats all = stats(outcomes);
    std::printf("# The twin against %zu published runs (%d checked, %zu held out), analytic evaluator\n\n",
                manifest.runs.size(), all.runs, held_out.size());
    std::printf("## Checked runs\n\n");
    print_runs("id", outcomes);
    print_sources(manifest, outcomes);
    std::printf("\n## Per device\n\n");
    print_devices("device", outcomes);
    std::printf("\n## By kind of run (a run counts in every row it matches)\n\n");
    print_kinds("kind", outcomes);
    std::printf(
        "\n## By attention kernel and the twin's share of (re)compute in attention (training.attention; the "
        "report's kernel split)\n\n");
    print_attention("attention kernel, share of (re)compute", outcomes);
    print_memory(manifest, outcomes, anchors);
    print_not_expressible(manifest);
    print_held_out(manifest, held_out);
    const std::vector<double> simulated =
        simulate ? simulate_checked(manifest, catalog) : std::vector<double>{};
    if (simulate) print_simulated(outcomes, simulated);
    const bool within =
        all.mean_abs <= manifest.guard.mean_abs_error && all.max_abs <= manifest.guard.max_abs_error;
    std::printf(
        "\ntest_fidelity guard (bench/fidelity/manifest.yaml): mean abs %s <= %s, max abs %s <= %s: %s "
        "(issue 19's targets: 5.0%%, 12.0%%)\n",
        percent(all.mean_abs).c_str(), percent(manifest.guard.mean_abs_error).c_str(),
        percent(all.max_abs).c_str(), percent(manifest.guard.max_abs_error).c_str(),
        within ? "within" : "EXCEEDED");
    if (!held_out.empty()) {
      const Stats h = stats(held_out);
      std::printf("test_fidelity guard on the held-out runs: mean abs %s <= %s, max abs %s <= %s: %s\n",
                  percent(h.mean_abs).c_str(), percent(manifest.guard.held_out_mean_abs_error).c_str(),
                  percent(h.max_abs).c_str(), percent(manifest.guard.held_out_max_abs_error).c_str(),
                  h.mean_abs <= manifest.guard.held_out_mean_abs_error &&
                          h.max_abs <= manifest.guard.held_out_max_abs_error
                      ? "within"
                      : "EXCEEDED");
    }
    const PeakStats peaks = peak_stats(outcomes);
    std::printf("test_fidelity guard on peak memory: largest twin / published %.2f <= %.2f: %s\n", peaks.max,
                manifest.guard.max_peak_over_published,
                peaks.max <= manifest.guard.max_peak_over_published ? "within" : "EXCEEDED");
    if (!json_path.empty())
      write_file_atomically(json_path,
                            to_json(manifest, outcomes, held_out, anchors, simulated).dump(2) + "\n");
    if (!png_path.empty()) {
      char time[160], memory[96] = "";
      std::snprintf(time, sizeof time,
                    "ParaTwin (analytic) against %d published runs: mean |error| %.1f%%, max %.1f%%",
                    all.runs, 100 * all.mean_abs, 100 * all.max_abs);
      if (peaks.runs > 0)
        std::snprintf(memory, sizeof memory, "; peak memory %.2f-%.2f of %d published peaks", peaks.min,
                      peaks.max, peaks.runs);
      write_figure_png(fidelity_figure(outcomes, manifest.sources, std::string(time) + memory, held_out),
                       png_path);
    }
    return 0;
  } catch (const InputError& e) {
    for (const auto& d : e.diagnostics()) std::cerr << d.where.str() << ": error: " << d.message << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "bench_fidelity: error: " << e.what() << "\n";
    return 1;
  }
}
