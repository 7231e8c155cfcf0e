// "Did you mean ...?": the nearest valid spelling of a mistyped key, value, unit or catalog name.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace paratwin {

// Optimal string alignment distance (Levenshtein plus adjacent transpositions), case-insensitive.
int edit_distance(std::string_view a, std::string_view b);

// The closest candidate, if it is close enough to be a plausible typo.
std::optional<std::string> nearest(std::string_view word, const std::vector<std::string>& candidates);

// " — did you mean 'x'?" or "" when nothing is close.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

// "a, b, c"
std::string join(const std::vector<std::string>& items, std::string_view separator = ", ");

}  // namespace paratwin
