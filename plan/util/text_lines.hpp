// Line by line and field by field over a text file's contents, for the readers of line-oriented
// formats (nccl-tests output, CSV): lines numbered and fields placed by column, from 1, for messages.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <string_view>
#include <vector>

namespace paratwin {

// Calls visit(line, number) for each line, without its '\n' or a '\r' before it.
template <class Visit>  // void(std::string_view line, int number)
void for_each_line(std::string_view text, Visit&& visit) {
  int number = 0;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    visit(line, ++number);
    start = end + 1;
  }
}

// A field of a line and the column it starts at.
struct LineField {
  std::string_view text;
  int column = 0;
};

inline bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

// The runs of other characters between spaces and tabs.
inline std::vector<LineField> whitespace_fields(std::string_view line) {
  std::vector<LineField> out;
  for (std::size_t i = 0; i < line.size();) {
    while (i < line.size() && is_blank(line[i])) ++i;
    const std::size_t start = i;
    while (i < line.size() && !is_blank(line[i])) ++i;
    if (i > start) out.push_back({line.substr(start, i - start), int(start) + 1});
  }
  return out;
}

// The fields between commas, each without the spaces and tabs around it.
inline std::vector<LineField> comma_fields(std::string_view line) {
  std::vector<LineField> out;
  for (std::size_t start = 0;;) {
    const std::size_t end = std::min(line.find(',', start), line.size());
    std::size_t a = start, b = end;
    while (a < b && is_blank(line[a])) ++a;
    while (b > a && is_blank(line[b - 1])) --b;
    out.push_back({line.substr(a, b - a), int(a) + 1});
    if (end == line.size()) return out;
    start = end + 1;
  }
}

// Parses the whole field as a number of type T (an integer or a floating-point type); false when it is
// not one, has anything after it or is out of T's range.
template <class T>
bool parse_field(std::string_view text, T& value) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace paratwin
