// Reading Chakra execution traces back: a directory of <prefix>.<rank>.et files, each a GlobalMetadata
// message and Node messages, every one prefixed by its length as a varint (as Chakra's feeder reads
// them). Used by `paratwin simulate --chakra` and the tests; reads any producer's files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "plan/chakra/et_def.pb.h"

namespace paratwin::chakra {

struct RankTrace {
  int rank = 0;
  std::string path;
  ChakraProtoMsg::GlobalMetadata metadata;
  std::vector<ChakraProtoMsg::Node> nodes;  // in file order
};

// One file. Throws InputError naming the file and the byte offset of a message that cannot be read.
RankTrace read_rank_trace(const std::string& path, int rank);

// Every rank's file of `dir`, by rank (0 .. N-1). Throws InputError when the directory holds no trace,
// several prefixes, or misses a rank.
std::vector<RankTrace> read_trace_directory(const std::string& dir);

// A node's attribute of that name, or null.
const ChakraProtoMsg::AttributeProto* find_attr(const ChakraProtoMsg::Node& node, std::string_view name);
// The attribute's value as an integer, whichever integer member holds it; nullopt when the node has no
// such attribute or it is not an integer.
std::optional<std::int64_t> int_attr(const ChakraProtoMsg::Node& node, std::string_view name);

}  // namespace paratwin::chakra
