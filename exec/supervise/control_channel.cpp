// The control channel over POSIX sockets: the supervisor polls a listening socket and one
// connection per rank; a rank writes lines.
#include "exec/supervise/control_channel.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace paratwin::exec {

namespace {

constexpr size_t kMaxStrangers = 64;  // connections waiting to say hello

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

sockaddr_in ipv4(const std::string& host, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1)
    throw std::invalid_argument("'" + host + "' is not an IPv4 address such as 127.0.0.1");
  return a;
}

std::string system_error(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

// The field `key` of `j` as a number, or why not.
bool number(const nlohmann::json& j, const char* key, double& out, std::string& why) {
  if (!j.contains(key) || !j[key].is_number()) {
    why = std::string("'") + key + "' is missing or not a number";
    return false;
  }
  out = j[key].get<double>();
  return true;
}

bool count(const nlohmann::json& j, const char* key, int64_t& out, std::string& why) {
  if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() < 0) {
    why = std::string("'") + key + "' is missing or not a whole number >= 0";
    return false;
  }
  out = j[key].get<int64_t>();
  return true;
}

// Compares the secret in time independent of where the texts differ.
bool same_secret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

bool loopback(const std::string& host) {
  return host.rfind("127.", 0) == 0;
}

}  // namespace

ControlLine parse_control_line(std::string_view line) {
  ControlLine out;
  if (line.size() > kMaxControlLine) {
    out.why = "longer than " + std::to_string(kMaxControlLine) + " bytes";
    return out;
  }
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    out.why = "not a JSON object with a 'type'";
    return out;
  }
  const std::string type = j["type"];
  std::string why;
  ControlMessage& m = out.message;
  bool ok = false;
  if (type == "hello") {
    ok = j.contains("token") && j["token"].is_string() && count(j, "rank", out.rank, why) &&
         count(j, "pid", out.pid, why);
    if (ok) out.token = j["token"];
    if (!ok && why.empty()) why = "'token' is missing or not text";
    out.kind = ControlLine::Kind::Hello;
  } else if (type == "step") {
    m.kind = ControlMessage::Kind::Step;
    ok = count(j, "step", m.step, why) && count(j, "steps", m.steps, why) && number(j, "loss", m.loss, why) &&
         number(j, "step_s", m.step_s, why);
  } else if (type == "checkpoint") {
    m.kind = ControlMessage::Kind::Checkpoint;
    ok = count(j, "step", m.step, why) && number(j, "snapshot_s", m.snapshot_s, why) &&
         number(j, "write_s", m.write_s, why);
  } else if (type == "fault") {
    m.kind = ControlMessage::Kind::Fault;
    ok = count(j, "step", m.step, why);
    if (ok && !(j.contains("fault") && j["fault"].is_string())) {
      ok = false;
      why = "'fault' is missing or not text";
    }
    if (ok) m.fault = j["fault"];
  } else if (type == "refused") {
    m.kind = ControlMessage::Kind::Refused;
    ok = j.contains("reason") && j["reason"].is_string();
    if (ok)
      m.reason = j["reason"];
    else
      why = "'reason' is missing or not text";
  } else if (type == "done") {
    m.kind = ControlMessage::Kind::Done;
    ok = true;
  } else {
    why = "unknown type '" + type + "'";
  }
  if (!ok) {
    out.kind = ControlLine::Kind::Malformed;
    out.why = why;
  } else if (type != "hello") {
    out.kind = ControlLine::Kind::Message;
  }
  return out;
}

struct ControlServer::Peer {
  int fd = -1;
  std::string address;  // "127.0.0.1:53012"
  std::string buffer;   // bytes after the last newline
  int rank = -1;        // -1 until a valid hello
  double connected_s = 0;
};

ControlServer::ControlServer(const std::string& address, Log log, double hello_timeout_s)
    : log_(std::move(log)), hello_timeout_s_(hello_timeout_s), host_(address) {
  sockaddr_in a = ipv4(address, 0);
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::runtime_error(system_error("control channel: socket"));
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    // The address is the user's choice (--control-address): one this machine does not have is bad
    // input, refused with exit 2 like a malformed one.
    const std::string why = system_error("control channel: cannot listen on " + address) +
                            " (an address of this machine, e.g. 127.0.0.1)";
    ::close(listen_fd_);
    throw std::invalid_argument(why);
  }
  if (::listen(listen_fd_, 64) != 0) {
    const std::string why = system_error("control channel: cannot listen on " + address);
    ::close(listen_fd_);
    throw std::runtime_error(why);
  }
  socklen_t len = sizeof a;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  started_ = steady_seconds();
  if (!loopback(address))
    log_("control channel: warning: listening on " + address +
         ", not loopback: other machines can connect (they are dropped without the job's secret, which "
         "travels unencrypted on the network)");
}

ControlServer::~ControlServer() {
  for (auto& p : peers_) ::close(p->fd);
  ::close(listen_fd_);
}

std::string ControlServer::endpoint() const {
  return (host_ == "0.0.0.0" ? std::string("127.0.0.1") : host_) + ":" + std::to_string(port_);
}

double ControlServer::now() const {
  return steady_seconds() - started_;
}

void ControlServer::expect(const std::string& token, int ranks) {
  for (auto& p : peers_) ::close(p->fd);
  peers_.clear();
  token_ = token;
  ranks_ = ranks;
  pids_.assign(size_t(ranks), 0);
}

std::vector<ControlMessage> ControlServer::poll(double timeout_s) {
  std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
  for (auto& p : peers_) fds.push_back({p->fd, POLLIN, 0});
  std::vector<ControlMessage> out;
  if (::poll(fds.data(), fds.size(), int(timeout_s * 1000)) > 0) {
    for (size_t i = 1; i < fds.size(); ++i)
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_from(*peers_[i - 1], out);
    if (fds[0].revents & POLLIN) accept_peer();
  }
  // A peer that has not said hello in time holds a connection for nothing (checked when nothing came
  // too: silence is what it does).
  const double t = now();
  for (auto& p : peers_)
    if (p->fd >= 0 && p->rank < 0 && t - p->connected_s > hello_timeout_s_)
      drop_stranger(*p, "said no hello within " + seconds_text(hello_timeout_s_));
  // Connections that ended or were dropped go.
  peers_.erase(std::remove_if(peers_.begin(), peers_.end(), [](const auto& p) { return p->fd < 0; }),
               peers_.end());
  return out;
}

void ControlServer::accept_peer() {
  sockaddr_in from{};
  socklen_t len = sizeof from;
  const int fd =
      ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return;
  char host[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &from.sin_addr, host, sizeof host);
  auto peer = std::make_unique<Peer>(
      Peer{fd, std::string(host) + ":" + std::to_string(ntohs(from.sin_port)), "", -1, now()});
  // A crowd of strangers waiting to say hello: the one waiting longest makes room, so that a rank
  // (which says hello as soon as it connects) still gets in while a flood goes on.
  std::vector<Peer*> waiting;
  for (auto& p : peers_)
    if (p->fd >= 0 && p->rank < 0) waiting.push_back(p.get());
  if (waiting.size() >= kMaxStrangers)
    drop_stranger(
        **std::min_element(waiting.begin(), waiting.end(),
                           [](const Peer* a, const Peer* b) { return a->connected_s < b->connected_s; }),
        std::to_string(kMaxStrangers) + " connections were waiting to say hello; the oldest goes");
  peers_.push_back(std::move(peer));
}

void ControlServer::drop_stranger(Peer& peer, const std::string& why) {
  ++strangers_dropped_;
  if (strangers_dropped_ <= 20 || strangers_dropped_ % 1000 == 0)
    log_("control channel: dropped unknown peer " + peer.address + " (" + why +
         ") and closed its connection" +
         (strangers_dropped_ > 20 ? "; " + std::to_string(strangers_dropped_) + " dropped so far" : ""));
  ::close(peer.fd);
  peer.fd = -1;
}

void ControlServer::read_from(Peer& peer, std::vector<ControlMessage>& out) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(peer.fd, buf, sizeof buf, 0);
    if (n > 0) {
      peer.buffer.append(buf, size_t(n));
      size_t newline;
      while (peer.fd >= 0 && (newline = peer.buffer.find('\n')) != std::string::npos) {
        const std::string line = peer.buffer.substr(0, newline);
        peer.buffer.erase(0, newline + 1);
        handle_line(peer, line, out);
      }
      if (peer.fd >= 0 && peer.buffer.size() > kMaxControlLine) {
        if (peer.rank < 0) {
          drop_stranger(peer, "an oversized message");
        } else {
          log_("control channel: dropped an oversized message from rank " + std::to_string(peer.rank) +
               " and closed its connection");
          close(peer, out);
        }
      }
      if (peer.fd < 0) return;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n < 0 && errno == EINTR) continue;
    // The peer's end closed: a known rank's process ended or dropped the channel.
    close(peer, out);
    return;
  }
}

void ControlServer::close(Peer& peer, std::vector<ControlMessage>& out) {
  if (peer.rank >= 0) {
    ControlMessage m;
    m.kind = ControlMessage::Kind::Closed;
    m.rank = peer.rank;
    m.received_s = now();
    out.push_back(m);
  }
  ::close(peer.fd);
  peer.fd = -1;
}

void ControlServer::handle_line(Peer& peer, const std::string& line, std::vector<ControlMessage>& out) {
  const ControlLine parsed = parse_control_line(line);
  if (peer.rank < 0) {
    // Only a hello with this job's secret for a free rank makes a peer known.
    const bool hello = parsed.kind == ControlLine::Kind::Hello && same_secret(parsed.token, token_) &&
                       parsed.rank < ranks_ && pids_[size_t(parsed.rank)] == 0;
    if (!hello)
      return drop_stranger(peer, "its first message is not a hello with this job's secret for a free rank");
    peer.rank = int(parsed.rank);
    pids_[size_t(parsed.rank)] = int(parsed.pid);
    return;
  }
  if (parsed.kind != ControlLine::Kind::Message) {
    log_("control channel: dropped a malformed message from rank " + std::to_string(peer.rank) + ": " +
         (parsed.kind == ControlLine::Kind::Hello ? std::string("a second hello") : parsed.why));
    return;
  }
  ControlMessage m = parsed.message;
  m.rank = peer.rank;
  m.received_s = now();
  out.push_back(m);
}

ControlClient::ControlClient(const std::string& endpoint, const std::string& token, int rank) {
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos)
    throw std::runtime_error("control channel: bad endpoint '" + endpoint + "'");
  sockaddr_in a = ipv4(endpoint.substr(0, colon), std::atoi(endpoint.c_str() + colon + 1));
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    const std::string why = system_error("control channel: cannot connect to " + endpoint);
    if (fd_ >= 0) ::close(fd_);
    throw std::runtime_error(why);
  }
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  send({{"type", "hello"}, {"token", token}, {"rank", rank}, {"pid", int(::getpid())}});
}

ControlClient::~ControlClient() {
  ::close(fd_);
}

void ControlClient::send(const nlohmann::json& message) {
  const std::string line = message.dump() + "\n";
  std::lock_guard lock(mutex_);
  size_t sent = 0;
  while (sent < line.size()) {
    const ssize_t n = ::send(fd_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the supervisor is gone; training goes on without it
    sent += size_t(n);
  }
}

}  // namespace paratwin::exec
