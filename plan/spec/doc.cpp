// Located DocNode trees from YAML text (plan/spec/yaml_builder.cpp reads the events); merging and --set
// overrides.
#include "plan/spec/doc.hpp"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>

#include "plan/spec/limits.hpp"
#include "plan/spec/yaml_builder.hpp"

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
    case DocNode::Kind::Null:
      return "nothing";
    case DocNode::Kind::Scalar:
      return "'" + node.scalar + "'";
    case DocNode::Kind::Sequence:
      return node.items.empty() ? "an empty list" : "a list";
    case DocNode::Kind::Mapping:
      return node.entries.empty() ? "an empty mapping" : "a mapping";
  }
  return "?";
}

std::string to_flow_yaml(const DocNode& node) {
  auto scalar = [](const std::string& text, bool quoted) {
    const bool plain = !quoted && !text.empty() && text.find_first_of(",[]{}#\"'\n") == std::string::npos &&
                       text.find(": ") == std::string::npos && text.front() != ' ' && text.back() != ' ' &&
                       text.back() != ':' &&
                       std::string_view("*&!%@`|>").find(text.front()) == std::string::npos &&
                       text.rfind("- ", 0) != 0 && text.rfind("? ", 0) != 0;
    if (plain) return text;
    std::string out = "\"";
    for (char c : text) out += c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : std::string(1, c);
    return out + "\"";
  };
  std::string out;
  switch (node.kind) {
    case DocNode::Kind::Null:
      return "null";
    case DocNode::Kind::Scalar:
      return scalar(node.scalar, node.quoted);
    case DocNode::Kind::Sequence:
      for (const auto& item : node.items) out += (out.empty() ? "" : ", ") + to_flow_yaml(item);
      return "[" + out + "]";
    case DocNode::Kind::Mapping:
      for (const auto& e : node.entries)
        out += (out.empty() ? "" : ", ") + scalar(e.key, false) + ": " + to_flow_yaml(e.value.front());
      return "{" + out + "}";
  }
  return out;
}

namespace {

Location location_of(const YAML::Mark& mark, const std::string& file, const Location& fallback) {
  if (mark.line < 0) return fallback;
  return {file, mark.line + 1, mark.column + 1};
}

// Where the last `open` bracket that is never closed sits, skipping quoted text and comments; yaml-cpp
// reports such errors at the end of the input, far from the cause.
std::optional<Location> unclosed_bracket(std::string_view text, char open, const std::string& file,
                                         int column_offset) {
  std::vector<std::pair<char, Location>> stack;
  int line = 1, column = 0;
  char quote = 0;
  bool comment = false;
  for (char ch : text) {
    ++column;
    if (ch == '\n') {
      ++line, column = 0, comment = false;
    } else if (comment) {
    } else if (quote) {
      if (ch == quote) quote = 0;
    } else if (ch == '"' || ch == '\'') {
      quote = ch;
    } else if (ch == '#') {
      comment = true;
    } else if (ch == '[' || ch == '{') {
      stack.push_back({ch, {file, line, column + column_offset}});
    } else if ((ch == ']' || ch == '}') && !stack.empty()) {
      stack.pop_back();
    }
  }
  for (auto it = stack.rbegin(); it != stack.rend(); ++it)
    if (it->first == open) return it->second;
  return std::nullopt;
}

// A quote that opens a value and is not closed on its line. YAML would let it run on over the
// following lines (yaml-cpp even to the end of the file), silently swallowing keys; ParaTwin files
// never need multi-line quoted text, so this is reported at the quote.
std::optional<std::pair<Location, char>> unclosed_quote(std::string_view text, const std::string& file) {
  int line = 1;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view l = text.substr(begin, end - begin);
    char quote = 0;
    size_t opened = 0;
    char previous = 0;  // last character outside quotes that is not a space
    for (size_t i = 0; i < l.size(); ++i) {
      const char ch = l[i];
      if (quote) {
        if (ch == quote) quote = 0, previous = ch;
        continue;
      }
      if (ch == '#' && (i == 0 || l[i - 1] == ' ')) break;
      const bool starts_value = previous == 0 || previous == ':' || previous == '-' || previous == '[' ||
                                previous == '{' || previous == ',';
      if ((ch == '"' || ch == '\'') && starts_value)
        quote = ch, opened = i;
      else if (ch != ' ' && ch != '\t')
        previous = ch;
    }
    if (quote) return std::pair{Location{file, line, static_cast<int>(opened) + 1}, quote};
    begin = end + 1;
    ++line;
  }
  return std::nullopt;
}

// yaml-cpp's terse messages, with what the user should look for.
InputError syntax_error(const YAML::Exception& e, std::string_view text, const std::string& file,
                        const Location& start, const std::string& prefix) {
  Location where = location_of(e.mark, file, start);
  std::string message = e.msg;
  const int offset = start.column - 1;
  if (message == YAML::ErrorMsg::END_OF_SEQ_FLOW || message == YAML::ErrorMsg::END_OF_MAP_FLOW) {
    const bool seq = message == YAML::ErrorMsg::END_OF_SEQ_FLOW;
    if (auto open = unclosed_bracket(text, seq ? '[' : '{', file, offset)) where = *open;
    message = seq ? "'[' is never closed; expected ']'" : "'{' is never closed; expected '}'";
  } else if (message == YAML::ErrorMsg::BLOCK_ENTRY || message == "illegal map value") {
    message += " (is a key indented deeper than the keys above it, or a value holding an unquoted ': '?)";
  }
  return InputError(where, prefix + message);
}

// The first line that holds YAML content (not blank, not a comment, not a leading "---"), 1-based,
// with its first column; and the first "---" line after it, which starts a second document.
struct Outline {
  int first_content_line = 0, first_content_column = 0;
  int second_document_line = 0;
};

Outline outline(std::string_view text) {
  Outline o;
  int line = 1;
  for (size_t begin = 0; begin < text.size(); ++line) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view l = text.substr(begin, end - begin);
    const bool marker =
        l.substr(0, 3) == "---" && (l.size() == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\r');
    const size_t first = l.find_first_not_of(" \t\r");
    if (marker && o.first_content_line) {
      o.second_document_line = line;
      break;
    }
    if (!marker && first != std::string_view::npos && l[first] != '#' && !o.first_content_line) {
      o.first_content_line = line;
      o.first_content_column = static_cast<int>(first) + 1;
    }
    begin = end + 1;
  }
  return o;
}

}  // namespace

// YAML::Load, not LoadAll: yaml-cpp 0.7's LoadAll loops forever, allocating, on some invalid input
// (a line starting with ',', jbeder/yaml-cpp#1319), so a second document is found by scanning.
DocNode parse_yaml(std::string_view text, const std::string& file_name) {
  const Location start{file_name, 1, 1};
  if (auto quote = unclosed_quote(text, file_name))
    throw InputError(quote->first,
                     std::string("YAML syntax error: ") + quote->second + " is never closed on its line");
  const Outline shape = outline(text);
  if (shape.second_document_line)
    throw InputError({file_name, shape.second_document_line, 1},
                     "a second YAML document starts here; ParaTwin reads one document per file");
  DocNode root;
  try {
    root = build_yaml_document(text, file_name, start);
  } catch (const YAML::Exception& e) {
    throw syntax_error(e, text, file_name, start, "YAML syntax error: ");
  }
  // yaml-cpp returns nothing, without an error, for a document that starts with a token it cannot
  // place (such as ','); content that reads as nothing is a syntax error.
  if (root.is_null() && shape.first_content_line) {
    const std::string_view rest = text.substr(text.find_first_not_of(" \t\r\n"));
    if (rest.rfind("null", 0) != 0 && rest.rfind("~", 0) != 0)
      throw InputError({file_name, shape.first_content_line, shape.first_content_column},
                       "YAML syntax error: cannot read a value here");
  }
  return root;
}

std::string read_input_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(Location{path}, "cannot read file: it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(Location{path}, "cannot read file");
  // Read no further than the limit: a path such as /dev/zero never ends.
  const auto most = std::size_t(limit_value(kInputBytesLimit));
  std::string text;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, std::size_t(in.gcount()));
    if (text.size() > most)
      throw InputError(Location{path}, "the file is too large" + limit_note(kInputBytesLimit));
  }
  return text;
}

DocNode load_yaml_file(const std::string& path) {
  return parse_yaml(read_input_file(path), path);
}

DocNode load_yaml_file_cached(const std::string& path) {
  struct Entry {
    std::filesystem::file_time_type time;
    std::uintmax_t size;
    DocNode document;
  };
  static std::mutex mutex;
  static std::map<std::string, Entry> cache;
  constexpr size_t kMostFiles = 64;  // the catalog's files, a few of the user's
  std::error_code ec;
  const auto time = std::filesystem::last_write_time(path, ec);
  const auto size = ec ? 0 : std::filesystem::file_size(path, ec);
  if (ec) return load_yaml_file(path);  // says why it cannot be read
  {
    std::lock_guard lock(mutex);
    if (const auto it = cache.find(path);
        it != cache.end() && it->second.time == time && it->second.size == size)
      return it->second.document;
  }
  DocNode document = load_yaml_file(path);
  std::lock_guard lock(mutex);
  if (cache.size() >= kMostFiles) cache.clear();
  cache[path] = Entry{time, size, document};
  return document;
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

// "<--set plan.tp=x>". Every node of an argument's value carries this name: a long argument is cut
// short in it, or a --grid of 10^4 values would hold 10^4 copies of itself.
static std::string argument_name(const std::string& flag, const std::string& value) {
  constexpr size_t kMostShown = 80;
  return "<" + flag + " " + (value.size() > kMostShown ? value.substr(0, kMostShown - 3) + "..." : value) +
         ">";
}

Location override_location(const std::string& argument, int column) {
  return {argument_name("--set", argument), 1, column};
}

Location argument_location(const std::string& flag, const std::string& value) {
  return {argument_name(flag, value), 1, 1};
}

bool is_override_location(const Location& where) {
  return where.file.rfind("<--", 0) == 0;
}

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
    // Positions on the argument's one line start after the '='.
    o.value = build_yaml_document(value_text, whole.file, value_loc);
  } catch (const YAML::Exception& e) {
    throw syntax_error(e, value_text, whole.file, value_loc, "YAML syntax error in value: ");
  }
  if (o.value.is_null()) o.value.location = value_loc;
  return o;
}

void apply_override(DocNode& root, const Override& o) {
  const Location where = override_location(o.text);
  DocNode* node = &root;
  int column = 1;
  for (size_t i = 0; i < o.path.size(); ++i) {
    const std::string& key = o.path[i];
    const Location key_where = override_location(o.text, column);
    column += static_cast<int>(key.size()) + 1;
    if (node->is_null() || (node->is_scalar() && node->scalar == "auto"))
      *node = DocNode::mapping_node(where);
    if (node->is_scalar() && i == 1 && (o.path[0] == "model" || o.path[0] == "cluster")) {
      // `cluster: dgx-h100` walked into by `cluster.nodes`: keep the reference, overlay the rest.
      DocNode reference = *node;
      *node = DocNode::mapping_node(reference.location);
      node->set("from", reference, reference.location);
    }
    if (!node->is_mapping()) {
      std::string prefix;
      for (size_t j = 0; j < i; ++j) prefix += (j ? "." : "") + o.path[j];
      throw InputError(key_where,
                       "cannot set '" + key + "' inside " + prefix + ", which is " + describe(*node));
    }
    if (i + 1 == o.path.size()) {
      node->set(key, o.value, key_where);
      return;
    }
    DocNode* child = node->find(key);
    if (!child) child = &node->set(key, DocNode::mapping_node(key_where), key_where);
    node = child;
  }
}

}  // namespace paratwin
