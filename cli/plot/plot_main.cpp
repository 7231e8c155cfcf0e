// paratwin-plot: draws ParaTwin's JSON outputs as PNG pictures with Qt 6 Gui, without a display.
// Its own executable so that paratwin, started often (sweep workers, scripts), never loads Qt.
//   paratwin-plot sweep RESULTS.json|- OUT.png      (what `paratwin sweep --png` runs)
//   paratwin-plot spread REPORT.json|- OUT.png      (what `paratwin simulate --png` runs)
//   paratwin-plot routing REPORT.json|- OUT.png     (a plan or simulate report's expert routing)
//   paratwin-plot goodput REPORT.json|- OUT.png     (a plan report's candidates under failures)
//   paratwin-plot jobs REPORT.json|- OUT.png        (simulate --png on a scenario of several jobs)
#include <fstream>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "cli/plot/goodput_figure.hpp"
#include "cli/plot/jobs_figure.hpp"
#include "cli/plot/spread_figure.hpp"
#include "cli/plot/sweep_figure.hpp"
#include "viz/render.hpp"
#include "viz/routing_figure.hpp"

int main(int argc, char** argv) {
  CLI::App app{"draws ParaTwin's JSON outputs as PNG pictures", "paratwin-plot"};
  app.require_subcommand(1, 1);
  std::string input, output;
  auto* sweep = app.add_subcommand("sweep", "time to train and cost of a sweep (paratwin sweep --json)");
  sweep->add_option("results", input, "the sweep's JSON results, - for standard input")->required();
  sweep->add_option("png", output, "the PNG file to write")->required();
  auto* spread = app.add_subcommand(
      "spread", "the spread of a simulation's iteration times (paratwin simulate --iterations N --json)");
  spread->add_option("report", input, "the simulation's JSON report, - for standard input")->required();
  spread->add_option("png", output, "the PNG file to write")->required();
  auto* routing = app.add_subcommand(
      "routing", "tokens per EP rank and per expert of a report (plan or simulate --json)");
  routing->add_option("report", input, "the report's JSON, - for standard input")->required();
  routing->add_option("png", output, "the PNG file to write")->required();
  auto* goodput = app.add_subcommand(
      "goodput", "expected goodput and objective of a search's plans under failures (plan --top N --json)");
  goodput->add_option("report", input, "the plan's JSON report, - for standard input")->required();
  goodput->add_option("png", output, "the PNG file to write")->required();
  auto* jobs = app.add_subcommand(
      "jobs",
      "several jobs' iteration times alone and together, and where they meet (paratwin simulate --json)");
  jobs->add_option("report", input, "the simulation's JSON report, - for standard input")->required();
  jobs->add_option("png", output, "the PNG file to write")->required();
  try {
    app.parse(argc, argv);
    std::stringstream text;
    if (input == "-") {
      text << std::cin.rdbuf();
    } else {
      std::ifstream in(input);
      if (!in) throw std::runtime_error("cannot read " + input);
      text << in.rdbuf();
    }
    const auto json = nlohmann::json::parse(text.str(), nullptr, false);
    if (json.is_discarded()) throw std::runtime_error(input + " is not JSON");
    if (jobs->parsed())
      paratwin::viz::write_png(paratwin::plot::jobs_figure(json), output);
    else if (spread->parsed())
      paratwin::viz::write_png(paratwin::plot::spread_figure(json), output);
    else if (goodput->parsed())
      paratwin::viz::write_png(paratwin::plot::goodput_figure(json), output);
    else if (routing->parsed()) {
      if (!json.contains("routing"))
        throw std::runtime_error(input + " has no routing section (balanced routing or a dense model)");
      paratwin::viz::write_png(paratwin::viz::routing_figure(json.value("scenario", std::string()),
                                                             paratwin::routing_from_json(json["routing"])),
                               output);
    } else
      paratwin::viz::write_png(paratwin::plot::sweep_figure(paratwin::results_from_json(json)), output);
    return 0;
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const std::exception& e) {
    std::cerr << "paratwin-plot: error: " << e.what() << "\n";
    return 1;
  }
}
