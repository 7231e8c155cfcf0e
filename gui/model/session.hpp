// What the GUI works on, without widgets: the scenario (text, overrides, the result of checking
// it), the plan candidates (the scenario's fixed plan, or the optimizer's, searched on a worker
// thread), the chosen candidate's report and predicted timeline, and the latest simulation (a
// `paratwin simulate` child process) with its timeline, per-link utilization and reliability.
// Views observe its signals and paint what it holds; tests drive it directly.
#pragma once

#include <QElapsedTimer>
#include <QFutureWatcher>
#include <QObject>
#include <QTemporaryDir>
#include <QTemporaryFile>
#include <atomic>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "gui/model/child_process.hpp"
#include "gui/model/reliability_history.hpp"
#include "gui/model/trace.hpp"
#include "plan/search/optimizer.hpp"
#include "plan/spec/jobs.hpp"

namespace paratwin::gui {

struct SearchSummary {
  QString text;  // "search: 73620 candidates, 57 evaluated exactly, 0.26 s" or "the scenario's fixed plan"
  QString explanation;  // why the best beats the runner-up (and, under failures, why a faster plan lost)
  std::map<std::string, long> rejected;
  QString objective_unit;
};

struct SimulationRequest {
  QString horizon;  // "30d"; empty: one detailed iteration only
  quint64 seed = 1;
  int iterations = 1;
  QStringList sets;  // extra overrides for this simulation (failure rates to try, ...)
};

class Session : public QObject {
  Q_OBJECT

 public:
  explicit Session(QObject* parent = nullptr);
  ~Session() override;

  // ---- the scenario
  // Reads a scenario file into the editor text and checks it (without overrides); false (with the
  // reason in diagnostics()) when the file cannot be read.
  bool open(const QString& path);
  void set_text(const QString& text);           // checks it again
  void set_overrides(const QStringList& sets);  // "plan.tp=4", ...; checks again
  bool save();                                  // writes the text to path() atomically
  QString path() const { return path_; }
  QString text() const { return text_; }
  QStringList overrides() const { return overrides_; }
  bool modified() const { return text_ != saved_text_; }
  const std::optional<ScenarioSpec>& scenario() const { return scenario_; }
  // A scenario of several jobs (`jobs:`), placements packed; scenario() is then empty.
  const std::optional<JobsScenario>& jobs() const { return jobs_; }
  // Errors and warnings of the last check, as the loaders report them (file:line:col).
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

  // ---- plans
  // Searches on a worker thread. every_field: as if the scenario said `plan: auto`.
  void search(bool every_field, int top);
  // Cancelling frees the GUI at once and asks the optimizer to stop; the worker ends after the exact
  // evaluation it is in.
  void cancel_search();
  bool searching() const { return searching_; }
  qint64 search_elapsed_ms() const { return search_clock_.isValid() ? search_clock_.elapsed() : 0; }
  // How far the running search has come, 0..1 (see SearchProgress::fraction; 0 until N plans are known).
  double search_fraction() const { return search_state_ ? search_state_->permille / 1000.0 : 0; }
  const std::vector<Candidate>& candidates() const { return candidates_; }
  const SearchSummary& search_summary() const { return summary_; }
  void select(int index);  // lowers and evaluates it: report and predicted timeline
  int selected() const { return selected_; }
  const Candidate* selected_candidate() const;
  std::shared_ptr<const Trace> predicted_trace() const { return predicted_; }

  // ---- simulation of the selected candidate (a child process)
  void simulate(const SimulationRequest& request);
  void cancel_simulation();
  bool simulating() const { return simulation_.running(); }
  const nlohmann::json& simulation_report() const { return simulation_report_; }
  std::shared_ptr<const Trace> simulated_trace() const { return simulated_; }
  const std::optional<ReliabilityHistory>& reliability() const { return reliability_; }
  QString simulated_plan() const { return simulated_plan_; }  // plan_summary of what was simulated

  // ---- a third timeline under the predicted and simulated ones: a live run's, or a trace file
  void set_measured_trace(std::shared_ptr<const Trace> trace);
  std::shared_ptr<const Trace> measured_trace() const { return measured_; }

  // The scenario as a file for child processes: path() itself, or a hidden copy of the edited text
  // beside it (so that relative references still resolve) while the text is not saved.
  QString scenario_file_for_children();

 signals:
  void checked();  // scenario(), diagnostics() changed
  void search_started();
  void search_finished();  // candidates() changed (also after a fixed plan is evaluated)
  void search_failed(const QString& message);
  void selection_changed();
  void simulation_started(const QString& command);
  void simulation_output(const QString& line);
  void simulation_finished();
  void simulation_failed(const QString& message);
  void measured_changed();

 private:
  void check();
  // The text with the overrides and then `extra`, loaded and checked (throws InputError).
  ScenarioSpec load_text(const QStringList& extra) const;
  void set_candidates(std::vector<Candidate> candidates, SearchSummary summary);
  void on_simulation_finished(bool ok);

  QString path_, text_, saved_text_;
  QStringList overrides_;
  std::optional<ScenarioSpec> scenario_;
  std::optional<JobsScenario> jobs_;
  std::vector<Diagnostic> diagnostics_;
  std::optional<ScenarioSpec> planned_scenario_;  // the scenario the candidates were planned for

  struct SearchOutcome;
  QFutureWatcher<std::shared_ptr<SearchOutcome>>* watcher_ = nullptr;
  // Shared with the searching thread: its progress, and the request to stop.
  struct SearchState {
    std::atomic<int> permille{0};
    std::atomic<bool> stop{false};
  };
  std::shared_ptr<SearchState> search_state_;
  bool searching_ = false;
  QElapsedTimer search_clock_;
  std::vector<Candidate> candidates_;
  SearchSummary summary_;
  int selected_ = -1;
  std::shared_ptr<const Trace> predicted_;

  ParatwinProcess simulation_;
  std::unique_ptr<QTemporaryDir> simulation_dir_;
  std::unique_ptr<QTemporaryFile> edited_copy_;
  bool simulation_has_horizon_ = false;
  QString simulating_plan_, simulated_plan_;
  nlohmann::json simulation_report_;
  std::shared_ptr<const Trace> simulated_;
  std::optional<ReliabilityHistory> reliability_;
  std::shared_ptr<const Trace> measured_;
};

}  // namespace paratwin::gui
