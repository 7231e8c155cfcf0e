// `paratwin run` across two hosts, made on one machine by tests/exec/two_hosts.sh (two network
// namespaces joined by a veth pair, mpirun reaching host B through an rsh agent, MPI over TCP only):
// 2 hosts x 2 ranks data-parallel follow a 4-rank run on one host; tp 2 x pp 2 puts each TP pair on
// one host; host B stopped and unreachable mid-run, the job shrinks to host A and grows back once B
// answers again; a checkpoint directory host B does not share is refused before training; calibrate
// learns the link between the hosts, limited by tc.
#define BOOST_TEST_MODULE two_hosts
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "paratwin_process.hpp"
#include "plan/calibrate/profile.hpp"
#include "source_tree.hpp"

using nlohmann::json;
using namespace paratwin_test;
namespace fs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Where two_hosts.sh runs this test; empty when it does not (then every case says so and passes).
const std::string kHostA = env("PARATWIN_HOST_A"), kHostB = env("PARATWIN_HOST_B"),
                  kNetnsB = env("PARATWIN_HOST_B_NETNS"), kLinkA = env("PARATWIN_HOST_A_LINK"),
                  kLinkB = env("PARATWIN_HOST_B_LINK");
bool on_two_hosts() {
  if (kHostA.empty()) BOOST_TEST_MESSAGE("not under tests/exec/two_hosts.sh: nothing to run");
  return !kHostA.empty();
}

const fs::path kDir = test_dir("paratwin-two-hosts-");
const std::string kHosts = " --hosts " + kHostA + ":2," + kHostB + ":2 ";

// The tiny job on 4 processes: global batch 12, 10 steps.
std::string job(const std::string& layout, int steps = 10) {
  return " run " + paratwin_test::source_dir() +
         "/scenarios/live-cpu-tiny.yaml --set cluster=cpu-hosts --set training.seq_len=32 "
         "--set training.global_batch=12 --set plan.micro_batch=1 --steps " +
         std::to_string(steps) + " " + layout;
}

std::vector<double> losses(const std::string& name) {
  return read_json(kDir / name)["loss"].get<std::vector<double>>();
}

void follows(const std::vector<double>& a, const std::vector<double>& b, double tolerance) {
  BOOST_TEST_REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) BOOST_TEST(std::abs(a[i] - b[i]) <= tolerance, "step " << i + 1);
}

// The paratwin-rank processes in host B's namespace: their world ranks.
std::set<int> ranks_on_host_b() {
  std::set<int> ranks;
  FILE* pids = ::popen(("ip netns pids " + kNetnsB).c_str(), "r");
  int pid = 0;
  while (std::fscanf(pids, "%d", &pid) == 1) {
    const std::string proc = "/proc/" + std::to_string(pid);
    if (slurp(proc + "/comm") != "paratwin-rank\n") continue;
    const std::string environ = slurp(proc + "/environ");
    const std::string key = std::string("OMPI_COMM_WORLD_RANK=");
    for (size_t at = 0; at < environ.size(); at = environ.find('\0', at) + 1) {
      if (environ.compare(at, key.size(), key) == 0)
        ranks.insert(std::atoi(environ.c_str() + at + key.size()));
      if (environ.find('\0', at) == std::string::npos) break;
    }
  }
  ::pclose(pids);
  return ranks;
}

// Runs paratwin, calling `on_line` with each line of its output as it comes and paratwin's process
// id; returns all of its output.
Output run_watching(const std::string& args, const std::function<void(const std::string&, pid_t)>& on_line) {
  // The shell says its process id, which paratwin then takes over.
  FILE* pipe =
      ::popen(("echo $$; exec " + paratwin_test::bin_dir() + "/paratwin " + args + " 2>&1").c_str(), "r");
  Output out;
  char line[4096];
  pid_t pid = 0;
  if (std::fgets(line, sizeof line, pipe)) pid = pid_t(std::atoi(line));
  while (std::fgets(line, sizeof line, pipe)) {
    out.text += line;
    on_line(line, pid);
  }
  const int status = ::pclose(pipe);
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

// The 4-rank data-parallel run on host A alone, once.
const std::vector<double>& one_host_reference() {
  static const std::vector<double> reference = [] {
    const Output out = run_paratwin(job("--ranks 4") + " --json " + (kDir / "one-host.json").string());
    if (out.status != 0) throw std::runtime_error("the one-host run failed:\n" + out.text);
    return losses("one-host.json");
  }();
  return reference;
}

}  // namespace

BOOST_AUTO_TEST_CASE(two_hosts_of_two_ranks_follow_four_ranks_on_one_host) {
  if (!on_two_hosts()) return;
  const Output out = run_paratwin(job("--ranks 4") + kHosts + "--json " + (kDir / "dp.json").string());
  BOOST_TEST_INFO(out.text);
  BOOST_TEST_REQUIRE(out.status == 0);
  BOOST_TEST(out.text.find("on 2 hosts: " + kHostA + ", " + kHostB) != std::string::npos);
  BOOST_TEST(out.text.find("heartbeats on " + kHostA + ":") !=
             std::string::npos);  // the first host's address
  follows(losses("dp.json"), one_host_reference(), 1e-6);
}

BOOST_AUTO_TEST_CASE(tp2_pp2_keeps_each_tp_pair_on_one_host) {
  if (!on_two_hosts()) return;
  std::set<int> on_b;
  const Output out = run_watching(
      // Micro-batches of 3: 4 a step instead of 12, each with its many small TP all-reduces over TCP.
      job("--ranks 1 --set plan.tp=2 --set plan.pp=2 --set plan.micro_batch=3") + kHosts + "--json " +
          (kDir / "tp-pp.json").string(),
      [&](const std::string& line, pid_t) {
        if (on_b.empty() && line.find("step ") == 0) on_b = ranks_on_host_b();
      });
  BOOST_TEST_INFO(out.text);
  BOOST_TEST_REQUIRE(out.status == 0);
  // Rank order tp-cp-dp-pp: ranks 0 and 1 are stage 0's TP pair (host A), 2 and 3 stage 1's (host B).
  BOOST_TEST(on_b == (std::set<int>{2, 3}), boost::test_tools::per_element());
  follows(losses("tp-pp.json"), one_host_reference(), 1e-4);  // another reduction order than dp 4
}

// Host B cut off (each host's route to the other unreachable, so nothing passes either way) or
// reached again. The link stays up: host A keeps its address for the ranks that stay there.
bool cut_off_b(bool cut) {
  const std::string verb = cut ? " add" : " del";
  return std::system(("ip route" + verb + " unreachable " + kHostB + "/32").c_str()) == 0 &&
         std::system(("ip -n " + kNetnsB + " route" + verb + " unreachable " + kHostA + "/32").c_str()) == 0;
}

BOOST_AUTO_TEST_CASE(a_host_that_stops_is_left_out_until_it_answers_and_the_job_grows_back) {
  if (!on_two_hosts()) return;
  // Host B stops at step 6 (its processes killed, nothing passing between the hosts) and stays
  // unreachable until the supervisor has found that it does not answer; then it is reached again,
  // and the job must grow back once a probe gets through. No time decides, only the order of events:
  // once the job trains on both hosts again, the test interrupts it. The run's steps are only an upper
  // bound (30 s of the one-host run's steps), reached when the job never grows back.
  one_host_reference();
  std::vector<double> times =
      read_json(kDir / "one-host.json")["iteration_times_s"].get<std::vector<double>>();
  std::sort(times.begin(), times.end());
  const int steps = 8 + int(std::ceil(30 / times[times.size() / 2]));
  bool stopped = false, cut = false, silent = false, grown = false, interrupted = false;
  const Output out = run_watching(
      job("--ranks 4", steps) + kHosts + "--checkpoint-dir " + (kDir / "ckpt").string() +
          " --checkpoint-every 4 --min-ranks 2",
      [&](const std::string& line, pid_t paratwin) {
        if (!stopped && line.find("step     6/") == 0) {
          // Host B stops: every process in its namespace (Open MPI's daemon and both ranks) at once,
          // and nothing reaches it any more.
          cut = cut_off_b(true);
          FILE* pids = ::popen(("ip netns pids " + kNetnsB).c_str(), "r");
          int pid = 0;
          while (std::fscanf(pids, "%d", &pid) == 1) ::kill(pid, SIGKILL);
          ::pclose(pids);
          stopped = true;
        }
        if (stopped && !silent && line.find("host " + kHostB + " does not answer") != std::string::npos) {
          silent = true;
          cut_off_b(false);
        }
        if (line.find("growing back to 4 ranks") != std::string::npos) grown = true;
        if (grown && !interrupted && line.find("step ") == 0 &&
            line.find("/" + std::to_string(steps)) != std::string::npos) {
          interrupted = true;  // a step of the job grown back to both hosts
          ::kill(paratwin, SIGINT);
        }
      });
  if (cut && !silent) cut_off_b(false);
  BOOST_TEST_INFO(out.text);
  BOOST_TEST_REQUIRE(stopped);
  BOOST_TEST_REQUIRE(cut);
  BOOST_TEST(silent);
  BOOST_TEST(interrupted);
  BOOST_TEST(out.status == 130);
  const size_t probing = out.text.find("probing the hosts of the stopped job"),
               shrink = out.text.find("shrinking to 2 ranks"),
               answers = out.text.find("host " + kHostB + " answers again"),
               grow = out.text.find("growing back to 4 ranks");
  BOOST_TEST(probing != std::string::npos);
  BOOST_TEST(shrink != std::string::npos);
  BOOST_TEST(answers != std::string::npos);
  BOOST_TEST(grow != std::string::npos);
  BOOST_TEST((probing < shrink && shrink < answers && answers < grow));
}

BOOST_AUTO_TEST_CASE(a_checkpoint_directory_host_b_does_not_share_is_refused_before_training) {
  if (!on_two_hosts()) return;
  const fs::path dir = kDir / "not-shared";
  fs::create_directories(dir);
  ::setenv("PARATWIN_TEST_PRIVATE_DIR", dir.c_str(), 1);  // two_hosts.sh's agent mounts it away on B
  const Output out = run_paratwin(job("--ranks 4") + kHosts + "--checkpoint-dir " + dir.string());
  ::unsetenv("PARATWIN_TEST_PRIVATE_DIR");
  BOOST_TEST_INFO(out.text);
  BOOST_TEST(out.status == 2);
  BOOST_TEST(out.text.find("--checkpoint-dir is not one directory for every rank: rank 0 on host ") !=
             std::string::npos);
  BOOST_TEST(out.text.find("that rank 2 wrote; give a directory on a file system every host shares") !=
             std::string::npos);
  BOOST_TEST(out.text.find("step ") == std::string::npos);  // refused before any step
  BOOST_TEST(out.text.find("not restarting") != std::string::npos);
}

// The link between the hosts limited to `rate` in each direction by a token bucket (tc's tbf), for
// the life of this object; `limited` false where tc or the qdisc is not there.
struct RateLimit {
  bool limited = false;
  explicit RateLimit(const std::string& rate) {
    const std::string tbf = " root tbf rate " + rate + " burst 32kb latency 400ms";
    limited = std::system(("tc qdisc add dev " + kLinkA + tbf + " 2>&1").c_str()) == 0 &&
              std::system(
                  ("ip netns exec " + kNetnsB + " tc qdisc add dev " + kLinkB + tbf + " 2>&1").c_str()) == 0;
  }
  ~RateLimit() {
    std::system(("tc qdisc del dev " + kLinkA + " root 2>/dev/null").c_str());
    std::system(("ip netns exec " + kNetnsB + " tc qdisc del dev " + kLinkB + " root 2>/dev/null").c_str());
  }
};

double dp_comm_s(const std::string& cluster) {
  const Output out = run_paratwin(
      " plan " + paratwin_test::source_dir() + "/scenarios/live-cpu-tiny.yaml --set cluster=" + cluster +
      " --set cluster.pools.hosts.nodes=2 --set cluster.pools.hosts.gpus_per_node=1 "
      "--set plan.micro_batch=4 --set plan.bucket_size=1MiB --json -");
  BOOST_TEST_INFO(out.text);
  BOOST_TEST_REQUIRE(out.status == 0);
  return json::parse(out.text)["breakdown"]["dp_comm_s"].get<double>();
}

BOOST_AUTO_TEST_CASE(calibrate_learns_the_link_between_hosts_and_the_twin_uses_it) {
  if (!on_two_hosts()) return;
  // 40 Mbit/s = 5 MB/s each way: far below what TCP over veth does on any machine, however loaded.
  const double rate_Bps = 5e6;
  RateLimit limit("40mbit");
  if (!limit.limited) {
    BOOST_TEST_MESSAGE("SKIP: tc cannot limit the link's rate here (no sch_tbf?)");
    return;
  }
  // 2 hosts x 1 rank: every data-parallel all-reduce (buckets of 1 MiB: two of them) crosses the link.
  const fs::path profile = kDir / "link.profile.json", calibrated = kDir / "link-cluster.yaml";
  const Output run =
      run_paratwin(" run " + paratwin_test::source_dir() +
                   "/scenarios/live-cpu-tiny.yaml --set cluster=cpu-hosts --set training.global_batch=8 "
                   "--set plan.micro_batch=4 --set plan.bucket_size=1MiB --ranks 2 --steps 5 --hosts " +
                   kHostA + ":1," + kHostB + ":1 --profile " + profile.string() + " --json " +
                   (kDir / "link.json").string());
  BOOST_TEST_INFO(run.text);
  BOOST_TEST_REQUIRE(run.status == 0);
  // The live report compares per kind of task; the assumed 1 GB/s Ethernet is far too fast for this link.
  const json report = read_json(kDir / "link.json");
  json across;
  for (const json& k : report["by_kind"])
    if (k["kind"] == "collective across hosts") across = k;
  BOOST_TEST_REQUIRE(!across.is_null());
  const double measured_s = across["measured_s"].get<double>();
  BOOST_TEST(measured_s > 5 * across["predicted_s"].get<double>());
  BOOST_TEST(run.text.find("collective across hosts") != std::string::npos);

  const Output cal =
      run_paratwin(" calibrate " + profile.string() + " --cluster cpu-hosts -o " + calibrated.string());
  BOOST_TEST_INFO(cal.text);
  BOOST_TEST_REQUIRE(cal.status == 0);
  BOOST_TEST(cal.text.find("inter-host bandwidth") != std::string::npos);
  // The fitted bandwidth is the link's: never above the limit, and not far below it.
  const paratwin::ClusterSpec fitted = paratwin::load_cluster_argument(calibrated.string());
  const double bandwidth = fitted.pools.front().nic.achievable.value().value();
  BOOST_TEST_MESSAGE("fitted inter-host bandwidth " << bandwidth / 1e6 << " MB/s, limit " << rate_Bps / 1e6);
  BOOST_TEST(bandwidth <= 1.05 * rate_Bps);
  BOOST_TEST(bandwidth >= rate_Bps / 20);
  // The twin takes it: its data-parallel time grows from the assumed network's to about what was measured.
  const double assumed = dp_comm_s("cpu-hosts"), learned = dp_comm_s(calibrated.string());
  BOOST_TEST(learned > 10 * assumed);
  BOOST_TEST(learned > measured_s / 3);
  BOOST_TEST(learned < 3 * measured_s);
}

struct Cleanup {
  ~Cleanup() {
    std::error_code ec;
    fs::remove_all(kDir, ec);
  }
};
BOOST_TEST_GLOBAL_FIXTURE(Cleanup);
