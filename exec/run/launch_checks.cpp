// The checks before launch: data, resume, memory.
#include "exec/run/launch_checks.hpp"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include "exec/checkpoint/checkpoint.hpp"
#include "exec/data/token_file.hpp"
#include "plan/analytic/evaluate.hpp"
#include "plan/report/report.hpp"
#include "plan/report/trace.hpp"
#include "plan/spec/catalog.hpp"
#include "plan/spec/checked.hpp"

namespace paratwin::exec {

std::string live_data_path(const LiveRunOptions& o) {
  return o.data.empty() ? Catalog::installed().root() + "/data/tiny-corpus.txt" : o.data;
}

namespace {

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1 << 30));
  return buf;
}

double machine_memory_bytes() {
  return double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGE_SIZE));
}

}  // namespace

void check_before_launch(const LiveRunOptions& o, const LiveRunSetup& setup) {
  const ScenarioSpec& s = setup.scenario;
  const Plan& plan = setup.plan;
  std::vector<Diagnostic> problems;
  const std::string data = live_data_path(o);
  const Location data_at{o.data.empty() ? data : "<--data " + o.data + ">"};
  TokenSource tokens;
  try {
    tokens = inspect_tokens(data);
  } catch (const InputError& e) {
    for (const auto& d : e.diagnostics()) problems.push_back({Severity::Error, data_at, d.message});
  }
  if (problems.empty() && tokens.tokens < uint64_t(s.training.seq_len) + 1)
    problems.push_back({Severity::Error, data_at,
                        "the corpus holds " + std::to_string(tokens.tokens) + " tokens; a sequence of " +
                            std::to_string(s.training.seq_len) + " (training.seq_len) needs " +
                            std::to_string(s.training.seq_len + 1)});
  if (problems.empty() && tokens.largest >= s.model.vocab)
    problems.push_back({Severity::Error, data_at,
                        "the corpus holds token " + std::to_string(tokens.largest) +
                            ", outside the model's vocabulary of " + std::to_string(s.model.vocab) +
                            " (model.vocab)"});
  // The checkpoint directory, made now as rank 0 would make it: one it cannot make or write is refused
  // here rather than failing every launch.
  if (!o.checkpoint_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.checkpoint_dir, ec);
    if (ec || ::access(o.checkpoint_dir.c_str(), W_OK) != 0)
      problems.push_back({Severity::Error, Location{"<--checkpoint-dir " + o.checkpoint_dir + ">"},
                          "cannot " + std::string(ec ? "create" : "write to") +
                              " the checkpoint directory: " + (ec ? ec.message() : std::strerror(errno))});
  }
  if (o.resume && !o.checkpoint_dir.empty())
    if (const auto newest = peek_latest_checkpoint(o.checkpoint_dir);
        newest && (newest->model != s.model.name || newest->global_batch != s.training.global_batch))
      problems.push_back({Severity::Error, Location{"<--checkpoint-dir " + o.checkpoint_dir + ">"},
                          "the newest checkpoint is of model " + newest->model + " with global batch " +
                              std::to_string(newest->global_batch) + "; this run trains " + s.model.name +
                              " with global batch " + std::to_string(s.training.global_batch) +
                              "; give another --checkpoint-dir, or run without --resume"});
  // Memory: every rank of the job on this machine (or host), each with the twin's peak (device and host) and
  // its own copy of the corpus.
  const Program program = lower(plan, s.model, s.cluster, s.training, {.task_names = false});
  const Report predicted = make_report(s.name, program, evaluate(program, s.cluster, s.training));
  double needed = 0;
  for (const StageMemory& stage : predicted.stages)
    needed += (stage.peak.value() + stage.host.value()) * (plan.gpus() / plan.pp);
  needed += double(plan.gpus()) * double(tokens.tokens) * sizeof(uint16_t);
  // On several hosts, one host's share: its ranks (placed evenly) against its memory, this machine's.
  const int hosts = std::max(1, o.nodes);
  needed /= hosts;
  const double machine = machine_memory_bytes();
  if (needed > machine)
    problems.push_back(
        {Severity::Error, Location{o.scenario},
         (hosts > 1 ? "each host's " + std::to_string(plan.gpus() / hosts) + " ranks need about "
                    : "the job's " + std::to_string(plan.gpus()) + " ranks need about ") +
             gib(needed) + " by the twin's memory model (" + gib(needed * hosts / plan.gpus()) +
             " each, with its copy of the data), more than this machine's " + gib(machine) +
             "; run fewer ranks (--ranks), a smaller plan.micro_batch or training.seq_len, "
             "or save memory with plan.zero, plan.recompute or a smaller model"});
  // Its steps (the tokens a token budget makes), the tokens they read in a 64-bit count, and its trace.
  const double tokens_per_step = double(s.training.global_batch) * s.training.seq_len;
  const double budget_steps = s.training.tokens ? std::ceil(*s.training.tokens / tokens_per_step) : 0;
  const std::int64_t steps = o.steps > 0           ? o.steps
                             : s.training.steps    ? *s.training.steps
                             : budget_steps < 9e18 ? std::int64_t(budget_steps)
                                                   : std::numeric_limits<std::int64_t>::max();
  if (steps <= 0)
    problems.push_back(
        {Severity::Error, Location{o.scenario}, "the run has no steps: give training.steps or --steps"});
  else if (!checked_product({steps, s.training.global_batch, s.training.seq_len}))
    problems.push_back({Severity::Error,
                        Location{o.steps > 0 ? "<--steps " + std::to_string(o.steps) + ">" : o.scenario},
                        std::to_string(steps) + " steps of " + std::to_string(s.training.global_batch) +
                            " sequences of " + std::to_string(s.training.seq_len) +
                            " tokens are more tokens than a 64-bit count holds; run fewer steps"});
  if (!o.trace.empty())
    if (const std::string big =
            trace_size_problem(chrome_trace_events(program), std::int64_t(program.task_count()));
        !big.empty())
      problems.push_back({Severity::Error, Location{"<--trace " + o.trace + ">"}, big});
  if (!problems.empty()) throw InputError(std::move(problems));
}

}  // namespace paratwin::exec
