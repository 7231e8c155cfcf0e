// yaml-cpp documents converted into located DocNode trees; merging and --set overrides.
#include "plan/spec/doc.hpp"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

namespace paratwin {

const DocNode* DocNode::find(std::string_view key) const {
  if (kind != Kind::Mapping) return nullptr;
  for (const auto& e : entries)
    if (e.key == key) return &e.value.front();
  return nullptr;
}

DocNode* DocNode::find(std::string_view key) {
  return const_cast<DocNode*>(static_cast<const DocNode*>(this)->find(key));
}

DocNode& DocNode::set(const std::string& key, DocNode value, const Location& key_location) {
  for (auto& e : entries)
    if (e.key == key) {
      e.value.front() = std::move(value);
      return e.value.front();
    }
  entries.push_back({key, key_location, {std::move(value)}});
  return entries.back().value.front();
}

DocNode DocNode::scalar_node(std::string text, Location where) {
  DocNode n;
  n.kind = Kind::Scalar;
  n.scalar = std::move(text);
  n.location = std::move(where);
  return n;
}

DocNode DocNode::mapping_node(Location where) {
  DocNode n;
  n.kind = Kind::Mapping;
  n.location = std::move(where);
  return n;
}

std::string describe(const DocNode& node) {
  switch (node.kind) {
    case DocNode::Kind::Null: return "nothing";
    case DocNode::Kind::Scalar: return "'" + node.scalar + "'";
    case DocNode::Kind::Sequence: return "a list";
    case DocNode::Kind::Mapping: return "a mapping";
  }
  return "?";
}

namespace {

Location location_of(const YAML::Mark& mark, const std::string& file, const Location& fallback) {
  if (mark.line < 0) return fallback;
  return {file, mark.line + 1, mark.column + 1};
}

DocNode convert(const YAML::Node& node, const std::string& file, const Location& fallback) {
  DocNode out;
  out.location = location_of(node.Mark(), file, fallback);
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null: out.kind = DocNode::Kind::Null; break;
    case YAML::NodeType::Scalar:
      out.kind = DocNode::Kind::Scalar;
      out.scalar = node.Scalar();
      out.quoted = node.Tag() == "!";  // yaml-cpp tags quoted scalars with the non-specific "!"
      break;
    case YAML::NodeType::Sequence:
      out.kind = DocNode::Kind::Sequence;
      for (const auto& item : node) out.items.push_back(convert(item, file, out.location));
      break;
    case YAML::NodeType::Map:
      out.kind = DocNode::Kind::Mapping;
      for (const auto& kv : node) {
        const Location key_loc = location_of(kv.first.Mark(), file, out.location);
        if (!kv.first.IsScalar())
          throw InputError(key_loc, "expected a plain key, got " + describe(convert(kv.first, file, key_loc)));
        const std::string key = kv.first.Scalar();
        for (const auto& e : out.entries)
          if (e.key == key)
            throw InputError(key_loc, "duplicate key '" + key + "' (first defined at line " +
                                          std::to_string(e.key_location.line) + ")");
        // A key written with nothing after it ("hidden:") has no mark of its own; point after the key.
        Location value_fallback = key_loc;
        value_fallback.column += static_cast<int>(key.size()) + 1;
        out.entries.push_back({key, key_loc, {convert(kv.second, file, value_fallback)}});
      }
      break;
  }
  return out;
}

}  // namespace

DocNode parse_yaml(std::string_view text, const std::string& file_name) {
  const Location start{file_name, 1, 1};
  try {
    YAML::Node root = YAML::Load(std::string(text));
    return convert(root, file_name, start);
  } catch (const YAML::Exception& e) {
    throw InputError(location_of(e.mark, file_name, start), "YAML syntax error: " + e.msg);
  }
}

DocNode load_yaml_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(Location{path}, "cannot read file");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_yaml(text.str(), path);
}

void deep_merge(DocNode& base, const DocNode& over) {
  if (base.is_mapping() && over.is_mapping()) {
    for (const auto& e : over.entries) {
      if (DocNode* existing = base.find(e.key))
        deep_merge(*existing, e.value.front());
      else
        base.entries.push_back(e);
    }
    return;
  }
  base = over;
}

Location override_location(const std::string& argument, int column) {
  return {"<--set " + argument + ">", 1, column};
}

bool is_override_location(const Location& where) { return where.file.rfind("<--set ", 0) == 0; }

Override parse_override(const std::string& argument) {
  const Location whole = override_location(argument);
  const size_t eq = argument.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError(whole, "expected KEY=VALUE such as plan.tp=8 or cluster.nodes=64");
  Override o;
  o.text = argument;
  const std::string path = argument.substr(0, eq);
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.empty())
      throw InputError({whole.file, 1, static_cast<int>(start) + 1}, "empty key in path '" + path + "'");
    o.path.push_back(part);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  const std::string value_text = argument.substr(eq + 1);
  const Location value_loc{whole.file, 1, static_cast<int>(eq) + 2};
  try {
    o.value = convert(YAML::Load(value_text), whole.file, value_loc);
  } catch (const YAML::Exception& e) {
    throw InputError(value_loc, "YAML syntax error in value: " + e.msg);
  }
  // Positions inside the value are relative to the value; shift them onto the argument.
  struct Shift {
    int by;
    void operator()(DocNode& n) const {
      n.location.column += by;
      for (auto& i : n.items) (*this)(i);
      for (auto& e : n.entries) {
        e.key_location.column += by;
        (*this)(e.value.front());
      }
    }
  };
  Shift{static_cast<int>(eq) + 1}(o.value);
  if (o.value.is_null()) o.value.location = value_loc;
  return o;
}

void apply_override(DocNode& root, const Override& o) {
  const Location where = override_location(o.text);
  DocNode* node = &root;
  for (size_t i = 0; i < o.path.size(); ++i) {
    const std::string& key = o.path[i];
    if (node->is_null()) *node = DocNode::mapping_node(where);
    if (node->is_scalar()) {
      // `cluster: dgx-h100` walked into by `cluster.nodes`: keep the reference, overlay the rest.
      DocNode reference = *node;
      *node = DocNode::mapping_node(reference.location);
      node->set("from", reference, reference.location);
    }
    if (!node->is_mapping()) {
      std::string prefix;
      for (size_t j = 0; j < i; ++j) prefix += (j ? "." : "") + o.path[j];
      throw InputError(where, "cannot set '" + key + "' inside " + prefix + ", which is " + describe(*node));
    }
    if (i + 1 == o.path.size()) {
      node->set(key, o.value, where);
      return;
    }
    DocNode* child = node->find(key);
    if (!child) child = &node->set(key, DocNode::mapping_node(where), where);
    node = child;
  }
}

}  // namespace paratwin
