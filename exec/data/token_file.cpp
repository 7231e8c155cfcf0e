// Token files (llm.c's layout) and the byte-level tokenizer.
#include "exec/data/token_file.hpp"

#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "plan/io/atomic_file.hpp"

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

std::vector<uint16_t> read_token_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read token file " + path + ": " + std::strerror(errno));
  int32_t header[256] = {};
  if (!in.read(reinterpret_cast<char*>(header), sizeof header))
    throw std::runtime_error(path + ": not a token file: shorter than its 1024-byte header");
  if (header[0] != kTokenFileMagic)
    throw std::runtime_error(path + ": not a token file: magic " + std::to_string(header[0]) + ", expected " +
                             std::to_string(kTokenFileMagic) + " (write one with `paratwin tokenize`)");
  if (header[1] != kTokenFileVersion)
    throw std::runtime_error(path + ": token file version " + std::to_string(header[1]) + ", expected " +
                             std::to_string(kTokenFileVersion) + " (uint16 tokens)");
  if (header[2] < 0) throw std::runtime_error(path + ": negative token count in the header");
  std::vector<uint16_t> tokens(static_cast<size_t>(header[2]));
  in.read(reinterpret_cast<char*>(tokens.data()), std::streamsize(tokens.size() * sizeof(uint16_t)));
  if (in.gcount() != std::streamsize(tokens.size() * sizeof(uint16_t)))
    throw std::runtime_error(path + ": truncated: the header promises " + std::to_string(header[2]) +
                             " tokens, the file holds " + std::to_string(in.gcount() / 2));
  return tokens;
}

std::vector<uint16_t> load_tokens(const std::string& path) {
  if (path.size() >= 4 && path.ends_with(".bin")) return read_token_file(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  return tokenize_bytes(text.str());
}

}  // namespace paratwin::exec
