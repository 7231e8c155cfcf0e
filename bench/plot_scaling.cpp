// The simulator's scaling curve (bench/sim_bench.sh): reads "SERIES GPUS SECONDS" lines on standard
// input (one series per label, such as folded and every rank) and draws the seconds against GPUs,
// both axes logarithmic, into the PNG named on the command line.
#include <iostream>
#include <map>
#include <sstream>
#include <string>

#include "viz/render.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: plot_scaling TITLE OUT.png < series-gpus-seconds\n";
    return 2;
  }
  std::map<std::string, paratwin::viz::Series> by_label;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string label;
    double gpus = 0, seconds = 0;
    if (!(in >> label >> gpus >> seconds)) continue;
    auto& s = by_label[label];
    s.label = label;
    s.points.push_back({gpus, seconds});
  }
  paratwin::viz::Chart chart;
  chart.title = argv[1];
  chart.x = {"GPUs", 10, [](double v) { return std::to_string(static_cast<long long>(v)); }};
  chart.y = {"CPU seconds (the command and its simulation)", 10, nullptr};
  int color = 0;
  for (auto& [label, s] : by_label) {
    s.color = color++;
    chart.series.push_back(s);
  }
  paratwin::viz::Figure figure;
  figure.panels = {chart};
  try {
    paratwin::viz::write_png(figure, argv[2]);
  } catch (const std::exception& e) {
    std::cerr << "plot_scaling: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
