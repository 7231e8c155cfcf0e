// The session: scenario checking, plan candidates, selection and simulation.
#include "gui/model/session.hpp"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QtConcurrent/QtConcurrentRun>

#include "gui/model/candidate_table.hpp"
#include "plan/analytic/evaluate.hpp"
#include "plan/io/atomic_file.hpp"
#include "plan/ir/program.hpp"
#include "plan/report/goodput_report.hpp"
#include "plan/report/routing_cost.hpp"
#include "plan/search/choose.hpp"
#include "plan/topology/job_placement.hpp"

namespace paratwin::gui {
namespace {

struct Evaluated {
  Candidate candidate;
  std::shared_ptr<const Trace> trace;
};

Evaluated evaluate_plan(const ScenarioSpec& s, const Plan& plan, bool with_trace) {
  const Program program = lower(plan, s.model, s.cluster, s.training);
  const Evaluation evaluation = evaluate(program, s.cluster, s.training);
  Evaluated e{{plan, make_report(s.name, program, evaluation), 0}, {}};
  add_routing_cost(e.candidate.report, s);
  add_expected_goodput(e.candidate.report, s, program);
  e.candidate.objective = objective_value(s, plan, e.candidate.report);
  if (with_trace) e.trace = std::make_shared<Trace>(trace_of(program, evaluation, plan_summary(plan)));
  return e;
}

QString qs(const std::string& s) {
  return QString::fromStdString(s);
}

}  // namespace

struct Session::SearchOutcome {
  ScenarioSpec scenario;
  std::optional<SearchResult> result;
  std::vector<Diagnostic> errors;
  QString failure;
};

Session::Session(QObject* parent) : QObject(parent) {
  connect(&simulation_, &ParatwinProcess::line, this, &Session::simulation_output);
  connect(&simulation_, &ParatwinProcess::finished, this,
          [this](int, bool ok) { on_simulation_finished(ok); });
}

Session::~Session() = default;

bool Session::open(const QString& path) {
  QFile file(path);
  path_ = path;
  if (!file.open(QIODevice::ReadOnly)) {
    text_ = saved_text_ = QString();
    scenario_.reset();
    diagnostics_ = {{Severity::Error, Location{path.toStdString()},
                     "cannot read the file: " + file.errorString().toStdString()}};
    emit checked();
    return false;
  }
  saved_text_ = QString::fromUtf8(file.readAll());
  text_ = saved_text_;
  overrides_.clear();  // they were for the scenario before
  planned_scenario_.reset();
  // What was simulated or measured belongs to the scenario before.
  cancel_simulation();
  simulation_report_ = nlohmann::json();
  simulated_.reset();
  reliability_.reset();
  simulated_plan_.clear();
  set_measured_trace(nullptr);
  set_candidates({}, {});
  check();
  return true;
}

void Session::set_text(const QString& text) {
  if (text == text_) return;
  text_ = text;
  check();
}

void Session::set_overrides(const QStringList& sets) {
  if (sets == overrides_) return;
  overrides_ = sets;
  check();
}

bool Session::save() {
  try {
    write_file_atomically(path_.toStdString(), text_.toStdString());
  } catch (const std::exception& e) {
    diagnostics_.push_back({Severity::Error, Location{path_.toStdString()}, e.what()});
    emit checked();
    return false;
  }
  saved_text_ = text_;
  emit checked();
  return true;
}

ScenarioSpec Session::load_text(const QStringList& extra) const {
  std::vector<Override> overrides;
  for (const QString& s : overrides_ + extra) overrides.push_back(parse_override(s.toStdString()));
  return load_scenario(parse_yaml(text_.toStdString(), path_.toStdString()), overrides);
}

void Session::check() {
  diagnostics_.clear();
  scenario_.reset();
  jobs_.reset();
  try {  // several jobs: placed, for the topology view; the one-job views stay empty
    DocNode document = parse_yaml(text_.toStdString(), path_.toStdString());
    if (holds_jobs(document)) {
      std::vector<Override> overrides;
      for (const QString& s : overrides_) overrides.push_back(parse_override(s.toStdString()));
      JobsScenario jobs = load_jobs_scenario(std::move(document), overrides);
      place_jobs(jobs);
      diagnostics_ = jobs.warnings;
      jobs_ = std::move(jobs);
      emit checked();
      return;
    }
  } catch (const InputError& e) {
    diagnostics_ = e.diagnostics();
    emit checked();
    return;
  }
  try {
    ScenarioSpec spec = load_text({});
    diagnostics_ = spec.warnings;
    scenario_ = std::move(spec);
  } catch (const InputError& e) {
    diagnostics_ = e.diagnostics();
  }
  // A scenario that fixes its plan has that plan as its one candidate, evaluated at once; candidates
  // of another scenario are dropped (those of a text being typed stay until it checks again).
  if (scenario_ && !scenario_->plan.fully_fixed() && !searching_ && planned_scenario_) {
    planned_scenario_.reset();
    set_candidates({}, {"plan: auto — search to find plans", {}, {}, {}});
  }
  if (scenario_ && scenario_->plan.fully_fixed() && !searching_) {
    try {
      const Plan plan = choose_plan(*scenario_, "", {}).plan;
      planned_scenario_ = scenario_;
      set_candidates({evaluate_plan(*scenario_, plan, false).candidate},
                     {"the scenario's fixed plan (search to compare it with others)",
                      {},
                      {},
                      qs(objective_unit(scenario_->search.objective))});
    } catch (const InputError& e) {
      diagnostics_.insert(diagnostics_.end(), e.diagnostics().begin(), e.diagnostics().end());
    }
  }
  emit checked();
}

void Session::search(bool every_field, int top) {
  if (!scenario_) {
    emit search_failed("the scenario has errors; fix them first");
    return;
  }
  ScenarioSpec scenario = *scenario_;
  if (every_field) {
    try {
      scenario = load_text({"plan=auto"});
    } catch (const InputError& e) {
      emit search_failed(qs(e.diagnostics().front().str()));
      return;
    }
  }
  cancel_search();
  searching_ = true;
  search_clock_.start();
  watcher_ = new QFutureWatcher<std::shared_ptr<SearchOutcome>>(this);
  connect(watcher_, &QFutureWatcherBase::finished, this, [this, watcher = watcher_] {
    const std::shared_ptr<SearchOutcome> out = watcher->result();
    watcher->deleteLater();
    watcher_ = nullptr;
    searching_ = false;
    if (!out->result) {
      emit search_failed(out->failure);
      return;
    }
    const SearchResult& r = *out->result;
    planned_scenario_ = out->scenario;
    set_candidates(r.top,
                   {QString("search: %L1 candidates, %L2 evaluated exactly, %3 s; objective %4")
                        .arg(r.enumerated)
                        .arg(r.evaluated)
                        .arg(r.seconds, 0, 'f', 2)
                        .arg(qs(enum_name(out->scenario.search.objective, kObjectiveNames))),
                    qs(r.explanation + (r.failures_explanation.empty()
                                            ? std::string()
                                            : "\nA faster plan lost to failures: " + r.failures_explanation)),
                    r.rejected, qs(objective_unit(out->scenario.search.objective))});
  });
  search_state_ = std::make_shared<SearchState>();
  watcher_->setFuture(QtConcurrent::run([scenario = std::move(scenario), top, state = search_state_] {
    auto out = std::make_shared<SearchOutcome>();
    out->scenario = scenario;
    try {
      SearchOptions options;
      options.top = top;
      options.progress = [state](const SearchProgress& p) {
        state->permille = static_cast<int>(1000 * p.fraction());
        return !state->stop;
      };
      out->result = search_plans(scenario, options);
    } catch (const InputError& e) {
      QStringList lines;
      for (const Diagnostic& d : e.diagnostics()) lines << qs(d.str());
      out->failure = lines.join('\n');
    } catch (const std::exception& e) {
      out->failure = QString("the search failed: ") + e.what();
    }
    return out;
  }));
  emit search_started();
}

void Session::cancel_search() {
  if (!watcher_) return;
  search_state_->stop = true;
  watcher_->disconnect(this);
  watcher_->deleteLater();  // the worker finishes on its own; its result is dropped
  watcher_ = nullptr;
  searching_ = false;
  emit search_failed("search cancelled");
}

void Session::set_candidates(std::vector<Candidate> candidates, SearchSummary summary) {
  candidates_ = std::move(candidates);
  summary_ = std::move(summary);
  selected_ = -1;
  predicted_.reset();
  emit search_finished();
  if (!candidates_.empty())
    select(0);
  else
    emit selection_changed();
}

void Session::select(int index) {
  if (index < 0 || index >= int(candidates_.size()) || !planned_scenario_) return;
  selected_ = index;
  Evaluated e = evaluate_plan(*planned_scenario_, candidates_[size_t(index)].plan, true);
  predicted_ = e.trace;
  // The search's reports leave out what unbalanced expert routing costs; the inspected plan says it.
  candidates_[size_t(index)].report.routing = e.candidate.report.routing;
  emit selection_changed();
}

const Candidate* Session::selected_candidate() const {
  return selected_ >= 0 && selected_ < int(candidates_.size()) ? &candidates_[size_t(selected_)] : nullptr;
}

QString Session::scenario_file_for_children() {
  if (!modified()) return path_;
  const QString pattern = "/.paratwin-gui-XXXXXX.yaml";
  edited_copy_ = std::make_unique<QTemporaryFile>(QFileInfo(path_).absolutePath() + pattern);
  if (!edited_copy_->open()) edited_copy_ = std::make_unique<QTemporaryFile>(QDir::tempPath() + pattern);
  if (!edited_copy_->isOpen() && !edited_copy_->open()) return path_;
  edited_copy_->write(text_.toUtf8());
  edited_copy_->flush();
  return edited_copy_->fileName();
}

void Session::simulate(const SimulationRequest& request) {
  const Candidate* chosen = selected_candidate();
  if (!chosen) {
    emit simulation_failed("choose a plan first");
    return;
  }
  cancel_simulation();
  simulation_dir_ = std::make_unique<QTemporaryDir>();
  const QString plan_file = simulation_dir_->filePath("plan.yaml");
  write_file_atomically(plan_file.toStdString(), to_yaml(chosen->plan));
  QStringList args{"simulate", scenario_file_for_children()};
  for (const QString& s : overrides_ + request.sets) args << "--set" << s;
  args << "--plan" << plan_file << "--json" << simulation_dir_->filePath("report.json") << "--trace"
       << simulation_dir_->filePath("trace.json") << "--seed" << QString::number(request.seed)
       << "--iterations" << QString::number(request.iterations);
  if (!request.horizon.isEmpty()) args << "--horizon" << request.horizon;
  // Every rank on small clusters, so that each GPU's link is simulated (folding gives the same times).
  if (chosen->plan.gpus() <= 512) args << "--all-ranks";
  simulation_has_horizon_ = !request.horizon.isEmpty();
  simulating_plan_ = plan_summary(chosen->plan);
  simulation_.start(args);
  emit simulation_started(simulation_.command_line());
}

void Session::cancel_simulation() {
  simulation_.stop();
}

void Session::on_simulation_finished(bool ok) {
  if (!ok) {
    emit simulation_failed(simulation_.stopped()
                               ? "simulation stopped"
                               : "the simulation failed:\n" + simulation_.errors().trimmed());
    return;
  }
  QFile file(simulation_dir_->filePath("report.json"));
  const QByteArray text = file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
  const nlohmann::json report = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (!report.is_object()) {
    emit simulation_failed("the simulation wrote no report");
    return;
  }
  try {
    auto trace = std::make_shared<Trace>(load_chrome_trace(simulation_dir_->filePath("trace.json")));
    trace->source = simulating_plan_;
    if (simulation_has_horizon_) reliability_ = reliability_history(report, *trace, "simulation");
    simulated_ = std::move(trace);
  } catch (const InputError& e) {
    emit simulation_failed(qs(e.diagnostics().front().str()));
    return;
  }
  simulation_report_ = report;
  simulated_plan_ = simulating_plan_;
  emit simulation_finished();
}

void Session::set_measured_trace(std::shared_ptr<const Trace> trace) {
  measured_ = std::move(trace);
  emit measured_changed();
}

}  // namespace paratwin::gui
