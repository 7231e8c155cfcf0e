// Builds a located DocNode tree straight from yaml-cpp's parser events, with the bounds hostile input
// needs: an alias repeats the whole node it names (ten lines of aliases of aliases can stand for
// billions of nodes), so the nodes and the nesting a document expands to are counted as it is read,
// and reading stops at the alias that passes the limit (plan/spec/limits.hpp). Internal to
// plan/spec/doc.cpp.
#pragma once

#include <string>
#include <string_view>

#include "plan/spec/doc.hpp"

namespace paratwin {

// The first document of `text`, its nodes located in `file`; `start` is where `text` begins there (an
// override's value starts mid-argument). An empty document is a Null node at `start`. Throws
// InputError at the alias or bracket that passes the limits, at an alias of a node it sits in (a
// cycle), at a key that is not a plain scalar, a duplicate key, or a merge key ('<<') whose value is not
// a mapping or a list of them; throws YAML::Exception for syntax errors (doc.cpp words them).
DocNode build_yaml_document(std::string_view text, const std::string& file, const Location& start);

}  // namespace paratwin
