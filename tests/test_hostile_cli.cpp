// Hostile and huge input, end to end: the `paratwin` binary given an alias bomb, megabyte inputs, a grid
// of 10^8 points, a sweep of 10^5 points and numbers that would overflow. Memory is the peak resident
// size of the command and every process it started (not time: CI machines are shared); bench/RESULTS.md
// ("Hostile input") has the times.
#define BOOST_TEST_MODULE hostile_cli
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "paratwin_process.hpp"
#include "source_tree.hpp"

namespace fs = std::filesystem;
using namespace paratwin_test;

namespace {

const std::string kParatwin = paratwin_test::bin_dir() + "/paratwin";
const std::string kQuickstart = paratwin_test::source_dir() + "/scenarios/quickstart.yaml";

fs::path work(const std::string& name) {
  return test_dir("paratwin_hostile_") / name;
}

struct Measured {
  int status = -1;
  long peak_kib = 0;  // of the command and all it started
  std::string err;
};

// Runs a shell command line in a process of its own, whose children are only the command's: their
// peak resident size is getrusage(RUSAGE_CHILDREN) there, once they are all waited for.
Measured measured(const std::string& command) {
  const fs::path err = work("stderr.txt");
  int pipe_fd[2];
  BOOST_REQUIRE(::pipe(pipe_fd) == 0);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    const int raw = std::system((command + " >/dev/null 2>" + err.string()).c_str());
    rusage usage{};
    ::getrusage(RUSAGE_CHILDREN, &usage);
    const long out[2] = {WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw), usage.ru_maxrss};
    [[maybe_unused]] const ssize_t n = ::write(pipe_fd[1], out, sizeof out);
    ::_exit(0);
  }
  ::close(pipe_fd[1]);
  long in[2] = {-1, 0};
  [[maybe_unused]] const ssize_t n = ::read(pipe_fd[0], in, sizeof in);
  ::close(pipe_fd[0]);
  ::waitpid(pid, nullptr, 0);
  return {int(in[0]), in[1], slurp(err)};
}

std::string values(int from, int to) {
  std::string out;
  for (int i = from; i <= to; ++i) out += (i > from ? "," : "") + std::to_string(i);
  return out;
}

size_t lines_of(const fs::path& file) {
  const std::string text = slurp(file);
  return size_t(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

BOOST_AUTO_TEST_CASE(validating_an_alias_bomb_is_refused_at_its_line_in_bounded_memory) {
  // The file: 8 levels of 10 references to the level below (10^8 nodes once expanded).
  std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 8; ++i) {
    text += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) text += (k ? ", *a" : "*a") + std::to_string(i - 1);
    text += "]\n";
  }
  const fs::path bomb = work("bomb.yaml");
  std::ofstream(bomb) << text;
  const Measured m = measured(kParatwin + " validate " + bomb.string());
  BOOST_TEST(m.status == 2);
  BOOST_TEST(m.err.find(bomb.string() + ":6:") != std::string::npos, m.err);
  BOOST_TEST(m.err.find("this alias repeats a node of 111111 YAML nodes") != std::string::npos, m.err);
  BOOST_TEST_MESSAGE("alias bomb: peak " << m.peak_kib / 1024 << " MiB");
  BOOST_TEST(m.peak_kib < 512 * 1024);
}

BOOST_AUTO_TEST_CASE(validating_any_megabyte_input_ends_with_a_verdict_in_bounded_memory) {
  const std::string scenario = slurp(kQuickstart);
  std::string list = "[0", keys = "name: m\n", grid = "[512", points;
  for (int i = 0; i < 400000; ++i) list += ",0";
  for (int i = 0; i < 80000; ++i) keys += "k" + std::to_string(i) + ": 1\n";
  for (int i = 0; i < 120000; ++i) grid += "," + std::to_string(513 + i);
  for (int i = 0; i < 25000; ++i)
    points += "    - {training.global_batch: " + std::to_string(512 + i) + "}\n";
  const std::vector<std::pair<std::string, std::string>> inputs = {
      {"flat-list.yaml", scenario + "extra: " + list + "]\n"},
      {"many-keys.yaml", keys},
      {"long-grid.yaml", scenario + "sweep:\n  grid:\n    training.global_batch: " + grid + "]\n"},
      {"long-list.yaml", scenario + "sweep:\n  list:\n" + points},
      {"long-text.yaml", "name: \"" + std::string(900000, 'x') + "\"\nlayers: 1\n"},
      {"deep.yaml", "layers: " + std::string(300000, '[') + std::string(300000, ']') + "\n"},
  };
  for (const auto& [name, text] : inputs) {
    BOOST_TEST_CONTEXT(name) {
      BOOST_REQUIRE(text.size() < (1u << 20));
      const fs::path file = work(name);
      std::ofstream(file) << text;
      const Measured m = measured(kParatwin + " validate " + file.string());
      BOOST_TEST_MESSAGE(name << ": status " << m.status << ", peak " << m.peak_kib / 1024 << " MiB");
      BOOST_TEST((m.status == 0 || m.status == 2), m.err.substr(0, 2000));  // a verdict, never a crash
      BOOST_TEST(m.peak_kib < 512 * 1024);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_grid_of_a_hundred_million_points_is_refused_before_any_work) {
  const fs::path json = work("huge.json");
  const Measured m =
      measured(kParatwin + " sweep " + kQuickstart + " --grid cluster.nodes=" + values(1, 10000) +
               " --grid training.global_batch=" + values(1, 10000) + " --json " + json.string());
  BOOST_TEST(m.status == 2);
  BOOST_TEST(m.err.find("error: the sweep has 100000000 points (10000 values of cluster.nodes x 10000 values "
                        "of training.global_batch); narrow it") != std::string::npos,
             m.err.substr(0, 500));
  // Before any work: no worker started (the coordinator's first line never came), nothing written.
  BOOST_TEST(m.err.find("sweep quickstart:") == std::string::npos);
  BOOST_TEST(!fs::exists(json));
  BOOST_TEST(!fs::exists(json.string() + ".partial"));
  BOOST_TEST(m.peak_kib < 512 * 1024);
}

BOOST_AUTO_TEST_CASE(a_sweep_of_a_hundred_thousand_points_streams_in_bounded_memory) {
  // 10^5 points of quickstart, all of them cheap: a global batch and sequence length that do not split
  // over its 16 replicas, or whose plan is out of reach, are answered in a fraction of a millisecond.
  const fs::path json = work("stream.json"), csv = work("stream.csv");
  const Measured m =
      measured(kParatwin + " sweep " + kQuickstart + " --grid training.global_batch=" + values(1, 1000) +
               " --grid training.seq_len=" + values(1, 100) + " --jobs 2 --json " + json.string() +
               " --csv " + csv.string());
  BOOST_TEST_MESSAGE("10^5-point sweep: peak " << m.peak_kib / 1024 << " MiB");
  BOOST_REQUIRE(m.status == 0);
  BOOST_TEST(m.peak_kib < 300 * 1024);
  BOOST_TEST(lines_of(csv) == 100001u);
  // One point per line, in order, and the journal gone once the files are whole.
  std::ifstream in(json);
  size_t points = 0;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("{\"index\":", 0) == 0 || line.rfind("{\"analytic_iteration_time_s\":", 0) == 0) ++points;
  BOOST_TEST(points == 100000u);
  BOOST_TEST(!fs::exists(json.string() + ".partial"));
  // Large sweeps report progress a line a second, not a line a point.
  BOOST_TEST(std::count(m.err.begin(), m.err.end(), '\n') < 1000);
}

BOOST_AUTO_TEST_CASE(numbers_that_would_overflow_are_errors_not_wrapped_values) {
  Result r = paratwin("plan " + kQuickstart + " --set training.global_batch=1000000000000");
  BOOST_TEST(r.status == 2);
  BOOST_TEST(r.err ==
             "<--set training.global_batch=1000000000000>:1:23: error: training.global_batch must be "
             "between 1 and 2147483647, got 1000000000000\n");
  r = paratwin("plan " + kQuickstart + " --set training.tokens=1e30 --emit megatron");
  BOOST_TEST(r.status == 2);
  BOOST_TEST(r.out.find("--train-iters") == std::string::npos);
  // Within int, but a Program of 134M micro-batches: refused before lowering, naming the knobs.
  const Measured m = measured(kParatwin + " plan " + kQuickstart +
                              " --set training.global_batch=2147483632 --set plan.micro_batch=1");
  BOOST_TEST(m.status == 2);
  BOOST_TEST(
      m.err.find("134217727 micro-batches per step: the Program would hold about") != std::string::npos,
      m.err);
  BOOST_TEST(m.peak_kib < 512 * 1024);
}

BOOST_AUTO_TEST_CASE(simulations_and_traces_too_large_are_refused_before_they_start) {
  Result r = paratwin("simulate " + kQuickstart + " --set failures.gpu.mtbf=1min --horizon 10000d");
  BOOST_TEST(r.status == 2);
  BOOST_TEST(r.err.rfind("<--horizon>: error: a horizon of 10000 d would", 0) == 0, r.err);
  BOOST_TEST(r.err.find("PARATWIN_MAX_HORIZON_") != std::string::npos, r.err);
  r = paratwin("simulate " + paratwin_test::source_dir() +
               "/scenarios/gpt3-175b-1024-a100.yaml --iterations 1000 --all-ranks");
  BOOST_TEST(r.status == 2);
  BOOST_TEST(r.err.find("activities (2335 tasks on each of 1024 simulated ranks x 1000 iterations); fewer "
                        "--iterations") != std::string::npos,
             r.err);
  const fs::path trace = work("t.json");
  r = run_command("PARATWIN_MAX_TRACE_EVENTS=100 " + kParatwin + " plan " + kQuickstart + " --trace " +
                  trace.string());
  BOOST_TEST(r.status == 2);
  BOOST_TEST(
      r.err.find("error: the trace would hold 199 events (191 tasks of the Program)") != std::string::npos,
      r.err);
  BOOST_TEST(!fs::exists(trace));
  fs::remove_all(test_dir("paratwin_hostile_"));
}
