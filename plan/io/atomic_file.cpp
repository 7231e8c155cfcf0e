// Atomic file replacement with POSIX calls (rename is atomic within one file system).
#include "plan/io/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <stdexcept>

namespace paratwin {

void write_file_atomically(const std::string& path, std::string_view content, bool sync) {
  if (path == "-") {
    std::cout << content << std::flush;
    return;
  }
  const auto fail = [&path](const char* what) {
    throw std::runtime_error("cannot write " + path + ": " + what + ": " + std::strerror(errno));
  };
  std::filesystem::path target(path);
  std::string tmp = (target.parent_path() / ("." + target.filename().string() + ".tmpXXXXXX")).string();
  if (target.parent_path().empty()) tmp = "." + target.filename().string() + ".tmpXXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) fail("creating a temporary file");
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      ::unlink(tmp.c_str());
      fail("writing");
    }
    written += static_cast<size_t>(n);
  }
  if ((sync && ::fsync(fd) != 0) || ::fchmod(fd, 0644) != 0) {
    ::close(fd);
    ::unlink(tmp.c_str());
    fail("flushing");
  }
  ::close(fd);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    fail("renaming the temporary file");
  }
}

}  // namespace paratwin
