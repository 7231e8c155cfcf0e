// The supervisor's parts, in-process: injected faults and their messages, the chaos schedule, the
// control channel (unknown peers and malformed messages dropped and logged), the checkpoint writer
// behind the training, and failure traces.
#define BOOST_TEST_MODULE supervise
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>

#include "exec/checkpoint/background_writer.hpp"
#include "exec/supervise/control_channel.hpp"
#include "exec/supervise/fault_plan.hpp"
#include "plan/io/failure_trace.hpp"
#include "raw_peer.hpp"

using namespace paratwin;
using namespace paratwin::exec;
using paratwin_test::RawPeer;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("paratwin-supervise-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

// The diagnostics of one bad --inject value.
std::vector<Diagnostic> inject_errors(const std::string& text, int ranks = 4, int64_t steps = 0) {
  Diagnostics diag;
  parse_injection(text, ranks, steps, diag);
  return diag.all();
}

struct Channel {
  std::vector<std::string> log;
  ControlServer server{"127.0.0.1", [this](const std::string& m) { log.push_back(m); }};
  std::vector<ControlMessage> received;

  Channel() { server.expect("secret", 2); }
  // Polls until `done` holds or two seconds have passed.
  template <class F>
  void poll_until(F done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (!done() && std::chrono::steady_clock::now() < deadline)
      for (const auto& m : server.poll(0.02)) received.push_back(m);
  }
  bool logged(const std::string& part) const {
    for (const auto& l : log)
      if (l.find(part) != std::string::npos) return true;
    return false;
  }
};

TrainingState state_at(int64_t step) {
  TrainingState s;
  s.step = step;
  s.model = "tiny";
  s.global_batch = 4;
  s.weights.assign(100, float(step));
  s.adam_m.assign(100, 0.5f);
  s.adam_v.assign(100, 0.25f);
  return s;
}

}  // namespace

BOOST_AUTO_TEST_CASE(an_injected_fault_reads_kind_step_and_rank) {
  Diagnostics diag;
  const Injection f = parse_injection("hang@12:3", 4, 20, diag);
  BOOST_TEST(!diag.has_errors());
  BOOST_TEST(fault_name(f.kind) == std::string("hang"));
  BOOST_TEST(f.step == 12);
  BOOST_TEST(f.rank == 3);
  BOOST_TEST(f.text() == "hang@12:3");
}

BOOST_AUTO_TEST_CASE(malformed_injections_are_located_in_the_argument_with_what_was_expected) {
  auto kind = inject_errors("kil@3:1");
  BOOST_REQUIRE(kind.size() == 1u);
  BOOST_TEST(kind[0].str() ==
             "<--inject kil@3:1>:1:1: error: unknown fault kind 'kil'; expected kill, hang, slow or error — "
             "did you mean "
             "'kill'?");
  auto step = inject_errors("kill@x:1");
  BOOST_REQUIRE(step.size() == 1u);
  BOOST_TEST(step[0].where.column == 6);
  BOOST_TEST(step[0].message.find("expected a step from 1") != std::string::npos);
  BOOST_TEST(inject_errors("slow@0:1").size() == 1u);
  auto late = inject_errors("hang@11:0", 4, 10);
  BOOST_REQUIRE(late.size() == 1u);
  BOOST_TEST(late[0].message.find("from 1 to 10") != std::string::npos);
  auto rank = inject_errors("kill@3:9");
  BOOST_REQUIRE(rank.size() == 1u);
  BOOST_TEST(rank[0].where.column == 8);
  BOOST_TEST(rank[0].message == "expected a rank from 0 to 3 after ':', found '9'");
  auto form = inject_errors("kill3");
  BOOST_REQUIRE(form.size() == 1u);
  BOOST_TEST(form[0].message.find("expected KIND@STEP:RANK") != std::string::npos);
  // Every bad argument at once.
  try {
    parse_injections({"kill@1:0", "kil@3:1", "kill@3:-1"}, 4, 0);
    BOOST_FAIL("no error");
  } catch (const InputError& e) {
    BOOST_TEST(e.diagnostics().size() == 2u);
  }
}

BOOST_AUTO_TEST_CASE(a_chaos_seed_fixes_the_kills_and_their_mean_interval) {
  ChaosSchedule a(42, 3, 2.0), b(42, 3, 2.0), c(43, 3, 2.0);
  for (int i = 0; i < 3; ++i) {
    BOOST_TEST(a.next_delay_s() == b.next_delay_s());
    const int v = a.next_victim(4);
    BOOST_TEST(v == b.next_victim(4));
    BOOST_TEST((v >= 0 && v < 4));
  }
  BOOST_TEST(a.kills_left() == 0);
  BOOST_TEST(c.next_delay_s() != ChaosSchedule(42, 3, 2.0).next_delay_s());
  ChaosSchedule many(7, 0, 2.0);
  double sum = 0;
  for (int i = 0; i < 4000; ++i) sum += many.next_delay_s();
  BOOST_TEST(sum / 4000 == 2.0, boost::test_tools::tolerance(0.1));
}

BOOST_AUTO_TEST_CASE(heartbeats_of_a_rank_that_said_hello_reach_the_supervisor) {
  Channel ch;
  {
    ControlClient client(ch.server.endpoint(), "secret", 1);
    client.send({{"type", "step"}, {"step", 5}, {"steps", 10}, {"loss", 2.5}, {"step_s", 0.1}});
    ch.poll_until([&] { return !ch.received.empty(); });
    BOOST_REQUIRE(ch.received.size() == 1u);
    const ControlMessage& m = ch.received[0];
    BOOST_TEST(int(m.kind) == int(ControlMessage::Kind::Step));
    BOOST_TEST(m.rank == 1);
    BOOST_TEST(m.step == 5);
    BOOST_TEST(m.loss == 2.5);
    BOOST_TEST(ch.server.pids()[1] == int(::getpid()));
  }
  // Its connection ended without a "done": the supervisor hears of it.
  ch.poll_until([&] { return ch.received.size() == 2u; });
  BOOST_REQUIRE(ch.received.size() == 2u);
  BOOST_TEST(int(ch.received[1].kind) == int(ControlMessage::Kind::Closed));
  BOOST_TEST(ch.received[1].rank == 1);
  BOOST_TEST(ch.log.empty());
}

BOOST_AUTO_TEST_CASE(unknown_peers_are_dropped_and_logged) {
  Channel ch;
  RawPeer stranger(ch.server.endpoint());
  stranger.send("{\"type\":\"step\",\"step\":1}\n");
  ch.poll_until([&] { return ch.logged("unknown peer"); });
  BOOST_TEST(ch.logged("dropped unknown peer 127.0.0.1:"));
  RawPeer wrong_token(ch.server.endpoint());
  wrong_token.send("{\"type\":\"hello\",\"token\":\"guess\",\"rank\":0,\"pid\":1}\n");
  ch.poll_until([&] { return ch.log.size() == 2u; });
  BOOST_TEST(ch.log.size() == 2u);
  // A rank already connected cannot be taken over.
  ControlClient rank0(ch.server.endpoint(), "secret", 0);
  RawPeer impostor(ch.server.endpoint());
  impostor.send("{\"type\":\"hello\",\"token\":\"secret\",\"rank\":0,\"pid\":1}\n");
  ch.poll_until([&] { return ch.log.size() == 3u; });
  BOOST_TEST(ch.log.size() == 3u);
  BOOST_TEST(ch.received.empty());
  BOOST_TEST(ch.server.pids()[0] == int(::getpid()));
}

BOOST_AUTO_TEST_CASE(malformed_messages_of_a_known_rank_are_dropped_and_logged_and_the_rank_stays) {
  Channel ch;
  RawPeer rank(ch.server.endpoint());
  rank.send("{\"type\":\"hello\",\"token\":\"secret\",\"rank\":1,\"pid\":77}\n");
  rank.send("not json\n{\"type\":\"step\",\"step\":\"x\",\"steps\":3,\"loss\":1,\"step_s\":1}\n");
  rank.send("{\"type\":\"warp\"}\n[1,2]\n");
  rank.send(std::string(5000, 'x'));
  ch.poll_until([&] { return ch.log.size() == 5u; });
  BOOST_REQUIRE(ch.log.size() == 5u);
  BOOST_TEST(ch.log[0] ==
             "control channel: dropped a malformed message from rank 1: not a JSON object with a 'type'");
  BOOST_TEST(ch.log[1].find("'step' is missing or not a whole number") != std::string::npos);
  BOOST_TEST(ch.log[2].find("unknown type 'warp'") != std::string::npos);
  BOOST_TEST(ch.log[4].find("oversized message from rank 1") != std::string::npos);
  BOOST_TEST(ch.server.pids()[1] == 77);
  // Only the oversized one ends the connection.
  ch.poll_until([&] { return !ch.received.empty(); });
  BOOST_REQUIRE(ch.received.size() == 1u);
  BOOST_TEST(int(ch.received[0].kind) == int(ControlMessage::Kind::Closed));
}

BOOST_AUTO_TEST_CASE(the_channel_listens_on_an_ipv4_address_only) {
  BOOST_CHECK_THROW(ControlServer("localhost", [](const std::string&) {}), std::invalid_argument);
  // Not an address of this machine: the user's input, refused like a malformed one (exit 2).
  BOOST_CHECK_THROW(ControlServer("192.0.2.1", [](const std::string&) {}), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(the_writer_returns_at_once_and_writes_one_snapshot_at_a_time) {
  TempDir dir;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::mutex mutex;
  std::vector<int64_t> committed;
  {
    BackgroundCheckpointWriter writer(dir.path.string(),
                                      [&](int64_t step, double snapshot_s, double write_s) {
                                        released.wait();  // the test holds the writer here
                                        BOOST_TEST(snapshot_s == 0.001);
                                        BOOST_TEST(write_s > 0);
                                        std::lock_guard lock(mutex);
                                        committed.push_back(step);
                                      });
    writer.submit(state_at(10), 0.001);  // returns while the writer is held
    {
      std::lock_guard lock(mutex);
      BOOST_TEST(committed.empty());
    }
    std::thread later([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      release.set_value();
    });
    writer.submit(state_at(20), 0.001);  // waits for the first write to end
    {
      std::lock_guard lock(mutex);
      BOOST_TEST(committed == std::vector<int64_t>{10});
    }
    writer.wait();
    BOOST_TEST(committed == (std::vector<int64_t>{10, 20}));
    later.join();
  }
  const CheckpointSearch found = load_latest_checkpoint(dir.path.string(), 100);
  BOOST_REQUIRE(found.state.has_value());
  BOOST_TEST(found.state->step == 20);
  BOOST_TEST(found.rejected.empty());
}

BOOST_AUTO_TEST_CASE(a_failed_write_is_reported_to_the_training) {
  TempDir dir;
  std::ofstream(dir.path / "file") << "x";
  BackgroundCheckpointWriter writer((dir.path / "file" / "ckpt").string(), nullptr);
  writer.submit(state_at(1), 0);
  BOOST_CHECK_THROW(writer.wait(), std::runtime_error);
  writer.wait();  // reported once
}

BOOST_AUTO_TEST_CASE(unfinished_checkpoint_writes_are_removed_and_complete_ones_kept) {
  TempDir dir;
  save_checkpoint(dir.path.string(), state_at(5));
  fs::create_directories(dir.path / ".step-00000010.tmp-1234");
  std::ofstream(dir.path / ".progress.json.tmp") << "{";
  BOOST_TEST(remove_unfinished_checkpoints(dir.path.string()) == 2);
  BOOST_TEST(fs::exists(dir.path / "step-00000005" / "MANIFEST.json"));
  BOOST_TEST(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator{}) == 1);
}

BOOST_AUTO_TEST_CASE(a_failure_trace_reads_back_as_written_and_mistakes_are_located) {
  TempDir dir;
  FailureTrace t;
  t.scenario = "s.yaml";
  t.sets = {"plan.dp=4"};
  t.ranks = 4;
  t.min_ranks = 3;
  t.horizon_s = 60;
  t.checkpoint_interval_s = 2;
  t.checkpoint_cost_s = 0.01;
  t.checkpoint_write_s = 0.5;
  t.detection_s = 0.1;
  t.restart_s = 2.5;
  t.down_s = 5;
  t.failures = {{3.5, 2, "chaos"}, {20, 0, "hang"}};
  const fs::path path = dir.path / "trace.json";
  std::ofstream(path) << to_json(t).dump(1);
  const FailureTrace back = load_failure_trace(path.string());
  BOOST_TEST(to_json(back) == to_json(t));
  ScenarioSpec s;
  apply_failure_trace(back, s);
  BOOST_TEST(s.failures.events.size() == 2u);
  BOOST_TEST(s.failures.events[0].index == 2);
  BOOST_TEST(s.failures.repair.value() == 5);
  BOOST_TEST(int(s.elasticity.policy) == int(ElasticPolicy::Shrink));

  std::string text = to_json(t).dump(1);
  text.replace(text.find("\"horizon_s\""), 11, "\"horizon\"");
  text.replace(text.find("\"slot\": 2"), 9, "\"slot\": 7");
  std::ofstream(path) << text;
  try {
    load_failure_trace(path.string());
    BOOST_FAIL("no error");
  } catch (const InputError& e) {
    std::string all;
    for (const auto& d : e.diagnostics()) all += d.str() + "\n";
    BOOST_TEST_INFO(all);
    BOOST_TEST(all.find("horizon_s") != std::string::npos);  // missing, and the nearest key
    BOOST_TEST(all.find("did you mean 'horizon_s'") != std::string::npos);
    BOOST_TEST(all.find(path.string() + ":") != std::string::npos);  // file:line:col
    BOOST_TEST(all.find("failures[].slot") != std::string::npos);    // 7 is not below 4 ranks
  }
}
