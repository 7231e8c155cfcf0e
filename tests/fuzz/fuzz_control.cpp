// libFuzzer target: any bytes a peer sends on the control channel. Each line is parsed as the server
// parses it, and the bytes are also sent through a real connection to a ControlServer expecting a
// 2-rank job: the server logs and drops what it must, and never stops.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "exec/supervise/control_channel.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static paratwin::exec::ControlServer server("127.0.0.1", [](const std::string&) {});
  static const bool expecting = (server.expect("secret", 2), true);
  (void)expecting;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (size_t begin = 0; begin <= text.size();) {
    const size_t end = std::min(text.find('\n', begin), text.size());
    const paratwin::exec::ControlLine line =
        paratwin::exec::parse_control_line(text.substr(begin, end - begin));
    if (line.kind == paratwin::exec::ControlLine::Kind::Malformed && line.why.empty()) __builtin_trap();
    begin = end + 1;
  }
  const std::string endpoint = server.endpoint();
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(std::stoi(endpoint.substr(endpoint.rfind(':') + 1))));
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    server.poll(0);  // accepts
    [[maybe_unused]] const ssize_t sent = ::send(fd, data, size, MSG_NOSIGNAL);
    ::close(fd);
    for (int i = 0; i < 3; ++i) server.poll(0);  // reads, then sees the end
  } else {
    ::close(fd);
  }
  server.expect("secret", 2);  // a known rank of this input does not carry over to the next
  return 0;
}
