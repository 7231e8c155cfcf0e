// zlib's deflate and inflate with windowBits 16 + 15: gzip framing, the full 32 KiB window.
#include "plan/io/gzip_stream.hpp"

#include <zlib.h>

#include <array>
#include <cstdint>
#include <stdexcept>
#include <streambuf>

namespace paratwin {

namespace {

constexpr int kGzipWindowBits = 16 + MAX_WBITS;
constexpr size_t kChunk = size_t(1) << 16;

[[noreturn]] void zlib_failed(const char* what, const z_stream& z, int code) {
  throw std::runtime_error(std::string("gzip: ") + what + ": " + (z.msg ? z.msg : zError(code)));
}

}  // namespace

// Collects written bytes in `in_` and deflates them into `sink` a chunk at a time.
class GzipOStream::Buffer : public std::streambuf {
 public:
  explicit Buffer(std::ostream& sink) : sink_(sink) {
    if (const int rc =
            deflateInit2(&z_, Z_DEFAULT_COMPRESSION, Z_DEFLATED, kGzipWindowBits, 8, Z_DEFAULT_STRATEGY);
        rc != Z_OK)
      zlib_failed("starting compression", z_, rc);
    setp(in_.data(), in_.data() + in_.size());
  }
  ~Buffer() override { deflateEnd(&z_); }

  void finish() {
    if (finished_) return;
    deflate_pending(Z_FINISH);
    finished_ = true;
  }

 protected:
  int_type overflow(int_type ch) override {
    if (finished_) return traits_type::eof();
    deflate_pending(Z_NO_FLUSH);
    if (!traits_type::eq_int_type(ch, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(ch);
      pbump(1);
    }
    return traits_type::not_eof(ch);
  }

 private:
  // Deflates what was written since the last call; Z_FINISH also ends the gzip member.
  void deflate_pending(int flush) {
    z_.next_in = reinterpret_cast<Bytef*>(pbase());
    z_.avail_in = static_cast<uInt>(pptr() - pbase());
    int rc = Z_OK;
    do {
      z_.next_out = reinterpret_cast<Bytef*>(out_.data());
      z_.avail_out = static_cast<uInt>(out_.size());
      rc = deflate(&z_, flush);
      if (rc == Z_STREAM_ERROR) zlib_failed("compressing", z_, rc);
      sink_.write(out_.data(), std::streamsize(out_.size() - z_.avail_out));
    } while (z_.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
    setp(in_.data(), in_.data() + in_.size());
  }

  std::ostream& sink_;
  z_stream z_{};
  std::array<char, kChunk> in_{}, out_{};
  bool finished_ = false;
};

GzipOStream::GzipOStream(std::ostream& sink)
    : std::ostream(nullptr), buffer_(std::make_unique<Buffer>(sink)) {
  rdbuf(buffer_.get());
}

GzipOStream::~GzipOStream() = default;

void GzipOStream::finish() {
  buffer_->finish();
}

bool is_gzip_path(std::string_view path) {
  return path.ends_with(".gz");
}

bool looks_gzipped(std::string_view data) {
  return data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f &&
         static_cast<unsigned char>(data[1]) == 0x8b;
}

std::string gunzip(std::string_view data) {
  if (data.size() > UINT32_MAX) throw std::runtime_error("gzip data over 4 GiB is not read");
  z_stream z{};
  if (const int rc = inflateInit2(&z, kGzipWindowBits); rc != Z_OK)
    zlib_failed("starting decompression", z, rc);
  std::string text;
  std::array<char, kChunk> out{};
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  int rc = Z_OK;
  while (true) {
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    rc = inflate(&z, Z_NO_FLUSH);
    text.append(out.data(), out.size() - z.avail_out);
    if (rc == Z_STREAM_END && z.avail_in > 0) {
      inflateReset(&z);  // another gzip member follows (as `cat a.gz b.gz` makes)
      continue;
    }
    if (rc == Z_STREAM_END) break;
    if (z.avail_in == 0 && (rc == Z_BUF_ERROR || z.avail_out != 0)) {
      inflateEnd(&z);
      throw std::runtime_error("the gzip data ends early (a truncated file?)");
    }
    if (rc != Z_OK) {
      const std::string why = z.msg ? z.msg : zError(rc);
      inflateEnd(&z);
      throw std::runtime_error("not valid gzip: " + why);
    }
  }
  inflateEnd(&z);
  return text;
}

}  // namespace paratwin
