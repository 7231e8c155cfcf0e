// paratwin-gui [SCENARIO]: the views over one scenario; without an argument, the catalog's quickstart.
#include <QApplication>

#include "gui/model/session.hpp"
#include "gui/views/main_window.hpp"
#include "gui/views/style.hpp"
#include "plan/spec/catalog.hpp"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName("paratwin-gui");
  paratwin::gui::apply_style(app);
  paratwin::gui::MainWindow window;
  QString scenario = argc > 1 ? QString::fromLocal8Bit(argv[1]) : QString();
  if (scenario.isEmpty())
    if (auto quickstart = paratwin::Catalog::installed().find(paratwin::CatalogKind::Scenario, "quickstart"))
      scenario = QString::fromStdString(*quickstart);
  if (!scenario.isEmpty()) window.session().open(scenario);
  window.show();
  return app.exec();
}
