#include "plan/chakra/chakra_reader.hpp"

#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/util/delimited_message_util.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include "plan/spec/diagnostics.hpp"

namespace paratwin::chakra {

namespace et = ChakraProtoMsg;
namespace fs = std::filesystem;

RankTrace read_rank_trace(const std::string& path, int rank) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(Location{path}, "cannot open the Chakra trace file");
  google::protobuf::io::IstreamInputStream raw(&in);
  RankTrace trace{rank, path, {}, {}};
  bool clean_eof = false;
  const auto fail = [&](const std::string& what) {
    throw InputError(Location{path}, what + " at byte " + std::to_string(raw.ByteCount()) +
                                         ": not a Chakra execution trace (a GlobalMetadata message then "
                                         "Node messages, each prefixed by its length)");
  };
  if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&trace.metadata, &raw, &clean_eof))
    fail(clean_eof ? "the file is empty" : "the metadata message cannot be read");
  for (;;) {
    et::Node node;
    if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&node, &raw, &clean_eof)) {
      if (clean_eof) break;
      fail("node " + std::to_string(trace.nodes.size()) + " cannot be read");
    }
    trace.nodes.push_back(std::move(node));
  }
  return trace;
}

std::vector<RankTrace> read_trace_directory(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw InputError(Location{dir}, "not a directory of Chakra traces");
  static const std::regex name(R"((.+)\.(\d+)\.et)");
  std::map<std::string, std::map<int, std::string>> by_prefix;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string file = entry.path().filename().string();
    if (entry.is_regular_file() && std::regex_match(file, m, name) && m[2].length() < 9)
      by_prefix[m[1]][std::stoi(m[2])] = entry.path().string();
  }
  if (by_prefix.empty())
    throw InputError(Location{dir}, "no Chakra trace here: expected files named <prefix>.<rank>.et");
  if (by_prefix.size() > 1)
    throw InputError(Location{dir}, "traces of several prefixes here (" + by_prefix.begin()->first + ", " +
                                        std::next(by_prefix.begin())->first + "); keep one per directory");
  const auto& [prefix, files] = *by_prefix.begin();
  std::vector<RankTrace> out;
  for (const auto& [rank, path] : files) {
    if (rank != static_cast<int>(out.size()))
      throw InputError(Location{dir}, "rank " + std::to_string(out.size()) + "'s file " + prefix + "." +
                                          std::to_string(out.size()) + ".et is missing");
    out.push_back(read_rank_trace(path, rank));
  }
  return out;
}

const et::AttributeProto* find_attr(const et::Node& node, std::string_view name) {
  for (const et::AttributeProto& a : node.attr())
    if (a.name() == name) return &a;
  return nullptr;
}

std::optional<std::int64_t> int_attr(const et::Node& node, std::string_view name) {
  const et::AttributeProto* a = find_attr(node, name);
  if (!a) return std::nullopt;
  switch (a->value_case()) {
    case et::AttributeProto::kInt32Val:
      return a->int32_val();
    case et::AttributeProto::kInt64Val:
      return a->int64_val();
    case et::AttributeProto::kUint32Val:
      return a->uint32_val();
    case et::AttributeProto::kUint64Val:
      return static_cast<std::int64_t>(a->uint64_val());
    case et::AttributeProto::kSint32Val:
      return a->sint32_val();
    case et::AttributeProto::kSint64Val:
      return a->sint64_val();
    case et::AttributeProto::kFixed32Val:
      return a->fixed32_val();
    case et::AttributeProto::kFixed64Val:
      return static_cast<std::int64_t>(a->fixed64_val());
    case et::AttributeProto::kSfixed32Val:
      return a->sfixed32_val();
    case et::AttributeProto::kSfixed64Val:
      return a->sfixed64_val();
    default:
      return std::nullopt;
  }
}

}  // namespace paratwin::chakra
