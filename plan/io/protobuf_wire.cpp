// Wire format per https://protobuf.dev/programming-guides/encoding/ (little-endian base-128 varints,
// tag = field number << 3 | wire type).
#include "plan/io/protobuf_wire.hpp"

#include <stdexcept>

namespace paratwin::protowire {

void Writer::raw_varint(std::uint64_t value) {
  while (value >= 0x80) {
    data_.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  data_.push_back(static_cast<char>(value));
}

void Writer::tag(int field, WireType type) {
  raw_varint((std::uint64_t(field) << 3) | std::uint64_t(type));
}

void Writer::varint(int field, std::uint64_t value) {
  tag(field, WireType::Varint);
  raw_varint(value);
}

void Writer::fixed64(int field, std::uint64_t value) {
  tag(field, WireType::Fixed64);
  for (int i = 0; i < 8; ++i) data_.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

void Writer::bytes(int field, std::string_view value) {
  tag(field, WireType::Length);
  raw_varint(value.size());
  data_.append(value);
}

std::uint64_t Reader::raw_varint() {
  std::uint64_t value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (at_ >= data_.size()) throw std::runtime_error("protobuf: a varint runs past the end");
    const auto byte = static_cast<unsigned char>(data_[at_++]);
    value |= std::uint64_t(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return value;
  }
  throw std::runtime_error("protobuf: a varint longer than 10 bytes");
}

bool Reader::next(Field& field) {
  if (at_ == data_.size()) return false;
  const std::uint64_t tag = raw_varint();
  field.number = int(tag >> 3);
  field.type = WireType(tag & 7);
  field.bytes = {};
  field.number_value = 0;
  const auto need = [&](size_t n) {
    if (data_.size() - at_ < n) throw std::runtime_error("protobuf: a field runs past the end");
  };
  switch (field.type) {
    case WireType::Varint:
      field.number_value = raw_varint();
      break;
    case WireType::Fixed64:
    case WireType::Fixed32: {
      const int width = field.type == WireType::Fixed64 ? 8 : 4;
      need(size_t(width));
      for (int i = 0; i < width; ++i)
        field.number_value |= std::uint64_t(static_cast<unsigned char>(data_[at_ + size_t(i)])) << (8 * i);
      at_ += size_t(width);
      break;
    }
    case WireType::Length: {
      const std::uint64_t length = raw_varint();
      need(size_t(length));
      field.bytes = data_.substr(at_, size_t(length));
      at_ += size_t(length);
      break;
    }
    default:
      throw std::runtime_error("protobuf: wire type " + std::to_string(int(field.type)) + " not read");
  }
  return true;
}

}  // namespace paratwin::protowire
