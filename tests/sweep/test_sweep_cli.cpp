// `paratwin sweep` end to end: the grid it runs, its Pareto front and goal, the same results from one
// worker, two workers and two MPI ranks, and an interrupted sweep resumed to the very same file.
#define BOOST_TEST_MODULE sweep_cli
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "paratwin_process.hpp"
#include "source_tree.hpp"

namespace fs = std::filesystem;
using namespace paratwin_test;

namespace {

const std::string kSweep = paratwin_test::source_dir() + "/tests/sweep/small-sweep.yaml";
const std::string kParatwin = paratwin_test::bin_dir() + "/paratwin";

fs::path work_dir() {
  return test_dir("paratwin_sweep_");
}

std::string path(const std::string& name) {
  return (work_dir() / name).string();
}

bool has_line_starting(const std::string& text, const std::string& start) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(start, 0) == 0) return true;
  return false;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_small_sweep_runs_its_grid_and_writes_every_output) {
  const std::string json = path("grid.json"), csv = path("grid.csv"), png = path("grid.png");
  const Result r = paratwin("sweep " + kSweep + " --json " + json + " --csv " + csv + " --png " + png);
  BOOST_TEST_INFO(r.err);
  BOOST_REQUIRE(r.status == 0);
  const nlohmann::json j = nlohmann::json::parse(slurp(json));
  BOOST_TEST(j["sweep"]["complete"] == true);
  BOOST_REQUIRE(j["points"].size() == 6u);
  const std::vector<std::string> clusters = {"dgx-a100-80g", "dgx-h100"};
  const std::vector<int> nodes = {2, 4, 8};
  for (int i = 0; i < 6; ++i) {
    const nlohmann::json& p = j["points"][i];
    BOOST_TEST_CONTEXT("point " << i) {
      BOOST_TEST(p["index"] == i);
      BOOST_TEST(p["status"] == "ok");
      BOOST_TEST(p["settings"]["cluster"] == clusters[i / 3]);
      BOOST_TEST(p["settings"]["cluster.nodes"] == std::to_string(nodes[i % 3]));
      BOOST_TEST(p["cluster"] == clusters[i / 3]);
      BOOST_TEST(p["gpus"] == 8 * nodes[i % 3]);
      BOOST_TEST(p["plan"]["dp"] == 4 * nodes[i % 3]);  // tp 2: dp follows from the cluster
    }
  }
  // The table, the CSV (a header and a row per point) and a PNG.
  BOOST_TEST(has_line_starting(r.out, "sweep small-sweep: 6 of 6 points, analytic"));
  BOOST_TEST(r.out.find("dgx-h100     8               64 tp 2 pp 1 dp 32 mb 4") != std::string::npos, r.out);
  const std::string rows = slurp(csv);
  BOOST_TEST(std::count(rows.begin(), rows.end(), '\n') == 7);
  BOOST_TEST(rows.rfind("index,cluster,cluster.nodes,status,", 0) == 0);
  const std::string picture = slurp(png);
  BOOST_TEST(picture.size() > 20000u);
  BOOST_TEST(picture.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
  // Plain progress lines when standard error is not a terminal.
  BOOST_TEST(has_line_starting(r.err, "sweep: 6/6 done; #"));
}

BOOST_AUTO_TEST_CASE(the_pareto_front_is_monotone_and_dominates_the_rest) {
  const std::string json = path("pareto.json");
  BOOST_REQUIRE(paratwin("sweep " + kSweep + " --grid cluster.nodes=1,2,4,8,16 --json " + json).status == 0);
  const nlohmann::json j = nlohmann::json::parse(slurp(json));
  const auto point = [&](int index) { return j["points"][index]; };
  std::vector<int> front = j["pareto"].get<std::vector<int>>();
  BOOST_REQUIRE(front.size() >= 2u);
  for (size_t k = 1; k < front.size(); ++k) {
    BOOST_TEST(point(front[k])["time_to_train_s"].get<double>() >
               point(front[k - 1])["time_to_train_s"].get<double>());
    BOOST_TEST(point(front[k])["cost_usd"].get<double>() < point(front[k - 1])["cost_usd"].get<double>());
  }
  for (const auto& p : j["points"]) {
    if (std::find(front.begin(), front.end(), p["index"].get<int>()) != front.end()) continue;
    bool dominated = false;
    for (int f : front)
      dominated |= point(f)["time_to_train_s"].get<double>() <= p["time_to_train_s"].get<double>() &&
                   point(f)["cost_usd"].get<double>() <= p["cost_usd"].get<double>();
    BOOST_TEST(dominated, "point " << p["index"] << " is neither on the front nor dominated by it");
  }
}

BOOST_AUTO_TEST_CASE(one_worker_two_workers_and_two_mpi_ranks_give_identical_results) {
  const std::string args = "sweep " + kSweep + " --grid cluster.nodes=1,2,4,8,16";
  BOOST_REQUIRE(paratwin(args + " --json " + path("j1.json") + " --csv " + path("j1.csv")).status == 0);
  const Result two = paratwin(args + " --jobs 2 --json " + path("j2.json") + " --csv " + path("j2.csv"));
  BOOST_REQUIRE(two.status == 0);
  BOOST_TEST(two.err.find("on 2 workers") != std::string::npos);
  BOOST_TEST(slurp(path("j1.json")) == slurp(path("j2.json")));
  BOOST_TEST(slurp(path("j1.csv")) == slurp(path("j2.csv")));
  const Result mpi =
      run_command(std::string(PARATWIN_MPIEXEC) + " --oversubscribe --allow-run-as-root -np 2 " + kParatwin +
                  " " + args + " --json " + path("j3.json"));
  BOOST_TEST_INFO(mpi.err);
  BOOST_REQUIRE(mpi.status == 0);
  BOOST_TEST(mpi.err.find("on 2 workers") != std::string::npos);  // one per rank
  BOOST_TEST(slurp(path("j1.json")) == slurp(path("j3.json")));
}

BOOST_AUTO_TEST_CASE(a_deadline_no_point_meets_is_reported_with_the_closest_point) {
  const std::string json = path("deadline.json");
  const Result r = paratwin("sweep " + kSweep + " --set goal.deadline=1h --json " + json);
  BOOST_REQUIRE(r.status == 0);
  const nlohmann::json j = nlohmann::json::parse(slurp(json));
  BOOST_TEST(j["goal"]["met"] == false);
  BOOST_TEST(j["goal"]["chosen"].is_null());
  // The closest is the fastest point when only a deadline is set.
  int fastest = 0;
  for (const auto& p : j["points"])
    if (p["time_to_train_s"] < j["points"][fastest]["time_to_train_s"]) fastest = p["index"];
  BOOST_TEST(j["goal"]["closest"] == fastest);
  BOOST_TEST(
      has_line_starting(r.out, "  goal: no point meets the deadline of 1 h; the closest is #" +
                                   std::to_string(fastest) + " cluster=dgx-h100 cluster.nodes=8 (64 GPUs): "),
      r.out);
  BOOST_TEST(r.out.find("over the deadline)") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(an_interrupted_sweep_resumes_to_the_same_file) {
  // Simulated points take tens of milliseconds each: time to interrupt the sweep in the middle.
  const std::vector<std::string> args = {
      kParatwin, "sweep", kSweep, "--set", "sweep.simulate=true", "--grid", "cluster.nodes=1,2,4,8"};
  std::string line;
  for (const auto& a : args) line += a + " ";
  const std::string whole = path("whole.json"), resumed = path("resumed.json");
  BOOST_REQUIRE(run_command(line + "--json " + whole).status == 0);

  std::vector<std::string> argv = args;
  argv.insert(argv.end(), {"--json", resumed});
  std::fflush(nullptr);  // or the child's copy of the buffers is written twice
  const pid_t pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setpgid(0, 0);  // its own group, workers included, to kill them all at once
    std::freopen("/dev/null", "w", stdout);
    std::freopen("/dev/null", "w", stderr);
    std::vector<char*> c;
    for (auto& a : argv) c.push_back(a.data());
    c.push_back(nullptr);
    ::execv(c[0], c.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  size_t finished = 0;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (finished < 2 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const nlohmann::json j = nlohmann::json::parse(slurp(resumed), nullptr, false);
    if (!j.is_discarded()) finished = j["points"].size();
  }
  ::kill(-pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const nlohmann::json partial = nlohmann::json::parse(slurp(resumed));  // whole, never half-written
  BOOST_TEST(partial["sweep"]["complete"] == false);
  BOOST_TEST(partial["points"].size() >= 2u);
  BOOST_TEST(partial["points"].size() < 8u);

  const Result r = run_command(line + "--json " + resumed + " --resume");
  BOOST_TEST_INFO(r.err);
  BOOST_REQUIRE(r.status == 0);
  // The journal beside the file holds every point that finished, the file those saved before the kill.
  const size_t before = r.err.find(" done before");
  BOOST_REQUIRE(before != std::string::npos);
  const size_t done = std::stoul(r.err.substr(r.err.rfind(' ', before - 1) + 1));
  BOOST_TEST(done >= partial["points"].size());
  BOOST_TEST(done < 8u);
  BOOST_TEST(slurp(resumed) == slurp(whole));
  const nlohmann::json j = nlohmann::json::parse(slurp(whole));
  BOOST_TEST(j["points"][0]["evaluator"] == "simulation");
  BOOST_TEST(j["points"][0]["metrics"]["iteration_time_s"].get<double>() ==
                 j["points"][0]["analytic_iteration_time_s"].get<double>(),
             boost::test_tools::tolerance(0.05));
}

BOOST_AUTO_TEST_CASE(bad_sweep_input_exits_2_and_says_why) {
  Result r = paratwin("sweep " + kSweep + " --grid cluster.gpus=100");
  BOOST_TEST(r.status == 2);
  BOOST_TEST(
      has_line_starting(r.err,
                        "<--grid cluster.gpus=100>:1:14: error: sweep.grid.cluster.gpus: cluster.gpus=100 "
                        "is not a whole number of 8-GPU nodes (pool 'dgx'); the nearest cluster.gpus "
                        "that works is 96"),
      r.err);
  r = paratwin("sweep " + paratwin_test::source_dir() + "/scenarios/quickstart.yaml");
  BOOST_TEST(r.status == 2);
  BOOST_TEST(r.err.find("error: nothing to sweep") != std::string::npos, r.err);
  r = paratwin("sweep " + kSweep + " --resume");
  BOOST_TEST(r.status == 2);
  BOOST_TEST(r.err.find("--resume needs --json FILE") != std::string::npos, r.err);
  // Results of another sweep are not continued.
  const std::string json = path("other.json");
  BOOST_REQUIRE(paratwin("sweep " + kSweep + " --json " + json).status == 0);
  r = paratwin("sweep " + kSweep + " --grid training.seq_len=1024 --json " + json + " --resume");
  BOOST_TEST(r.status == 2);
  BOOST_TEST(r.err.find(json + ": error: cannot resume: the file holds the results of another sweep") !=
                 std::string::npos,
             r.err);
  std::ofstream(json) << "{\"scenario\": 1}";
  r = paratwin("sweep " + kSweep + " --json " + json + " --resume");
  BOOST_TEST(r.status == 2);
  BOOST_TEST(r.err.find("cannot resume: not a sweep results file") != std::string::npos, r.err);
  fs::remove_all(work_dir());
}
