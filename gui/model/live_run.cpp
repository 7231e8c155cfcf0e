// Live runs.
#include "gui/model/live_run.hpp"

#include <QFile>
#include <QFileInfo>
#include <QRegularExpression>

#include "plan/spec/diagnostics.hpp"

namespace paratwin::gui {

std::optional<LiveStep> parse_live_step(const QString& line) {
  static const QRegularExpression re(
      R"(^step\s+(\d+)/(\d+)\s+loss\s+(\S+)\s+([\d.]+)\s+tok/s\s+([\d.]+)\s+ms/step)");
  const QRegularExpressionMatch m = re.match(line);
  if (!m.hasMatch()) return std::nullopt;
  LiveStep s;
  s.step = m.captured(1).toLongLong();
  s.steps = m.captured(2).toLongLong();
  s.loss = m.captured(3).toDouble();
  s.tokens_per_s = m.captured(4).toDouble();
  s.step_s = m.captured(5).toDouble() / 1e3;
  return s;
}

LiveComparison live_comparison(const nlohmann::json& report) {
  LiveComparison c;
  const nlohmann::json empty = nlohmann::json::object();
  const nlohmann::json& metrics = report.contains("metrics") ? report["metrics"] : empty;
  const nlohmann::json& predicted = report.contains("predicted") ? report["predicted"] : empty;
  c.measured_iteration_s = metrics.value("iteration_time_s", 0.0);
  c.measured_tokens_per_s = metrics.value("tokens_per_s", 0.0);
  c.predicted_iteration_s = predicted.value("iteration_time_s", 0.0);
  c.predicted_tokens_per_s = predicted.value("tokens_per_s", 0.0);
  const nlohmann::json& measured_b = report.contains("breakdown") ? report["breakdown"] : empty;
  const nlohmann::json& predicted_b = predicted.contains("breakdown") ? predicted["breakdown"] : empty;
  for (auto [key, label] : {std::pair{"compute_s", "compute"},
                            {"exposed_comm_s", "exposed comm."},
                            {"optimizer_s", "optimizer"},
                            {"bubble_s", "idle"}})
    c.breakdown.push_back({label, measured_b.value(key, 0.0), predicted_b.value(key, 0.0)});
  return c;
}

LiveRun::LiveRun(QObject* parent) : QObject(parent) {
  connect(&process_, &ParatwinProcess::line, this, [this](const QString& text) {
    log_.push_back(text);
    emit logged(text);
    if (auto step = parse_live_step(text)) {
      steps_.push_back(*step);
      emit stepped(*step);
    }
  });
  connect(&process_, &ParatwinProcess::finished, this, [this](int, bool ok) { on_finished(ok); });
}

void LiveRun::start(const LiveRunRequest& r) {
  stop();
  steps_.clear();
  log_.clear();
  comparison_.reset();
  trace_.reset();
  dir_ = std::make_unique<QTemporaryDir>();
  scenario_ = r.scenario;
  ranks_ = r.ranks;
  QStringList args{"run",       r.scenario,
                   "--backend", "cpu",
                   "--ranks",   QString::number(r.ranks),
                   "--steps",   QString::number(r.steps),
                   "--json",    dir_->filePath("report.json"),
                   "--trace",   dir_->filePath("trace.json")};
  for (const QString& s : r.sets) args << "--set" << s;
  process_.start(args);
}

void LiveRun::stop() {
  process_.stop();
}

void LiveRun::on_finished(bool ok) {
  if (!ok) {
    const QString why = process_.stopped() ? "stopped" : "failed: " + process_.errors().trimmed();
    emit finished(false, why.isEmpty() ? "failed" : why);
    return;
  }
  QFile file(dir_->filePath("report.json"));
  if (file.open(QIODevice::ReadOnly)) {
    const QByteArray text = file.readAll();
    const nlohmann::json report = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
    if (report.is_object()) comparison_ = live_comparison(report);
  }
  try {
    auto trace = std::make_shared<Trace>(load_chrome_trace(dir_->filePath("trace.json")));
    trace->source = QString("%1 on %2 CPU ranks, %3 steps")
                        .arg(QFileInfo(scenario_).fileName())
                        .arg(ranks_)
                        .arg(steps_.size());
    trace_ = std::move(trace);
  } catch (const InputError& e) {
    log_.push_back(QString::fromStdString(e.diagnostics().front().str()));
  }
  emit finished(true, QString("finished: %1 steps").arg(steps_.size()));
}

}  // namespace paratwin::gui
