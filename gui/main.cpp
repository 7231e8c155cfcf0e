// paratwin-gui [SCENARIO]
#include <QApplication>

#include "gui/scenario_window.hpp"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  paratwin::gui::ScenarioWindow window;
  if (argc > 1) window.open_scenario(QString::fromLocal8Bit(argv[1]));
  window.show();
  return app.exec();
}
