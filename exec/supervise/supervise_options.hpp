// The supervisor's command-line flags: declared on `paratwin run` (add_supervise_options in
// supervisor.hpp), kept from the ranks' arguments, and their durations read.
#pragma once

#include <string>
#include <vector>

namespace paratwin::exec {

// The arguments of `paratwin run` less the supervisor's own flags (and those it sets per launch:
// --ranks, --json, --nodes, --resume), for its ranks.
std::vector<std::string> rank_arguments(const std::vector<std::string>& args);

// A duration flag's value in seconds. Throws InputError at <FLAG TEXT>:1:1 when it is not a duration
// (or is 0 and `allow_zero` is false).
double duration_flag(const std::string& flag, const std::string& text, bool allow_zero);

}  // namespace paratwin::exec
