// Protocol Buffers' wire format, the few parts a hand-encoded message needs: varints, fixed64 and
// length-delimited fields written into a byte string, and a reader that walks a message's fields.
// For formats whose schema is a handful of fields (Perfetto's TracePacket), where generated code and
// libprotobuf would be most of the work.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace paratwin::protowire {

enum class WireType : std::uint8_t { Varint = 0, Fixed64 = 1, Length = 2, Fixed32 = 5 };

// One message's bytes, field by field in the order written.
class Writer {
 public:
  void varint(int field, std::uint64_t value);
  void fixed64(int field, std::uint64_t value);
  void bytes(int field, std::string_view value);  // strings and nested messages
  void message(int field, const Writer& nested) { bytes(field, nested.data_); }

  const std::string& data() const { return data_; }
  void clear() { data_.clear(); }

 private:
  void tag(int field, WireType type);
  void raw_varint(std::uint64_t value);
  std::string data_;
};

// One field read from a message: its number and type, and its value (`number` for varints and
// fixed-size fields, `bytes` for length-delimited ones).
struct Field {
  int number = 0;
  WireType type = WireType::Varint;
  std::uint64_t number_value = 0;
  std::string_view bytes;
};

// Walks the fields of `data` (which must outlive it). next() throws std::runtime_error on truncated
// or malformed input.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  bool next(Field& field);

 private:
  std::uint64_t raw_varint();
  std::string_view data_;
  size_t at_ = 0;
};

}  // namespace paratwin::protowire
