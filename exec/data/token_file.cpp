// Token files (llm.c's layout) and the byte-level tokenizer.
#include "exec/data/token_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "plan/io/atomic_file.hpp"
#include "plan/spec/diagnostics.hpp"

namespace paratwin::exec {

std::vector<uint16_t> tokenize_bytes(std::string_view text) {
  std::vector<uint16_t> out(text.size());
  for (size_t i = 0; i < text.size(); ++i) out[i] = static_cast<unsigned char>(text[i]);
  return out;
}

std::string detokenize_bytes(const std::vector<uint16_t>& tokens) {
  std::string out(tokens.size(), '\0');
  for (size_t i = 0; i < tokens.size(); ++i) out[i] = static_cast<char>(tokens[i] & 0xff);
  return out;
}

void write_token_file(const std::string& path, const std::vector<uint16_t>& tokens) {
  int32_t header[256] = {};
  header[0] = kTokenFileMagic;
  header[1] = kTokenFileVersion;
  header[2] = static_cast<int32_t>(tokens.size());
  std::string content(sizeof header + tokens.size() * sizeof(uint16_t), '\0');
  std::memcpy(content.data(), header, sizeof header);
  std::memcpy(content.data() + sizeof header, tokens.data(), tokens.size() * sizeof(uint16_t));
  write_file_atomically(path, content);
}

namespace {

constexpr size_t kHeaderBytes = 256 * sizeof(int32_t);

bool is_token_file(const std::string& path) {
  return path.size() >= 4 && path.ends_with(".bin");
}

// The token count of a header, checked against the bytes that follow it (`available`).
uint64_t checked_count(const int32_t* header, uint64_t available, const std::string& name) {
  if (header[0] != kTokenFileMagic)
    throw InputError(Location{name}, "not a token file: magic " + std::to_string(header[0]) + ", expected " +
                                         std::to_string(kTokenFileMagic) +
                                         " (write one with `paratwin tokenize`)");
  if (header[1] != kTokenFileVersion)
    throw InputError(Location{name}, "token file version " + std::to_string(header[1]) + ", expected " +
                                         std::to_string(kTokenFileVersion) + " (uint16 tokens)");
  if (header[2] < 0) throw InputError(Location{name}, "negative token count in the header");
  const uint64_t count = uint64_t(header[2]);
  if (count * sizeof(uint16_t) > available)
    throw InputError(Location{name}, "truncated: the header promises " + std::to_string(count) +
                                         " tokens, the file holds " + std::to_string(available / 2));
  return count;
}

std::ifstream open_or_throw(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(Location{path}, "cannot read: it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(Location{path}, std::string("cannot read: ") + std::strerror(errno));
  return in;
}

uint64_t size_of(const std::string& path) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) throw InputError(Location{path}, "cannot read: " + ec.message());
  return size;
}

}  // namespace

std::vector<uint16_t> parse_token_file(std::string_view bytes, const std::string& name) {
  if (bytes.size() < kHeaderBytes)
    throw InputError(Location{name}, "not a token file: shorter than its 1024-byte header");
  int32_t header[256];
  std::memcpy(header, bytes.data(), kHeaderBytes);
  const uint64_t count = checked_count(header, bytes.size() - kHeaderBytes, name);
  std::vector<uint16_t> tokens(count);
  if (count > 0) std::memcpy(tokens.data(), bytes.data() + kHeaderBytes, count * sizeof(uint16_t));
  return tokens;
}

std::vector<uint16_t> read_token_file(const std::string& path) {
  std::ifstream in = open_or_throw(path);
  const uint64_t size = size_of(path);
  int32_t header[256] = {};
  if (size < kHeaderBytes || !in.read(reinterpret_cast<char*>(header), kHeaderBytes))
    throw InputError(Location{path}, "not a token file: shorter than its 1024-byte header");
  // Checked against the file's size before the tokens are allocated.
  std::vector<uint16_t> tokens(checked_count(header, size - kHeaderBytes, path));
  in.read(reinterpret_cast<char*>(tokens.data()), std::streamsize(tokens.size() * sizeof(uint16_t)));
  if (uint64_t(in.gcount()) != tokens.size() * sizeof(uint16_t))
    throw InputError(Location{path}, "truncated while it was read (did the file change?)");
  return tokens;
}

std::vector<uint16_t> load_tokens(const std::string& path) {
  if (is_token_file(path)) return read_token_file(path);
  std::ifstream in = open_or_throw(path);
  std::vector<uint16_t> tokens;
  tokens.reserve(size_of(path));
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0)
    for (std::streamsize i = 0; i < in.gcount(); ++i) tokens.push_back(static_cast<unsigned char>(chunk[i]));
  return tokens;
}

TokenSource inspect_tokens(const std::string& path) {
  std::ifstream in = open_or_throw(path);
  const uint64_t size = size_of(path);
  TokenSource source;
  char chunk[1 << 16];
  if (!is_token_file(path)) {
    source.tokens = size;
    while (in.read(chunk, sizeof chunk) || in.gcount() > 0)
      for (std::streamsize i = 0; i < in.gcount(); ++i)
        source.largest = std::max<uint16_t>(source.largest, static_cast<unsigned char>(chunk[i]));
    return source;
  }
  int32_t header[256] = {};
  if (size < kHeaderBytes || !in.read(reinterpret_cast<char*>(header), kHeaderBytes))
    throw InputError(Location{path}, "not a token file: shorter than its 1024-byte header");
  source.tokens = checked_count(header, size - kHeaderBytes, path);
  uint64_t left = source.tokens * sizeof(uint16_t);
  while (left > 0) {
    in.read(chunk, std::streamsize(std::min<uint64_t>(left, sizeof chunk)));
    const auto got = uint64_t(in.gcount());
    if (got == 0) throw InputError(Location{path}, "truncated while it was read (did the file change?)");
    for (uint64_t i = 0; i + 1 < got; i += 2) {
      uint16_t t;
      std::memcpy(&t, chunk + i, sizeof t);
      source.largest = std::max(source.largest, t);
    }
    left -= got;
  }
  return source;
}

}  // namespace paratwin::exec
