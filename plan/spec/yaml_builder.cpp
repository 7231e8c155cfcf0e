// yaml-cpp's events into DocNodes, counted against the limits.
#include "plan/spec/yaml_builder.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "plan/spec/limits.hpp"

namespace paratwin {
namespace {

// What a node adds where it is placed: its nodes and its height (a scalar is 1).
struct Extent {
  std::uint64_t nodes = 1;
  int height = 1;
};

class Builder : public YAML::EventHandler {
 public:
  Builder(const std::string& file, const Location& start)
      : file_(file),
        start_(start),
        max_nodes_(std::uint64_t(limit_value(kYamlNodesLimit))),
        max_depth_(int(limit_value(kYamlDepthLimit))) {}

  DocNode take_root() {
    if (!root_) {
      DocNode empty;
      empty.location = start_;
      return empty;
    }
    return std::move(*root_);
  }

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    count(mark, Extent{}, false);
    DocNode n;
    n.location = where(mark);
    place(std::move(n), Extent{}, anchor);
  }
  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    count(mark, Extent{}, false);
    DocNode n = DocNode::scalar_node(value, where(mark));
    n.quoted = tag == "!";  // yaml-cpp tags quoted scalars with the non-specific "!"
    place(std::move(n), Extent{}, anchor);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    for (const Frame& f : open_)
      if (f.anchor == anchor)
        throw InputError(where(mark),
                         "this alias refers to a node that contains it (a cycle); YAML aliases "
                         "must name a node defined before them, outside them");
    const auto it = anchors_.find(anchor);
    if (it == anchors_.end()) return;  // yaml-cpp reports an unknown anchor itself
    // Counted before the copy is made: a node too large to repeat is never copied.
    count(mark, it->second.second, true);
    place(it->second.first, it->second.second, 0);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, anchor, DocNode::Kind::Sequence);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, anchor, DocNode::Kind::Mapping);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Frame {
    DocNode node;
    YAML::anchor_t anchor = 0;
    Extent extent;
    std::optional<DocEntry> key;                // a mapping's key waiting for its value
    std::unordered_map<std::string, int> keys;  // a mapping's keys -> their lines (duplicates)
    std::vector<DocNode> merged;                // `<<:` values, applied when the mapping closes
  };

  Location where(const YAML::Mark& mark) const {
    if (mark.line < 0) return open_.empty() ? start_ : open_.back().node.location;
    // Positions on the first line of `text` are shifted by where the text starts.
    return {file_, start_.line + mark.line, mark.line == 0 ? start_.column + mark.column : mark.column + 1};
  }

  // Counts a node of extent `e` about to be placed at the current depth against the limits.
  void count(const YAML::Mark& mark, const Extent& e, bool alias) {
    total_ = std::min(total_ + e.nodes, max_nodes_ + 1);
    if (total_ > max_nodes_)
      throw InputError(where(mark),
                       alias ? "this alias repeats a node of " + std::to_string(e.nodes) +
                                   " YAML nodes, too many for the document (each alias of an "
                                   "alias multiplies); write the values out or refer to smaller "
                                   "nodes" +
                                   limit_note(kYamlNodesLimit)
                             : "the document holds too many YAML nodes" + limit_note(kYamlNodesLimit));
    if (int(open_.size()) + e.height > max_depth_)
      throw InputError(where(mark), std::string(alias ? "this alias nests" : "this value is nested") +
                                        " too deep" + limit_note(kYamlDepthLimit));
  }

  void open(const YAML::Mark& mark, YAML::anchor_t anchor, DocNode::Kind kind) {
    count(mark, Extent{}, false);
    Frame f;
    f.node.kind = kind;
    f.node.location = where(mark);
    f.anchor = anchor;
    open_.push_back(std::move(f));
  }

  void close() {
    Frame f = std::move(open_.back());
    open_.pop_back();
    if (f.node.is_mapping())
      for (const DocNode& m : f.merged) merge_into(f.node, m);
    place(std::move(f.node), f.extent, f.anchor);
  }

  // Puts a finished node where it belongs: the root, a list's next item, a mapping's key or value.
  void place(DocNode n, const Extent& e, YAML::anchor_t anchor) {
    if (anchor) {
      // What anchors keep (to copy for their aliases) counts too: nested anchors would keep copies of
      // copies.
      anchored_ = std::min(anchored_ + e.nodes, max_nodes_ + 1);
      if (anchored_ > max_nodes_)
        throw InputError(n.location, "the anchors of this document hold too many YAML nodes" +
                                         limit_note(kYamlNodesLimit));
      anchors_[anchor] = {n, e};
    }
    if (open_.empty()) {
      root_ = std::move(n);
      return;
    }
    Frame& parent = open_.back();
    parent.extent.nodes = std::min(parent.extent.nodes + e.nodes, max_nodes_ + 1);
    parent.extent.height = std::max(parent.extent.height, e.height + 1);
    if (parent.node.is_sequence()) {
      parent.node.items.push_back(std::move(n));
      return;
    }
    if (!parent.key) {
      if (!n.is_scalar()) throw InputError(n.location, "expected a plain key, got " + describe(n));
      parent.key = DocEntry{n.scalar, n.location, {}};
      return;
    }
    DocEntry entry = std::move(*parent.key);
    parent.key.reset();
    if (entry.key == "<<") {
      parent.merged.push_back(std::move(n));
      return;
    }
    if (const auto [it, fresh] = parent.keys.emplace(entry.key, entry.key_location.line); !fresh)
      throw InputError(entry.key_location, "duplicate key '" + entry.key + "' (first defined at line " +
                                               std::to_string(it->second) + ")");
    // A key written with nothing after it ("hidden:") has no mark of its own; point after the key.
    // (yaml-cpp marks an empty value at the next token, often on the next line.)
    Location value_fallback = entry.key_location;
    value_fallback.column += static_cast<int>(entry.key.size()) + 1;
    if (n.is_null() && n.location.line != entry.key_location.line) n.location = value_fallback;
    entry.value.push_back(std::move(n));
    parent.node.entries.push_back(std::move(entry));
  }

  // A YAML merge key (`<<: *base`, or `<<: [*a, *b]`): the keys of the merged mappings that the mapping
  // does not set itself, earlier mappings of a list first. Anything else after `<<` is an error at it.
  static void merge_into(DocNode& mapping, const DocNode& merged) {
    if (merged.is_sequence()) {
      for (const DocNode& item : merged.items) merge_into(mapping, item);
      return;
    }
    if (!merged.is_mapping())
      throw InputError(merged.location,
                       "a YAML merge key '<<' takes a mapping (such as *base) or a list of "
                       "them, got " +
                           describe(merged));
    for (const DocEntry& e : merged.entries)
      if (!mapping.find(e.key)) mapping.entries.push_back(e);
  }

  const std::string& file_;
  Location start_;
  std::uint64_t max_nodes_;
  int max_depth_;
  std::uint64_t total_ = 0, anchored_ = 0;
  std::vector<Frame> open_;
  std::map<YAML::anchor_t, std::pair<DocNode, Extent>> anchors_;
  std::optional<DocNode> root_;
};

}  // namespace

DocNode build_yaml_document(std::string_view text, const std::string& file, const Location& start) {
  std::istringstream in{std::string(text)};
  Builder builder(file, start);
  YAML::Parser parser(in);
  parser.HandleNextDocument(builder);
  return builder.take_root();
}

}  // namespace paratwin
