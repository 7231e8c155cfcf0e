// Hostile input to the live side: checkpoints and token files from elsewhere (refused before anything is
// read or allocated for them), the control channel's strangers (dropped while the job trains on, its
// secret never on a command line), and bad input refused before any rank starts (exit status 2).
#define BOOST_TEST_MODULE hostile_exec
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include <nlohmann/json.hpp>

#include "exec/checkpoint/checkpoint.hpp"
#include "exec/data/token_file.hpp"
#include "exec/supervise/control_channel.hpp"
#include "paratwin_process.hpp"
#include "plan/spec/diagnostics.hpp"
#include "raw_peer.hpp"
#include "source_tree.hpp"

using namespace paratwin;
using namespace paratwin::exec;
using namespace paratwin_test;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("paratwin-hostile-exec-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

const std::string kScenario = paratwin_test::source_dir() + "/scenarios/live-cpu-tiny.yaml";
const std::string kSmall =
    " --set training.seq_len=32 --set training.global_batch=4 --set plan.micro_batch=1";
constexpr size_t kParameters = 64;

// A checkpoint of 64 parameters at step 3, written by save_checkpoint; returns its directory.
fs::path good_checkpoint(const fs::path& dir) {
  TrainingState s;
  s.step = 3;
  s.data_sequence = 12;
  s.seed = 1;
  s.dp = 2;
  s.global_batch = 4;
  s.model = "tiny-gpt";
  s.plan_yaml = "dp: 2\n";
  s.losses = {5.5, 5.4, 5.3};
  s.weights.assign(kParameters, 0.5f);
  s.adam_m.assign(kParameters, 0.1f);
  s.adam_v.assign(kParameters, 0.2f);
  return save_checkpoint(dir.string(), s);
}

nlohmann::json manifest_of(const fs::path& checkpoint) {
  return nlohmann::json::parse(slurp(checkpoint / "MANIFEST.json"));
}

void write_manifest(const fs::path& checkpoint, const nlohmann::json& manifest) {
  std::ofstream(checkpoint / "MANIFEST.json", std::ios::trunc) << manifest.dump(1);
}

std::string why_refused(const fs::path& checkpoint) {
  try {
    load_checkpoint(checkpoint.string(), kParameters);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  BOOST_FAIL("the checkpoint was accepted");
  return "";
}

// Every process's command line and environment, as far as /proc lets this user read them.
std::vector<std::pair<std::string, std::string>> processes() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    out.push_back({slurp(entry.path() / "cmdline"), slurp(entry.path() / "environ")});
  }
  return out;
}

}  // namespace

// ---- Checkpoints ------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(a_checkpoint_from_elsewhere_is_checked_before_anything_is_read) {
  TempDir dir;
  const fs::path ckpt = good_checkpoint(dir.path / "ckpt");
  BOOST_TEST(load_checkpoint(ckpt.string(), kParameters).losses.size() == 3u);
  const nlohmann::json good = manifest_of(ckpt);

  // A manifest naming a path outside its directory.
  nlohmann::json m = good;
  m["files"]["../../etc/passwd"] = {{"bytes", 10}, {"fnv1a64", "0000000000000000"}};
  write_manifest(ckpt, m);
  BOOST_TEST(why_refused(ckpt).find("names '../../etc/passwd', a path outside the checkpoint's directory") !=
             std::string::npos);
  // Absurd sizes: refused from the manifest alone (reading 2^60 bytes would not end well).
  m = good;
  m["files"]["state.json"]["bytes"] = uint64_t(1) << 60;
  write_manifest(ckpt, m);
  BOOST_TEST(why_refused(ckpt).find("state.json is 1152921504606846976 bytes by the manifest, more than") !=
             std::string::npos);
  m = good;
  m["files"]["weights.bin"]["bytes"] = 1 << 30;
  write_manifest(ckpt, m);
  BOOST_TEST(why_refused(ckpt).find("weights.bin is 1073741824 bytes by the manifest; this model's 64 "
                                    "parameters need 256") != std::string::npos);
  m = good;
  m["files"]["plan.yaml"]["bytes"] = -5;
  write_manifest(ckpt, m);
  BOOST_TEST(why_refused(ckpt).find("plan.yaml.bytes is missing or not a size") != std::string::npos);
  // Sizes that do not match the files on disk.
  write_manifest(ckpt, good);
  std::ofstream(ckpt / "plan.yaml", std::ios::app) << "extra: 1\n";
  BOOST_TEST(why_refused(ckpt).find("plan.yaml is larger than its manifest says") != std::string::npos);
  // A link in place of a file (it could point anywhere: here, at a file that never ends).
  fs::remove(ckpt / "plan.yaml");
  fs::create_symlink("/dev/zero", ckpt / "plan.yaml");
  BOOST_TEST(why_refused(ckpt).find("plan.yaml is a link; a checkpoint holds plain files") !=
             std::string::npos);
  // A manifest that is no manifest, and one far too large.
  std::ofstream(ckpt / "MANIFEST.json", std::ios::trunc) << "[1, 2]";
  BOOST_TEST(why_refused(ckpt).find("MANIFEST.json is not a JSON object") != std::string::npos);
  std::ofstream(ckpt / "MANIFEST.json", std::ios::trunc) << std::string(1 << 20, ' ');
  BOOST_TEST(why_refused(ckpt).find("MANIFEST.json holds 1048576 bytes, more than") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_state_with_mistyped_fields_is_refused_saying_which) {
  BOOST_CHECK_NO_THROW(parse_checkpoint_state(
      R"({"step": 1, "data_sequence": 4, "seed": 1, "dp": 1, "global_batch": 4, "model": "m", "losses": [1.5]})"));
  auto why = [](const std::string& text) {
    try {
      parse_checkpoint_state(text);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  BOOST_TEST(why(R"({"step": "1"})") == "state.json: 'step' is missing or not a whole number >= 0");
  BOOST_TEST(why(R"({"step": 1, "data_sequence": 0, "seed": -3})") ==
             "state.json: 'seed' is missing or not a seed");
  BOOST_TEST(why(R"({"step": 1, "data_sequence": 0, "seed": 1, "dp": 99999999999, "global_batch": 1})") ==
             "state.json: 'dp' is out of range");
  BOOST_TEST(
      why(R"({"step": 1, "data_sequence": 0, "seed": 1, "dp": 1, "global_batch": 4, "model": "m", "losses": [1, "x"]})") ==
      "state.json: 'losses' holds something that is not a number");
}

// ---- Token files ------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(a_token_file_promising_more_than_it_holds_is_refused_before_allocating) {
  TempDir dir;
  int32_t header[256] = {20240520, 1, 2147483647};  // 4 GiB of tokens promised in a 1 KiB file
  std::ofstream(dir.path / "lie.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(header), sizeof header);
  try {
    read_token_file((dir.path / "lie.bin").string());
    BOOST_FAIL("expected InputError");
  } catch (const InputError& e) {
    BOOST_TEST(
        std::string(e.what()).find("truncated: the header promises 2147483647 tokens, the file holds 0") !=
        std::string::npos);
  }
  BOOST_CHECK_THROW(parse_token_file(std::string(100, 'x'), "short.bin"), InputError);
  // The data check before a run: the count and the largest token, read a chunk at a time.
  write_token_file((dir.path / "ok.bin").string(), {1, 7, 300, 2});
  const TokenSource source = inspect_tokens((dir.path / "ok.bin").string());
  BOOST_TEST(source.tokens == 4u);
  BOOST_TEST(source.largest == 300);
}

// ---- The control channel ----------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(control_lines_parse_into_hellos_messages_or_reasons) {
  BOOST_TEST(int(parse_control_line(R"({"type":"hello","token":"s","rank":1,"pid":7})").kind) ==
             int(ControlLine::Kind::Hello));
  const ControlLine refused = parse_control_line(R"({"type":"refused","reason":"bad data"})");
  BOOST_TEST(int(refused.kind) == int(ControlLine::Kind::Message));
  BOOST_TEST(int(refused.message.kind) == int(ControlMessage::Kind::Refused));
  BOOST_TEST(refused.message.reason == "bad data");
  BOOST_TEST(parse_control_line(R"({"type":"hello","token":5,"rank":1,"pid":7})").why ==
             "'token' is missing or not text");
  BOOST_TEST(parse_control_line(std::string(kMaxControlLine + 1, '{')).why == "longer than 4096 bytes");
}

BOOST_AUTO_TEST_CASE(strangers_that_say_nothing_or_come_in_crowds_are_dropped) {
  // Polls until `done` holds, or for at most `seconds`: a loaded machine accepts and times out the
  // connections late, so the test waits for the outcome rather than for a fixed time.
  auto poll_until = [](ControlServer& server, double seconds, auto done) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!done() && std::chrono::steady_clock::now() < until) server.poll(0.01);
  };
  auto poll_for = [&](ControlServer& server, double seconds) {
    poll_until(server, seconds, [] { return false; });
  };
  // A crowd: past 64 connections waiting to say hello, the oldest waiting makes room for the next.
  std::vector<std::string> log;
  ControlServer server(
      "127.0.0.1", [&](const std::string& m) { log.push_back(m); }, 30);
  server.expect("secret", 1);
  std::vector<std::unique_ptr<RawPeer>> crowd;
  for (int i = 0; i < 70; ++i) {
    crowd.push_back(std::make_unique<RawPeer>(server.endpoint()));
    server.poll(0.01);
  }
  poll_until(server, 10, [&] { return log.size() >= 6u; });
  poll_for(server, 0.2);  // and no more than that
  BOOST_REQUIRE(log.size() == 6u);
  BOOST_TEST(
      log.front().find("64 connections were waiting to say hello; the oldest goes") != std::string::npos,
      log.front());
  // The rank itself still gets in.
  ControlClient rank(server.endpoint(), "secret", 0);
  const auto later = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (server.pids()[0] == 0 && std::chrono::steady_clock::now() < later) server.poll(0.02);
  BOOST_TEST(server.pids()[0] == int(::getpid()));
  // Silent ones go after the hello timeout; past 20, one drop in a thousand is logged.
  std::vector<std::string> quiet_log;
  ControlServer quiet(
      "127.0.0.1", [&](const std::string& m) { quiet_log.push_back(m); }, 0.2);
  quiet.expect("secret", 1);
  std::vector<std::unique_ptr<RawPeer>> silent;
  for (int i = 0; i < 25; ++i) {
    silent.push_back(std::make_unique<RawPeer>(quiet.endpoint()));
    quiet.poll(0.01);
  }
  poll_until(quiet, 10, [&] { return quiet_log.size() >= 20u; });
  poll_for(quiet, 0.5);  // the other 5 go unlogged
  BOOST_TEST(quiet_log.size() == 20u);
  BOOST_TEST(quiet_log.back().find("said no hello within 0.2 s") != std::string::npos, quiet_log.back());
  // Listening beyond this machine says so.
  std::vector<std::string> warned;
  ControlServer everywhere("0.0.0.0", [&](const std::string& m) { warned.push_back(m); });
  BOOST_REQUIRE(warned.size() == 1u);
  BOOST_TEST(warned[0].find("warning: listening on 0.0.0.0, not loopback") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_foreign_connection_is_dropped_while_the_job_trains_on) {
  TempDir dir;
  const std::string command = paratwin_test::bin_dir() + "/paratwin run " + kScenario + kSmall +
                              " --backend cpu --ranks 2 --steps 100 2>&1";
  std::fflush(nullptr);
  FILE* run = ::popen(command.c_str(), "r");
  BOOST_REQUIRE(run);
  std::string text, line;
  char buf[4096];
  int port = 0;
  bool foreign_sent = false, secret_checked = false;
  const std::regex endpoint("heartbeats on 127\\.0\\.0\\.1:([0-9]+)");
  while (std::fgets(buf, sizeof buf, run)) {
    text += buf;
    std::smatch match;
    const std::string current = buf;
    if (!port && std::regex_search(current, match, endpoint)) port = std::stoi(match[1]);
    // Once training is under way: strangers knock, and the job's secret is looked for on command lines.
    if (port && !foreign_sent && current.find("step     2/") != std::string::npos) {
      const std::string at = "127.0.0.1:" + std::to_string(port);
      RawPeer guess(at), heartbeat(at), flood(at);
      guess.send(R"({"type":"hello","token":"0123456789abcdef0123456789abcdef","rank":0,"pid":1})"
                 "\n");
      heartbeat.send(R"({"type":"step","step":40,"steps":40,"loss":0,"step_s":0})"
                     "\n");
      flood.send(std::string(100000, 'x'));
      foreign_sent = true;
      std::string secret;
      for (const auto& [cmdline, environ] : processes())
        if (const size_t at = environ.find("PARATWIN_CONTROL_TOKEN=");
            at != std::string::npos && secret.empty())
          secret = environ.substr(at + 23, environ.find('\0', at) - at - 23);
      BOOST_TEST(secret.size() == 32u);  // the ranks have it, in their environment
      bool on_a_command_line = false;
      for (const auto& [cmdline, environ] : processes())
        on_a_command_line |= cmdline.find(secret) != std::string::npos;
      BOOST_TEST(!on_a_command_line);
      secret_checked = true;
    }
  }
  const int status = ::pclose(run);
  BOOST_TEST_INFO(text);
  BOOST_TEST(foreign_sent);
  BOOST_TEST(secret_checked);
  BOOST_TEST(WIFEXITED(status));
  BOOST_TEST(WEXITSTATUS(status) == 0);
  BOOST_TEST(text.find("step   100/100") != std::string::npos);                   // trained on to the end
  BOOST_TEST(text.find("dropped unknown peer 127.0.0.1:") != std::string::npos);  // and said so
  BOOST_TEST(text.find("the job is stopped") == std::string::npos);               // nothing was restarted
}

// ---- Errors at the right depth ------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(a_rank_that_finds_its_input_bad_stops_the_job_without_a_restart) {
  TempDir dir;
  const fs::path ckpt = dir.path / "ckpt";
  const std::string run = "run " + kScenario + kSmall + " --ranks 2 --checkpoint-dir " + ckpt.string();
  BOOST_REQUIRE(paratwin_test::paratwin(run + " --steps 2 --checkpoint-every 2").status == 0);
  // Step 2 becomes a checkpoint of another model (its checksum kept right), and a newer step 9 a copy
  // of it with tiny-gpt's state but corrupt weights. Before launch the newest names tiny-gpt; in the
  // rank it is rejected (checksum) and the older one is of another model: only the rank can tell.
  const fs::path two = ckpt / "step-00000002", nine = ckpt / "step-00000009";
  fs::copy(two, nine);
  nlohmann::json state = nlohmann::json::parse(slurp(two / "state.json"));
  state["model"] = "other-model";
  const std::string text = state.dump(1) + "\n";
  std::ofstream(two / "state.json", std::ios::trunc) << text;
  nlohmann::json manifest = nlohmann::json::parse(slurp(two / "MANIFEST.json"));
  char sum[17];
  std::snprintf(sum, sizeof sum, "%016llx",
                static_cast<unsigned long long>(fnv1a64(text.data(), text.size())));
  manifest["files"]["state.json"] = {{"bytes", text.size()}, {"fnv1a64", sum}};
  write_manifest(two, manifest);
  {
    std::fstream weights(nine / "weights.bin", std::ios::in | std::ios::out | std::ios::binary);
    weights.seekp(10);
    weights.put('\x7f');
  }
  const Result r = paratwin_test::paratwin(run + " --steps 4 --resume");
  BOOST_TEST_INFO(r.out + r.err);
  BOOST_TEST(r.status == 2);
  // The supervisor's report carries the rank's reason (the rank's own stderr may be cut short when
  // mpirun stops the job).
  BOOST_TEST(r.out.find("cannot run the job: " + two.string() +
                        ": error: the checkpoint is of model other-model") != std::string::npos);
  BOOST_TEST(r.out.find("not restarting: the job's input is bad") != std::string::npos);
  BOOST_TEST(r.out.find("the job is stopped") == std::string::npos);  // no failure counted, no restart
}

BOOST_AUTO_TEST_CASE(bad_input_is_refused_before_any_rank_starts) {
  TempDir dir;
  // Data with a token outside tiny-gpt's 256-entry vocabulary.
  write_token_file((dir.path / "wide.bin").string(), std::vector<uint16_t>(100, 300));
  Result r = paratwin_test::paratwin("run " + kScenario + kSmall + " --ranks 2 --steps 2 --data " +
                                     (dir.path / "wide.bin").string());
  BOOST_TEST(r.status == 2);
  BOOST_TEST(r.err.find("the corpus holds token 300, outside the model's vocabulary of 256 (model.vocab)") !=
                 std::string::npos,
             r.err);
  BOOST_TEST(r.out.find("supervising") == std::string::npos);  // no rank was started
  // Data that is no token file.
  std::ofstream(dir.path / "no.bin") << "hello";
  r = paratwin_test::paratwin("run " + kScenario + kSmall + " --ranks 2 --steps 2 --data " +
                              (dir.path / "no.bin").string());
  BOOST_TEST(r.status == 2);
  BOOST_TEST(r.err.find("not a token file: shorter than its 1024-byte header") != std::string::npos, r.err);
  // A checkpoint of another global batch, resumed.
  good_checkpoint(dir.path / "ckpt");
  r = paratwin_test::paratwin("run " + kScenario + kSmall +
                              " --ranks 2 --steps 2 --resume --checkpoint-dir " +
                              (dir.path / "ckpt").string() + " --set training.global_batch=8");
  BOOST_TEST(r.status == 2);
  BOOST_TEST(
      r.err.find("the newest checkpoint is of model tiny-gpt with global batch 4; this run trains tiny-gpt "
                 "with global batch 8") != std::string::npos,
      r.err);
  // A checkpoint directory that cannot be made (under a file): refused, not launched and retried.
  std::ofstream(dir.path / "a-file") << "x";
  r = paratwin_test::paratwin("run " + kScenario + kSmall + " --ranks 2 --steps 2 --checkpoint-dir " +
                              (dir.path / "a-file" / "ckpt").string());
  BOOST_TEST(r.status == 2);
  BOOST_TEST(
      r.err.find("error: cannot create the checkpoint directory: Not a directory") != std::string::npos,
      r.err);
  BOOST_TEST(r.out.find("supervising") == std::string::npos);
  // A job larger than this machine's memory by the twin's model.
  r = paratwin_test::paratwin("run " + kScenario +
                              " --ranks 2 --steps 2 --set model.hidden=16384 --set model.layers=64 "
                              "--set model.ffn_hidden=65536 --set model.heads=128 --set model.kv_heads=128");
  BOOST_TEST(r.status == 2);
  BOOST_TEST(r.err.find("ranks need about") != std::string::npos, r.err);
  BOOST_TEST(r.err.find("more than this machine's") != std::string::npos, r.err);
  BOOST_TEST(r.out.find("supervising") == std::string::npos);
  // A run without steps.
  std::string without = slurp(kScenario);
  without.erase(without.find("  steps: 50"),
                without.find('\n', without.find("  steps: 50")) - without.find("  steps: 50"));
  std::ofstream(dir.path / "no-steps.yaml") << without;
  r = paratwin_test::paratwin("run " + (dir.path / "no-steps.yaml").string() + " --ranks 2");
  BOOST_TEST(r.status == 2);
  BOOST_TEST(r.err.find("the run has no steps: give training.steps or --steps") != std::string::npos, r.err);
  // Steps whose tokens no 64-bit count holds.
  r = paratwin_test::paratwin("run " + kScenario + " --ranks 2 --steps 9000000000000000000");
  BOOST_TEST(r.status == 2);
  BOOST_TEST(r.err.find("are more tokens than a 64-bit count holds") != std::string::npos, r.err);
  // A plan the CUDA backend cannot run (or a machine without a GPU): refused here, never launched.
  r = paratwin_test::paratwin("run " + kScenario + " --backend cuda --ranks 2 --steps 2");
  BOOST_TEST(r.status == 2);
  BOOST_TEST(r.out.find("supervising") == std::string::npos);
}
