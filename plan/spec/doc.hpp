// A YAML document as a tree whose every node remembers the file, line and column it came from,
// so that values merged from catalog files, scenarios and --set overrides keep their own locations.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "plan/spec/diagnostics.hpp"

namespace paratwin {

struct DocNode;

struct DocEntry {
  std::string key;
  Location key_location;
  std::vector<DocNode> value;  // exactly one element; a vector because DocNode is incomplete here
};

struct DocNode {
  enum class Kind { Null, Scalar, Sequence, Mapping };

  Kind kind = Kind::Null;
  std::string scalar;             // Scalar only
  bool quoted = false;            // Scalar written in quotes: "8" is text, 8 is a number
  std::vector<DocNode> items;     // Sequence
  std::vector<DocEntry> entries;  // Mapping, in file order
  Location location;

  bool is_null() const { return kind == Kind::Null; }
  bool is_scalar() const { return kind == Kind::Scalar; }
  bool is_sequence() const { return kind == Kind::Sequence; }
  bool is_mapping() const { return kind == Kind::Mapping; }

  // Mapping lookup; nullptr when absent or when this is not a mapping.
  const DocNode* find(std::string_view key) const;
  DocNode* find(std::string_view key);
  // Inserts or replaces a mapping entry (this must be a mapping).
  DocNode& set(const std::string& key, DocNode value, const Location& key_location);

  static DocNode scalar_node(std::string text, Location where);
  static DocNode mapping_node(Location where);
};

// "a mapping", "a list", "the text 'abc'", "nothing" — for messages.
std::string describe(const DocNode& node);

// The node as one line of YAML flow text: `8`, `dgx-h100`, `[1, 2]`, `{from: dgx-h100, nodes: 4}`.
// Parsing it back gives the same values (quoted scalars stay quoted); locations are not part of it.
std::string to_flow_yaml(const DocNode& node);

// Parses YAML text; syntax errors and duplicate keys throw InputError at their position.
DocNode parse_yaml(std::string_view text, const std::string& file_name);
// A whole input file's text, read no further than the input size limit (limits.hpp); a missing,
// unreadable or oversized file throws InputError naming it.
std::string read_input_file(const std::string& path);
// Reads and parses a file; a missing or unreadable file throws InputError naming it.
DocNode load_yaml_file(const std::string& path);
// The same, reusing the tree of an earlier read while the file's size and modification time are
// unchanged: a sweep loads the same model and cluster files for each of its points. Thread-safe.
DocNode load_yaml_file_cached(const std::string& path);

// Overlays `over` onto `base`: mappings merge key by key, anything else replaces.
void deep_merge(DocNode& base, const DocNode& over);

// One `--set a.b.c=VALUE` override; VALUE is parsed as YAML, so lists and mappings work too.
struct Override {
  std::vector<std::string> path;
  DocNode value;
  std::string text;  // as the user wrote it, for messages
};

// Messages about an override point into the argument itself: "<--set plan.tp=x>:1:9".
Location override_location(const std::string& argument, int column = 1);
// The same for another flag's value: "<--cluster local-cpu>:1:1".
Location argument_location(const std::string& flag, const std::string& value);
// Either kind: paths in such values are relative to the working directory.
bool is_override_location(const Location& where);

// Parses "a.b.c=VALUE"; a malformed argument throws InputError.
Override parse_override(const std::string& argument);

// Applies an override. Where the path walks through a scalar reference such as `cluster: dgx-h100`,
// the scalar becomes `{from: dgx-h100, ...}` so that `cluster.nodes=16` resizes the referenced cluster.
void apply_override(DocNode& root, const Override& override_);

}  // namespace paratwin
