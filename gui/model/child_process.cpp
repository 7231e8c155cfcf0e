// Child processes in their own process group.
#include "gui/model/child_process.hpp"

#include <signal.h>
#include <unistd.h>

#include <QCoreApplication>
#include <QFileInfo>
#include <QTimer>

namespace paratwin::gui {

QString paratwin_executable() {
  const QString env = qEnvironmentVariable("PARATWIN_BIN");
  if (!env.isEmpty()) return env;
  return QCoreApplication::applicationDirPath() + "/paratwin";
}

ParatwinProcess::ParatwinProcess(QObject* parent) : QObject(parent) {
  // Its own session, so that stop() reaches mpirun and the ranks as well.
  process_.setChildProcessModifier([] { ::setsid(); });
  connect(&process_, &QProcess::readyReadStandardOutput, this, [this] { read(QProcess::StandardOutput); });
  connect(&process_, &QProcess::readyReadStandardError, this, [this] { read(QProcess::StandardError); });
  connect(&process_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus status) {
    read(QProcess::StandardOutput);
    read(QProcess::StandardError);
    for (int c = 0; c < 2; ++c)
      if (!partial_[c].isEmpty()) {
        const QString rest = QString::fromUtf8(partial_[c]);
        partial_[c].clear();
        if (c == 1) errors_ += rest;
        emit line(rest);
      }
    emit finished(code, status == QProcess::NormalExit && code == 0 && !stopped_);
  });
  connect(&process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError error) {
    if (error != QProcess::FailedToStart) return;
    errors_ += "cannot start " + process_.program() + ": " + process_.errorString();
    emit finished(-1, false);
  });
}

ParatwinProcess::~ParatwinProcess() {
  if (running()) {
    ::kill(-pid_t(process_.processId()), SIGKILL);
    process_.waitForFinished(2000);
  }
}

void ParatwinProcess::start(const QStringList& arguments) {
  arguments_ = arguments;
  errors_.clear();
  partial_[0].clear();
  partial_[1].clear();
  stopped_ = false;
  process_.start(paratwin_executable(), arguments);
}

void ParatwinProcess::stop() {
  if (!running()) return;
  stopped_ = true;
  const pid_t group = pid_t(process_.processId());
  ::kill(-group, SIGTERM);
  QTimer::singleShot(2000, this, [this, group] {
    if (running() && pid_t(process_.processId()) == group) ::kill(-group, SIGKILL);
  });
}

bool ParatwinProcess::running() const {
  return process_.state() != QProcess::NotRunning;
}

QString ParatwinProcess::command_line() const {
  return QFileInfo(paratwin_executable()).fileName() + " " + arguments_.join(' ');
}

void ParatwinProcess::read(QProcess::ProcessChannel channel) {
  const int c = channel == QProcess::StandardOutput ? 0 : 1;
  process_.setReadChannel(channel);
  partial_[c] += process_.readAll();
  for (qsizetype nl; (nl = partial_[c].indexOf('\n')) >= 0;) {
    const QString text = QString::fromUtf8(partial_[c].left(nl));
    partial_[c].remove(0, nl + 1);
    if (c == 1) errors_ += text + "\n";
    emit line(text);
  }
}

}  // namespace paratwin::gui
