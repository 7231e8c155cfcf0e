// Child processes, one way for every layer: started with posix_spawn (safe in an MPI process and in
// a threaded one), waited for across signals, or replaced into; and a forked copy of this process
// for work that needs a process of its own (SimGrid allows one engine per process).
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace paratwin {

// Where one of the child's standard streams goes.
enum class ChildStream {
  Inherit,          // shares this process's
  Pipe,             // a pipe to (input) or from (output) this process: ChildProcess::to / ::from
  Null,             // /dev/null
  ToStandardError,  // standard output only: onto this process's standard error
};

struct SpawnOptions {
  bool search_path = false;        // argv[0] is a command looked up on PATH, not a path
  bool own_process_group = false;  // the child leads a new process group (signal it and its children)
  ChildStream input = ChildStream::Inherit;   // Inherit, Pipe or Null
  ChildStream output = ChildStream::Inherit;  // any
  ChildStream errors = ChildStream::Inherit;  // Inherit or Null
};

struct ChildProcess {
  pid_t pid = -1;
  int to = -1;    // its standard input, with ChildStream::Pipe (else -1)
  int from = -1;  // its standard output, with ChildStream::Pipe (else -1)
};

// Starts argv (argv[0] the executable) in the environment of this process. Pipes are close-on-exec
// here, so no later child inherits them; with an input pipe a child that dies makes writes fail
// with EPIPE instead of ending this process (SIGPIPE is ignored). Throws std::runtime_error naming
// the executable and the system's reason when it cannot be started.
ChildProcess spawn_process(std::vector<std::string> argv, const SpawnOptions& options = {});

// Waits for the child to end (across EINTR) and returns its wait status.
int wait_for_process(pid_t pid);

// A wait status as a shell reports it: the exit code, or 128 + the signal that ended the process.
int exit_code_of(int wait_status);

// Replaces this process with argv (argv[0] a path). Returns only by throwing std::runtime_error
// with the system's reason and `hint` (how to get the executable), when it cannot.
[[noreturn]] void replace_process(std::vector<std::string> argv, const std::string& hint = "");

// The path of ParaTwin's executable `name` installed beside the running one (e.g. "paratwin-rank").
// Throws std::runtime_error when the running executable cannot be found.
std::string sibling_executable(const std::string& name);

// What a forked child reported: the text it produced and its wait status.
struct ForkedResult {
  std::string output;
  int status = -1;
};

// Runs `work` in a forked copy of this process. `work` returns the text to hand back and the exit
// code to end with (an exception ends the copy with status 1 and no text); the parent reads the
// whole text, then waits. Buffered output is flushed first
// so the copy writes nothing twice. Throws std::runtime_error when the pipe or the fork fails.
ForkedResult run_forked(const std::function<std::pair<std::string, int>()>& work);

}  // namespace paratwin
