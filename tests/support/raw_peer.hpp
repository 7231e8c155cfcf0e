// A peer of the control channel that speaks raw text, for the tests of what strangers send it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include <boost/test/unit_test.hpp>

namespace paratwin_test {

struct RawPeer {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  // Connects to "host:port" on loopback.
  explicit RawPeer(const std::string& endpoint) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(std::stoi(endpoint.substr(endpoint.rfind(':') + 1))));
    ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    BOOST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  }
  ~RawPeer() { ::close(fd); }
  RawPeer(const RawPeer&) = delete;
  RawPeer& operator=(const RawPeer&) = delete;
  // All of `text`, or as much as the other end takes before it closes the connection.
  void send(const std::string& text) {
    for (size_t sent = 0; sent < text.size();) {
      const ssize_t n = ::send(fd, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += size_t(n);
    }
  }
};

}  // namespace paratwin_test
