// The control channel between `paratwin run` (the supervisor) and its ranks: one TCP connection per
// rank, on loopback unless an address is configured, carrying one JSON object per line. A rank first
// says hello with the job's token; then heartbeats (step, loss, step time), finished checkpoints,
// injected faults and the end. A connection without a valid hello (an unknown peer) and a malformed
// message are dropped and logged; nothing a peer sends can stop the supervisor.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace paratwin::exec {

struct ControlMessage {
  enum class Kind { Step, Checkpoint, Fault, Refused, Done, Closed };
  Kind kind = Kind::Step;
  int rank = 0;
  int64_t step = 0;       // Step: steps done; Checkpoint: its step; Fault: the step it fired at
  int64_t steps = 0;      // Step: of the whole run
  double loss = 0;        // Step
  double step_s = 0;      // Step: how long the step took
  double snapshot_s = 0;  // Checkpoint: training held up by its snapshot
  double write_s = 0;     // Checkpoint: its write to disk, behind the training
  std::string fault;      // Fault: kill, hang, slow
  std::string reason;     // Refused: why the rank cannot run the job (bad input: a restart fails alike)
  double received_s = 0;  // the supervisor's clock (ControlServer::now())
};

// One line a peer sent, parsed: a hello (the job's secret, a rank and its pid), a message of a known
// rank, or something to drop with the reason. Pure, so that it can be fuzzed.
struct ControlLine {
  enum class Kind { Hello, Message, Malformed };
  Kind kind = Kind::Malformed;
  std::string token;  // Hello
  int64_t rank = -1, pid = 0;
  ControlMessage message;  // Message (its rank and time are the server's to set)
  std::string why;         // Malformed
};
ControlLine parse_control_line(std::string_view line);

// The most a message may hold: a heartbeat is under 200 bytes.
inline constexpr size_t kMaxControlLine = 4096;

class ControlServer {
 public:
  using Log = std::function<void(const std::string&)>;

  // Listens on `address` (IPv4, e.g. 127.0.0.1 or an interface's address), on a port the system picks;
  // an address other than loopback is logged as a warning (other machines can connect; they are
  // dropped without the job's secret, which travels unencrypted). A connection that has not said hello
  // within `hello_timeout_s` is dropped; past 64 waiting to say hello, the oldest of them is. Throws
  // std::invalid_argument for an address that is not IPv4 dotted decimal and std::runtime_error when
  // it cannot listen there.
  ControlServer(const std::string& address, Log log, double hello_timeout_s = 10);
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  std::string endpoint() const;  // "host:port" for the ranks (loopback when listening on 0.0.0.0)
  double now() const;            // seconds since the server started (steady clock)

  // A new job: closes every connection; from now on only a hello with `token` and a rank below
  // `ranks` not yet connected makes a peer known.
  void expect(const std::string& token, int ranks);
  // Waits up to `timeout_s` for traffic; returns the valid messages, and Closed for a known rank
  // whose connection ended.
  std::vector<ControlMessage> poll(double timeout_s);
  // Each rank's process id from its hello; 0 for a rank not connected.
  const std::vector<int>& pids() const { return pids_; }

 private:
  struct Peer;
  void accept_peer();
  void read_from(Peer& peer, std::vector<ControlMessage>& out);
  void close(Peer& peer, std::vector<ControlMessage>& out);  // Closed for a known rank
  void handle_line(Peer& peer, const std::string& line, std::vector<ControlMessage>& out);
  // Drops an unknown peer, logging it (after the first 20, one in 1000: a flood does not flood the log).
  void drop_stranger(Peer& peer, const std::string& why);

  Log log_;
  double hello_timeout_s_;
  int64_t strangers_dropped_ = 0;
  int listen_fd_ = -1;
  std::string host_;
  int port_ = 0;
  std::string token_;
  int ranks_ = 0;
  std::vector<int> pids_;
  std::vector<std::unique_ptr<Peer>> peers_;
  double started_ = 0;
};

// A rank's end of the channel.
class ControlClient {
 public:
  // Connects to "host:port" and says hello as `rank` of the job with `token`. Throws
  // std::runtime_error when it cannot connect.
  ControlClient(const std::string& endpoint, const std::string& token, int rank);
  ~ControlClient();
  ControlClient(const ControlClient&) = delete;
  ControlClient& operator=(const ControlClient&) = delete;

  // Sends one message; callable from any thread. A supervisor gone away is not an error here.
  void send(const nlohmann::json& message);

 private:
  int fd_ = -1;
  std::mutex mutex_;
};

}  // namespace paratwin::exec
