// Token files in llm.c's .bin layout: a header of 256 int32 (magic 20240520, version 1, token
// count, the rest 0) followed by the tokens as uint16. And the byte-level tokenizer that fills them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace paratwin::exec {

constexpr int32_t kTokenFileMagic = 20240520;
constexpr int32_t kTokenFileVersion = 1;

// Byte-level tokens: each byte of the text is one token in [0, 256).
std::vector<uint16_t> tokenize_bytes(std::string_view text);
std::string detokenize_bytes(const std::vector<uint16_t>& tokens);

// Writes atomically. Throws std::runtime_error when the file cannot be written.
void write_token_file(const std::string& path, const std::vector<uint16_t>& tokens);
// Throws InputError naming the file and what is wrong: missing, short header, wrong magic or version,
// a token count the file's size does not hold (checked before anything is allocated for it).
std::vector<uint16_t> read_token_file(const std::string& path);
// The tokens of a token file's bytes (header and tokens), checked as read_token_file does; `name`
// stands for the file in messages. For fuzzing and for files already in memory.
std::vector<uint16_t> parse_token_file(std::string_view bytes, const std::string& name);

// A .bin token file as is, or any other file as text tokenized by bytes. Throws InputError.
std::vector<uint16_t> load_tokens(const std::string& path);

// What a training run needs to know of its data before it starts: how many tokens and the largest.
struct TokenSource {
  uint64_t tokens = 0;
  uint16_t largest = 0;
};
// Reads the file once, a chunk at a time (a corpus may be larger than memory allows twice). Throws
// InputError as read_token_file does.
TokenSource inspect_tokens(const std::string& path);

}  // namespace paratwin::exec
