// A live training run (`paratwin run ... --backend cpu`) as a child process: its progress lines
// parsed into steps as they come, and at the end its report (measured beside the twin's prediction)
// and its trace (the measured timeline).
#pragma once

#include <QObject>
#include <QTemporaryDir>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "gui/model/child_process.hpp"
#include "gui/model/trace.hpp"

namespace paratwin::gui {

struct LiveStep {
  long long step = 0, steps = 0;
  double loss = 0;
  double tokens_per_s = 0;
  double step_s = 0;
};

// Parses a progress line of `paratwin run`:
//   "step    12/50  loss 3.2145      9120 tok/s     44.1 ms/step  ETA 1.7s"
std::optional<LiveStep> parse_live_step(const QString& line);

// Measured and predicted figures from the run's report (`--json`).
struct LiveComparison {
  double measured_iteration_s = 0, predicted_iteration_s = 0;
  double measured_tokens_per_s = 0, predicted_tokens_per_s = 0;
  // (label, measured s, predicted s) of the time breakdown.
  std::vector<std::tuple<QString, double, double>> breakdown;
};
LiveComparison live_comparison(const nlohmann::json& report);

struct LiveRunRequest {
  QString scenario;  // file
  QStringList sets;  // --set overrides
  int ranks = 2;
  long long steps = 50;
};

class LiveRun : public QObject {
  Q_OBJECT

 public:
  explicit LiveRun(QObject* parent = nullptr);

  void start(const LiveRunRequest& request);
  void stop();
  bool running() const { return process_.running(); }

  const std::vector<LiveStep>& steps() const { return steps_; }
  const std::vector<QString>& log() const { return log_; }
  const std::optional<LiveComparison>& comparison() const { return comparison_; }
  std::shared_ptr<const Trace> trace() const { return trace_; }
  QString command_line() const { return process_.command_line(); }

 signals:
  void stepped(const LiveStep& step);
  void logged(const QString& line);
  // ok: the run ended by itself with status 0; `message` says how it ended.
  void finished(bool ok, const QString& message);

 private:
  void on_finished(bool ok);

  ParatwinProcess process_;
  std::unique_ptr<QTemporaryDir> dir_;
  std::vector<LiveStep> steps_;
  std::vector<QString> log_;
  std::optional<LiveComparison> comparison_;
  std::shared_ptr<const Trace> trace_;
  QString scenario_;
  int ranks_ = 0;
};

}  // namespace paratwin::gui
