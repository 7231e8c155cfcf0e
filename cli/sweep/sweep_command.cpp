// The sweep coordinator: resume, distribute, save as points finish, write the outputs.
#include "cli/sweep/sweep_command.hpp"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/sweep/plotter.hpp"
#include "cli/sweep/progress.hpp"
#include "cli/sweep/worker_pool.hpp"
#include "plan/io/atomic_file.hpp"
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

// The results to continue from: those of --json FILE for this very sweep, without its failed points.
void resume_into(SweepResults& results, const std::string& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) {
    std::cerr << "sweep: " << file << " does not exist yet; starting from the first point\n";
    return;
  }
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json json = nlohmann::json::parse(text.str(), nullptr, false);
  if (json.is_discarded())
    throw InputError(Location{file},
                     "cannot resume: the file is not JSON (was it written by paratwin sweep --json?)");
  SweepResults before;
  try {
    before = results_from_json(json);
  } catch (const std::exception& e) {
    throw InputError(Location{file}, std::string("cannot resume: ") + e.what());
  }
  if (before.fingerprint != results.fingerprint || before.total != results.total)
    throw InputError(
        Location{file},
        "cannot resume: the file holds the results of another sweep (the scenario, --set, --grid or "
        "sweep.simulate differ); give another --json file or run without --resume");
  for (auto& p : before.points)
    if (p.status != PointStatus::Failed && p.index >= 0 && p.index < results.total)
      add_point(results, std::move(p));
}

bool writes_file(const std::string& path) {
  return !path.empty() && path != "-";
}

// Rewrites the JSON and CSV files; `sync` at the end only (a kill leaves them whole either way).
void save(const SweepResults& results, const SweepOptions& o, bool sync) {
  if (writes_file(o.json)) write_file_atomically(o.json, to_json(results).dump(2) + "\n", sync);
  if (writes_file(o.csv)) write_file_atomically(o.csv, to_csv(results), sync);
}

std::string axes_text(const LoadedSweep& sweep) {
  std::string out;
  for (const auto& axis : sweep.scenario.sweep.grid) out += (out.empty() ? "" : " x ") + axis.path;
  if (!sweep.scenario.sweep.list.empty())
    out = std::to_string(sweep.scenario.sweep.list.size()) + " listed" + (out.empty() ? "" : " x " + out);
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
  sweep.points = expand_sweep(sweep.scenario.sweep);
  return sweep;
}

std::vector<std::string> worker_command(const SweepOptions& o) {
  std::vector<std::string> argv = {sibling_executable("paratwin"), "sweep", o.scenario};
  for (const auto& s : o.sets) argv.insert(argv.end(), {"--set", s});
  for (const auto& g : o.grids) argv.insert(argv.end(), {"--grid", g});
  argv.push_back("--worker");
  return argv;
}

int run_sweep(const SweepOptions& o, const LoadedSweep& sweep, const std::vector<PointChannel*>& remote) {
  if (!o.png.empty() && !png_available())
    throw InputError(
        Location{"<--png " + o.png + ">"},
        "--png needs paratwin-plot, which is built when Qt 6 Gui is found; install qt6-base-dev and "
        "rebuild");
  SweepResults results = start_results(sweep.scenario, sweep.points);
  if (o.resume) {
    if (!writes_file(o.json))
      throw InputError(Location{"<--resume>"},
                       "--resume needs --json FILE, the results file of the sweep to continue");
    resume_into(results, o.json);
  }
  std::deque<int> pending;
  {
    size_t k = 0;
    for (const auto& point : sweep.points) {
      while (k < results.points.size() && results.points[k].index < point.index) ++k;
      if (k == results.points.size() || results.points[k].index != point.index)
        pending.push_back(point.index);
    }
  }

  int slots = 0;
  for (auto* r : remote) slots += r->slots();
  const int local_workers = std::min<int>(o.jobs, std::max<int>(1, int(pending.size())));
  std::cerr << "sweep " << sweep.scenario.name << ": " << sweep.points.size() << " points ("
            << axes_text(sweep) << ")"
            << (results.points.empty() ? "" : ", " + std::to_string(results.points.size()) + " done before")
            << ", " << (sweep.scenario.sweep.simulate ? "simulated" : "analytic") << ", on "
            << local_workers + slots << " worker" << (local_workers + slots == 1 ? "" : "s") << "\n";

  int failed = 0;
  bool interrupted = false;
  if (!pending.empty()) {
    InterruptGuard guard;
    WorkerPool local(worker_command(o), local_workers);
    std::vector<PointChannel*> channels = {&local};
    channels.insert(channels.end(), remote.begin(), remote.end());
    std::deque<std::pair<PointChannel*, int>> idle;
    for (auto* c : channels)
      for (int s = 0; s < c->slots(); ++s) idle.push_back({c, s});
    Progress progress(results.total, static_cast<int>(results.points.size()), ::isatty(STDERR_FILENO));
    // Results are saved as points finish, but saving takes at most a tenth of the time: fast points
    // (milliseconds each, analytic) are saved together, slow ones (searches, simulations) one by one.
    using Clock = std::chrono::steady_clock;
    Clock::time_point saved = Clock::now();
    Clock::duration save_cost{};
    bool unsaved = false;
    int busy = 0;
    while ((!pending.empty() || busy > 0) && !g_interrupted && !interrupted) {
      while (!idle.empty() && !pending.empty()) {
        idle.front().first->assign(idle.front().second, pending.front());
        idle.pop_front();
        pending.pop_front();
        ++busy;
      }
      for (auto* c : channels) {
        for (Finished& f : c->poll(channels.size() > 1 ? 2 : 200)) {
          if (f.interrupted) {
            interrupted = true;
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
          failed += point.status == PointStatus::Failed;
          progress.point_finished(point);
          add_point(results, std::move(point));
          unsaved = true;
        }
      }
      // Checked after every wait, so a point is saved soon even when no other follows it for long.
      if (unsaved && Clock::now() - saved >= 9 * save_cost) {
        const Clock::time_point start = Clock::now();
        save(results, o, false);
        saved = Clock::now();
        save_cost = saved - start;
        unsaved = false;
      }
    }
    progress.close();
    if (g_interrupted || interrupted) {
      save(results, o, true);
      std::cerr << "sweep: interrupted; " << results.points.size() << " of " << results.total << " points"
                << (writes_file(o.json) ? " saved in " + o.json + "; continue with --resume"
                                        : " (none saved: no --json FILE)")
                << "\n";
      return 130;
    }
    for (auto* c : channels) c->finish();
  }

  save(results, o, true);
  if (o.json == "-")
    std::cout << to_json(results).dump(2) << "\n";
  else
    std::cout << to_text(results);
  if (!o.png.empty()) write_sweep_png(results, o.png);
  if (failed > 0) {
    std::cerr << "sweep: " << failed << " point" << (failed == 1 ? "" : "s")
              << " could not be evaluated (see above); --resume evaluates them again\n";
    return 1;
  }
  return 0;
}

}  // namespace paratwin::cli
