// The spread of step times, live against the twin: a 2-rank run's profile calibrates both the rates
// and the kernels' coefficients of variation (calibrate --variability), and the twin's P5-P95 over
// many simulated iterations (simulate --iterations) holds the run's own steps. Calibrate tells what a
// rank's kernels share in a step (this machine's load slows them together) from each kernel's own,
// and how much the two ranks' steps move together: drawn as independent kernels the twin's band was
// half as wide as the run's, drawn as independent ranks a quarter narrower. Compute is compared as
// CPU time, so what other processes take from this shared machine stays out of both sides; the
// twin's communication is taken off its band, since a shared machine's collectives vary with the
// scheduler (both ranks must hold a core at once), which is not kernel noise.
#define BOOST_TEST_MODULE exec_spread
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "paratwin_process.hpp"
#include "source_tree.hpp"

using nlohmann::json;
using namespace paratwin_test;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("paratwin-spread-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

const std::string kScenario = paratwin_test::source_dir() + "/scenarios/live-cpu-tiny.yaml";

json run_json(const std::string& args, const fs::path& out) {
  const Output o = run_paratwin(args + " --json " + out.string());
  BOOST_TEST_INFO(o.text);
  BOOST_TEST_REQUIRE(o.status == 0);
  return read_json(out);
}

// One live run, calibrated, against its twin's band of a step's computation.
struct Attempt {
  double p5 = 0, p95 = 0, median = 0;
  long inside = 0;  // of the 40 measured steps
  std::string twin;
  bool holds() const { return p5 <= median && median <= p95 && inside >= 20; }
};

Attempt attempt(const TempDir& dir) {
  Attempt a;
  const fs::path profile = dir.path / "p.json", cluster = dir.path / "c.yaml", spread = dir.path / "v.yaml";
  // 41 steps of 2 data-parallel ranks: 40 measured after the warm-up step.
  const json live = run_json("run " + kScenario + " --ranks 2 --steps 41 --profile " + profile.string(),
                             dir.path / "r.json");
  const Output cal = run_paratwin("calibrate " + profile.string() + " --cluster local-cpu -o " +
                                  cluster.string() + " --variability " + spread.string());
  BOOST_TEST_INFO(cal.text);
  BOOST_TEST_REQUIRE(cal.status == 0);
  BOOST_TEST(cal.text.find("kernel-time variability      forward ") != std::string::npos);
  BOOST_TEST(cal.text.find("; whole steps ") != std::string::npos);  // what a rank's kernels share
  a.twin = kScenario + " --set cluster=" + cluster.string();
  const json sim =
      run_json("simulate " + a.twin + " --set variability=" + spread.string() + " --iterations 300",
               dir.path / "s.json");
  const json plan = run_json("plan " + a.twin, dir.path / "plan.json");
  // The twin's band of a step's computation: its iterations less its (noise-free) exposed communication.
  const json& s = sim["simulation"]["spread"];
  const double exposed = plan["breakdown"]["exposed_comm_s"].get<double>();
  a.p5 = s["p5_s"].get<double>() - exposed, a.p95 = s["p95_s"].get<double>() - exposed;
  BOOST_TEST_REQUIRE(a.p95 > a.p5);  // the calibrated kernels vary
  std::vector<double> steps = live["iteration_compute_cpu_s"].get<std::vector<double>>();
  BOOST_TEST_REQUIRE(steps.size() == 40u);
  std::sort(steps.begin(), steps.end());
  a.median = steps[steps.size() / 2];
  a.inside = std::count_if(steps.begin(), steps.end(), [&](double t) { return a.p5 <= t && t <= a.p95; });
  BOOST_TEST_MESSAGE("twin P5-P95 " << a.p5 * 1e3 << " - " << a.p95 * 1e3 << " ms; measured median "
                                    << a.median * 1e3 << " ms, P5-P95 " << steps[2] * 1e3 << " - "
                                    << steps[37] * 1e3 << " ms; " << a.inside << " of 40 steps inside");
  return a;
}

}  // namespace

// This VM's host slows it in bursts that no process here sees (CPU time moves with them too): a burst
// during one run shifts its steps off the band calibrated from them. Each attempt is a fresh run and
// calibration, so a twin that is wrong fails all three; a burst, one.
BOOST_AUTO_TEST_CASE(a_two_rank_runs_steps_fall_inside_the_calibrated_twins_p5_to_p95) {
  TempDir dir;
  Attempt a = attempt(dir);
  for (int retry = 0; retry < 2 && !a.holds(); ++retry) a = attempt(dir);
  BOOST_TEST(a.p5 <= a.median);
  BOOST_TEST(a.median <= a.p95);
  // A perfect twin holds 90% of them; the machine's load drifts over a run, which the twin does not model.
  BOOST_TEST(a.inside >= 20);
  // Without the variability, the twin's steps are one value: the band comes from what calibrate measured.
  const json still = run_json("simulate " + a.twin + " --iterations 20", dir.path / "still.json");
  const json& flat = still["simulation"]["spread"];
  BOOST_TEST(flat["p95_s"].get<double>() - flat["p5_s"].get<double>() <= 1e-9 * flat["p50_s"].get<double>());
}
