// A `paratwin` subcommand run as a child process: arguments as a list (never through a shell), its
// output read line by line as it comes, and stopped as a whole process group (`paratwin run` starts
// mpirun, which starts the ranks). Simulations run this way too: SimGrid allows one engine per
// process, and the GUI's event loop never waits on them.
#pragma once

#include <QObject>
#include <QProcess>
#include <QString>
#include <QStringList>

namespace paratwin::gui {

// The `paratwin` binary: $PARATWIN_BIN when set, else beside the running program (build/bin/).
QString paratwin_executable();

class ParatwinProcess : public QObject {
  Q_OBJECT

 public:
  explicit ParatwinProcess(QObject* parent = nullptr);
  ~ParatwinProcess() override;  // stops a running child

  void start(const QStringList& arguments);
  // SIGTERM to the child's process group, SIGKILL two seconds later if it is still there.
  void stop();
  bool running() const;
  bool stopped() const { return stopped_; }   // by stop(), not by itself
  QString command_line() const;               // for messages: "paratwin simulate ..."
  QString errors() const { return errors_; }  // what it wrote to standard error

 signals:
  void line(const QString& text);         // each line of standard output and standard error
  void finished(int exit_code, bool ok);  // ok: exit status 0 and not stopped

 private:
  void read(QProcess::ProcessChannel channel);

  QProcess process_;
  QStringList arguments_;
  QByteArray partial_[2];
  QString errors_;
  bool stopped_ = false;
};

}  // namespace paratwin::gui
