// Typo suggestions by edit distance.
#include "plan/spec/suggest.hpp"

#include <algorithm>
#include <cctype>

namespace paratwin {

int edit_distance(std::string_view a, std::string_view b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  auto lower = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const int cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

std::optional<std::string> nearest(std::string_view word, const std::vector<std::string>& candidates) {
  // A prefix ("dgx-a100" for "dgx-a100-80g") is the likeliest meaning: an abbreviation, not a typo.
  std::optional<std::string> prefix;
  for (const auto& c : candidates)
    if (word.size() >= 3 && c.size() > word.size() && c.compare(0, word.size(), word) == 0 &&
        (!prefix || c.size() < prefix->size()))
      prefix = c;
  if (prefix) return prefix;
  std::optional<std::string> best;
  int best_distance = 0;
  for (const auto& c : candidates) {
    const int dist = edit_distance(word, c);
    if (!best || dist < best_distance) {
      best = c;
      best_distance = dist;
    }
  }
  // A typo changes a few characters; beyond a third of the word it is a different word.
  const int limit = std::max<int>(2, static_cast<int>(std::max(word.size(), best ? best->size() : 0)) / 3);
  if (best && best_distance <= limit && best_distance < static_cast<int>(word.size())) return best;
  return std::nullopt;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  auto n = nearest(word, candidates);
  return n ? " — did you mean '" + *n + "'?" : std::string();
}

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

}  // namespace paratwin
