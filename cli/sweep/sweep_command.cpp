// The sweep coordinator: resume, distribute, save as points finish, write the outputs.
#include "cli/sweep/sweep_command.hpp"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>

#include "cli/sweep/plotter.hpp"
#include "cli/sweep/progress.hpp"
#include "cli/sweep/worker_pool.hpp"
#include "plan/io/atomic_file.hpp"
#include "plan/sweep/journal.hpp"
#include "plan/sweep/ranking.hpp"
#include "plan/sweep/results.hpp"
#include "plan/util/child_process.hpp"

namespace paratwin::cli {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;

void on_interrupt(int) {
  g_interrupted = 1;
}

// Catches SIGINT and SIGTERM while alive, so that an interrupted sweep says where its results are.
class InterruptGuard {
 public:
  InterruptGuard() {
    g_interrupted = 0;
    struct sigaction a {};
    a.sa_handler = on_interrupt;
    sigemptyset(&a.sa_mask);
    ::sigaction(SIGINT, &a, &int_);
    ::sigaction(SIGTERM, &a, &term_);
  }
  ~InterruptGuard() {
    ::sigaction(SIGINT, &int_, nullptr);
    ::sigaction(SIGTERM, &term_, nullptr);
  }

 private:
  struct sigaction int_ {
  }, term_{};
};

bool writes_file(const std::string& path) {
  return !path.empty() && path != "-";
}

// Where the journal goes: beside --json FILE, so that --resume finds it; else a temporary file.
std::string journal_path(const SweepOptions& o) {
  if (writes_file(o.json)) return o.json + ".partial";
  std::string tmp = (std::filesystem::temp_directory_path() / "paratwin-sweep-XXXXXX").string();
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) throw std::runtime_error("cannot create a temporary file for the sweep's results");
  ::close(fd);
  return tmp;
}

// Rewrites the JSON and CSV files from the journal; `sync` at the end only (a kill leaves them whole
// either way).
void save(const SweepHeader& header, const SweepJournal& journal, const SweepOptions& o, bool sync) {
  if (writes_file(o.json)) {
    AtomicFileWriter out(o.json);
    write_json(out.stream(), header, journal.points());
    out.commit(sync);
  }
  if (writes_file(o.csv)) {
    AtomicFileWriter out(o.csv);
    write_csv(out.stream(), header, journal.points());
    out.commit(sync);
  }
}

// The points still to evaluate, in index order, made as they are asked for: those the journal does not
// hold, or holds as failed.
class PendingPoints {
 public:
  PendingPoints(JournalReader done, int total) : done_(std::move(done)), total_(total) {
    finished_ = done_.next();
    advance();
  }
  std::optional<int> peek() const { return next_ < total_ ? std::optional<int>(next_) : std::nullopt; }
  void pop() {
    ++next_;
    advance();
  }

 private:
  void advance() {
    for (; next_ < total_; ++next_) {
      while (finished_ && finished_->index < next_) finished_ = done_.next();
      if (!finished_ || finished_->index != next_ || finished_->status == PointStatus::Failed) return;
    }
  }
  JournalReader done_;
  std::optional<PointResult> finished_;
  int total_, next_ = 0;
};

// Results that arrive in any order go to the journal in the order the points were handed out. Points
// are handed out no further than `window` ahead of the oldest unfinished one, so what waits here stays
// small whatever the size of the sweep.
class InOrder {
 public:
  explicit InOrder(std::size_t window) : window_(window) {}
  bool has_room() const { return handed_.size() < window_; }
  void handed_out(int index) { handed_.push_back(index); }
  void finished(PointResult point, SweepJournal& journal) {
    waiting_.emplace(point.index, std::move(point));
    while (!handed_.empty()) {
      const auto it = waiting_.find(handed_.front());
      if (it == waiting_.end()) break;
      journal.append(it->second);
      waiting_.erase(it);
      handed_.pop_front();
    }
  }

 private:
  std::size_t window_;
  std::deque<int> handed_;
  std::map<int, PointResult> waiting_;
};

std::string axes_text(const LoadedSweep& sweep) {
  std::string out;
  for (const auto& axis : sweep.scenario.sweep.grid) out += (out.empty() ? "" : " x ") + axis.path;
  if (!sweep.scenario.sweep.list.empty())
    out = std::to_string(sweep.scenario.sweep.list.size()) + " listed" + (out.empty() ? "" : " x " + out);
  return out;
}

struct Evaluated {
  int failed = 0;
  bool interrupted = false;  // a worker was stopped by a signal (Ctrl-C reaches them too)
};

// Hands the pending points to the channels' slots, one at a time, journals their results in order and
// saves the outputs now and then, until every point is done or the sweep is interrupted.
Evaluated evaluate_pending(PendingPoints& pending, const std::vector<PointChannel*>& channels,
                           const LoadedSweep& sweep, const SweepHeader& header, int done_before,
                           SweepJournal& journal, const SweepOptions& o) {
  std::deque<std::pair<PointChannel*, int>> idle;
  for (auto* c : channels)
    for (int s = 0; s < c->slots(); ++s) idle.push_back({c, s});
  InOrder in_order(std::max<std::size_t>(256, 16 * idle.size()));
  Progress progress(header.total, done_before, ::isatty(STDERR_FILENO));
  // Results are saved as points finish, but saving takes at most a tenth of the time: fast points
  // (milliseconds each, analytic) are saved together, slow ones (searches, simulations) one by one.
  using Clock = std::chrono::steady_clock;
  Clock::time_point saved = Clock::now();
  Clock::duration save_cost{};
  bool unsaved = false;
  int busy = 0;
  Evaluated out;
  while ((pending.peek() || busy > 0) && !g_interrupted && !out.interrupted) {
    while (!idle.empty() && pending.peek() && in_order.has_room()) {
      idle.front().first->assign(idle.front().second, *pending.peek());
      in_order.handed_out(*pending.peek());
      idle.pop_front();
      pending.pop();
      ++busy;
    }
    for (auto* c : channels) {
      for (Finished& f : c->poll(channels.size() > 1 ? 2 : 200)) {
        if (f.interrupted) {
          out.interrupted = true;
          break;
        }
        --busy;
        idle.push_back({c, f.slot});
        PointResult point;
        try {
          point = f.result.empty() ? failed_point(sweep.points.at(f.index), f.failure)
                                   : point_from_json(nlohmann::json::parse(f.result));
        } catch (const std::exception& e) {
          point = failed_point(sweep.points.at(f.index),
                               std::string("unreadable result from the worker: ") + e.what());
        }
        out.failed += point.status == PointStatus::Failed;
        progress.point_finished(point);
        in_order.finished(std::move(point), journal);
        unsaved = true;
      }
    }
    // Checked after every wait, so a point is saved soon even when no other follows it for long.
    if (unsaved && Clock::now() - saved >= 9 * save_cost) {
      const Clock::time_point start = Clock::now();
      save(header, journal, o, false);
      saved = Clock::now();
      save_cost = saved - start;
      unsaved = false;
    }
  }
  progress.close();
  return out;
}

}  // namespace

void add_sweep_options(CLI::App& cmd, SweepOptions& o) {
  cmd.add_option("scenario", o.scenario, "scenario file with a sweep: section (or give --grid)")->required();
  cmd.add_option("--set", o.sets, "override a scenario field, e.g. --set plan.tp=8")->type_name("KEY=VALUE");
  cmd.add_option("--grid", o.grids, "add a grid axis, e.g. --grid cluster.gpus=64,128,256")
      ->type_name("PATH=V1,V2,...");
  cmd.add_option("--jobs", o.jobs, "evaluate this many points at once, each in its own process")
      ->check(CLI::Range(1, 1024));
  cmd.add_option("--json", o.json,
                 "write the results as JSON (- for standard output); kept up to date as points finish")
      ->type_name("FILE|-");
  cmd.add_option("--csv", o.csv, "write one row per point as CSV; kept up to date as points finish")
      ->type_name("FILE");
  cmd.add_option("--png", o.png, "plot time to train and cost against GPU count")->type_name("FILE");
  cmd.add_flag("--resume", o.resume, "continue the sweep whose results are in --json FILE");
  cmd.add_option("--iterations", o.iterations,
                 "with sweep.simulate: iterations simulated per point; with several (or the scenario's "
                 "variability), each point's P95 iteration time is reported")
      ->check(CLI::Range(1, 10000));
  cmd.add_option("--rank-by", o.rank_by,
                 "after the table, rank the points by p95 (simulated P95 iteration time), iteration_time, "
                 "time_to_train or cost, best first")
      ->check(CLI::IsMember(rank_keys()));
  cmd.add_flag("--worker", o.worker, "")->group("");  // internal: started by the coordinator
}

LoadedSweep load_sweep(const SweepOptions& o) {
  std::vector<Override> overrides;
  for (const auto& s : o.sets) overrides.push_back(parse_override(s));
  LoadedSweep sweep{load_scenario(o.scenario, overrides), {}};
  std::vector<SweepAxis> axes;
  for (const auto& g : o.grids) axes.push_back(parse_grid_argument(g));
  add_grid_axes(sweep.scenario, axes);
  if (sweep.scenario.sweep.empty())
    throw InputError(Location{o.scenario},
                     "nothing to sweep: add a sweep: section (grid or list) to the scenario, "
                     "or give --grid PATH=V1,V2,... such as --grid cluster.nodes=16,32,64");
  sweep.points = SweepPoints(sweep.scenario.sweep);
  // Every point copies the scenario's document: without its sweep, which may hold millions of values.
  std::erase_if(sweep.scenario.document.entries, [](const DocEntry& e) { return e.key == "sweep"; });
  return sweep;
}

std::vector<std::string> worker_command(const SweepOptions& o) {
  std::vector<std::string> argv = {sibling_executable("paratwin"), "sweep", o.scenario};
  for (const auto& s : o.sets) argv.insert(argv.end(), {"--set", s});
  for (const auto& g : o.grids) argv.insert(argv.end(), {"--grid", g});
  if (o.iterations != 1) argv.insert(argv.end(), {"--iterations", std::to_string(o.iterations)});
  argv.push_back("--worker");
  return argv;
}

int run_sweep(const SweepOptions& o, const LoadedSweep& sweep, const std::vector<PointChannel*>& remote) {
  if (!o.png.empty() && !png_available())
    throw InputError(
        Location{"<--png " + o.png + ">"},
        "--png needs paratwin-plot, which is built when Qt 6 Gui is found; install qt6-base-dev and "
        "rebuild");
  if (o.rank_by == "p95" && !sweep.scenario.sweep.simulate)
    throw InputError(Location{"<--rank-by p95>"},
                     "ranking by P95 needs simulated points: set sweep.simulate: true (with --iterations N "
                     "or the scenario's variability)");
  if (o.resume && !writes_file(o.json))
    throw InputError(Location{"<--resume>"},
                     "--resume needs --json FILE, the results file of the sweep to continue");
  const SweepHeader header = sweep_header(sweep.scenario);
  const std::string journal_file = journal_path(o);
  std::error_code ec;
  if (o.resume && !std::filesystem::exists(journal_file, ec) && !std::filesystem::exists(o.json, ec))
    std::cerr << "sweep: " << o.json << " does not exist yet; starting from the first point\n";
  SweepJournal journal = o.resume ? SweepJournal::resume(journal_file, header, o.json)
                                  : SweepJournal::create(journal_file, header);
  int done_before = 0;
  {
    JournalReader before = journal.reader();
    while (auto p = before.next()) done_before += p->status != PointStatus::Failed;
  }
  PendingPoints pending(journal.reader(), header.total);
  journal.start_run();

  int slots = 0;
  for (auto* r : remote) slots += r->slots();
  const int to_do = header.total - done_before;
  const int local_workers = std::min<int>(o.jobs, std::max<int>(1, to_do));
  std::cerr << "sweep " << sweep.scenario.name << ": " << header.total << " points (" << axes_text(sweep)
            << ")" << (done_before > 0 ? ", " + std::to_string(done_before) + " done before" : "") << ", "
            << (sweep.scenario.sweep.simulate ? "simulated" : "analytic") << ", on " << local_workers + slots
            << " worker" << (local_workers + slots == 1 ? "" : "s") << "\n";

  int failed = 0;
  bool interrupted = false;
  if (pending.peek()) {
    InterruptGuard guard;
    WorkerPool local(worker_command(o), local_workers);
    std::vector<PointChannel*> channels = {&local};
    channels.insert(channels.end(), remote.begin(), remote.end());
    const Evaluated e = evaluate_pending(pending, channels, sweep, header, done_before, journal, o);
    failed = e.failed;
    interrupted = e.interrupted;
    if (g_interrupted || interrupted) {
      save(header, journal, o, true);
      std::cerr << "sweep: interrupted"
                << (writes_file(o.json) ? "; the finished points are saved in " + o.json + " and " +
                                              journal.path() + "; continue with --resume"
                                        : " (nothing saved: no --json FILE)")
                << "\n";
      if (!writes_file(o.json)) std::filesystem::remove(journal.path(), ec);
      return 130;
    }
    for (auto* c : channels) c->finish();
  }

  save(header, journal, o, true);
  if (o.json == "-") {
    write_json(std::cout, header, journal.points());
  } else {
    write_text(std::cout, header, journal.points());
    if (!o.rank_by.empty()) write_ranking(std::cout, o.rank_by, journal.points());
  }
  std::cout << std::flush;
  if (!o.png.empty()) {
    // paratwin-plot reads the JSON file; without one, a temporary one.
    std::string json = o.json;
    if (!writes_file(json)) {
      json = journal.path() + ".json";
      AtomicFileWriter out(json);
      write_json(out.stream(), header, journal.points());
      out.commit(false);
    }
    write_sweep_png(json, o.png);
    if (json != o.json) std::filesystem::remove(json, ec);
  }
  std::filesystem::remove(journal.path(), ec);
  if (failed > 0) {
    std::cerr << "sweep: " << failed << " point" << (failed == 1 ? "" : "s")
              << " could not be evaluated (see above); --resume evaluates them again\n";
    return 1;
  }
  return 0;
}

}  // namespace paratwin::cli
