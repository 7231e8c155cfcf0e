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
// Throws std::runtime_error naming the file and what is wrong: missing, short header, wrong magic
// or version, fewer tokens than the header promises.
std::vector<uint16_t> read_token_file(const std::string& path);

// A .bin token file as is, or any other file as text tokenized by bytes.
std::vector<uint16_t> load_tokens(const std::string& path);

}  // namespace paratwin::exec
