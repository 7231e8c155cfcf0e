// The main window: one tab per view over one Session.
#pragma once

#include <QMainWindow>

class QTabWidget;
class QLabel;

namespace paratwin::gui {

class LiveView;
class MemoryView;
class PlansView;
class ReliabilityView;
class ScenarioView;
class Session;
class TimelineView;
class TopologyView;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);

  Session& session() const { return *session_; }
  QTabWidget* tabs() const { return tabs_; }
  ScenarioView* scenario_view() const { return scenario_; }
  PlansView* plans_view() const { return plans_; }
  TimelineView* timeline_view() const { return timeline_; }
  MemoryView* memory_view() const { return memory_; }
  TopologyView* topology_view() const { return topology_; }
  ReliabilityView* reliability_view() const { return reliability_; }
  LiveView* live_view() const { return live_; }

 private:
  void update_title();

  Session* session_;
  QTabWidget* tabs_;
  ScenarioView* scenario_;
  PlansView* plans_;
  TimelineView* timeline_;
  MemoryView* memory_;
  TopologyView* topology_;
  ReliabilityView* reliability_;
  LiveView* live_;
  QLabel* status_;
};

}  // namespace paratwin::gui
