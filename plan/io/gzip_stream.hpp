// Gzip (RFC 1952) through zlib: an output stream that compresses as it is written, so that a large
// trace is never held whole, and the reverse for readers of `.gz` files.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <string_view>

namespace paratwin {

// An std::ostream whose bytes reach `sink` gzip-compressed. finish() writes the gzip trailer; it
// must be called before `sink` is closed (the destructor does not, so that an abandoned stream
// leaves no valid-looking file). Throws std::runtime_error when zlib fails.
class GzipOStream : public std::ostream {
 public:
  explicit GzipOStream(std::ostream& sink);
  ~GzipOStream() override;
  GzipOStream(const GzipOStream&) = delete;
  GzipOStream& operator=(const GzipOStream&) = delete;

  void finish();

 private:
  class Buffer;
  std::unique_ptr<Buffer> buffer_;
};

// True when `path` names a gzip file by its suffix (".gz").
bool is_gzip_path(std::string_view path);
// True when `data` begins with the gzip magic bytes.
bool looks_gzipped(std::string_view data);
// The uncompressed bytes of gzip `data` (concatenated members too). Throws std::runtime_error
// saying what is wrong when `data` is not whole, valid gzip.
std::string gunzip(std::string_view data);

}  // namespace paratwin
