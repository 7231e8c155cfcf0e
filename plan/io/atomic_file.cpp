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
#include <tuple>

namespace paratwin {

namespace {

[[noreturn]] void fail(const std::string& path, const char* what) {
  throw std::runtime_error("cannot write " + path + ": " + what + ": " + std::strerror(errno));
}

// A temporary file beside `path` (so that the rename stays within one file system), open for writing.
std::pair<std::string, int> temporary_beside(const std::string& path) {
  std::filesystem::path target(path);
  std::string tmp = (target.parent_path() / ("." + target.filename().string() + ".tmpXXXXXX")).string();
  if (target.parent_path().empty()) tmp = "." + target.filename().string() + ".tmpXXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) fail(path, "creating a temporary file");
  return {tmp, fd};
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)) {
  if (path_ == "-") return;
  int fd = -1;
  std::tie(tmp_, fd) = temporary_beside(path_);
  ::close(fd);
  file_ = std::make_unique<std::ofstream>(tmp_, std::ios::binary | std::ios::trunc);
  if (!*file_) {
    ::unlink(tmp_.c_str());
    fail(path_, "opening the temporary file");
  }
}

AtomicFileWriter::~AtomicFileWriter() {
  if (file_ && !committed_) {
    file_->close();
    ::unlink(tmp_.c_str());
  }
}

std::ostream& AtomicFileWriter::stream() {
  return file_ ? static_cast<std::ostream&>(*file_) : std::cout;
}

void AtomicFileWriter::commit(bool sync) {
  if (!file_) {
    std::cout << std::flush;
    return;
  }
  file_->close();
  if (!*file_) fail(path_, "writing");
  const int fd = ::open(tmp_.c_str(), O_RDONLY);
  if (fd < 0 || (sync && ::fsync(fd) != 0) || ::fchmod(fd, 0644) != 0) {
    if (fd >= 0) ::close(fd);
    fail(path_, "flushing");
  }
  ::close(fd);
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) fail(path_, "renaming the temporary file");
  committed_ = true;
}

void write_file_atomically(const std::string& path, std::string_view content, bool sync) {
  if (path == "-") {
    std::cout << content << std::flush;
    return;
  }
  const auto [tmp, fd] = temporary_beside(path);
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      ::unlink(tmp.c_str());
      fail(path, "writing");
    }
    written += static_cast<size_t>(n);
  }
  if ((sync && ::fsync(fd) != 0) || ::fchmod(fd, 0644) != 0) {
    ::close(fd);
    ::unlink(tmp.c_str());
    fail(path, "flushing");
  }
  ::close(fd);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    fail(path, "renaming the temporary file");
  }
}

}  // namespace paratwin
