// Perfetto TrackEvent trace, hand-encoded (plan/io/protobuf_wire): descriptors first, then each
// role's tasks in the order of the Chrome trace, so both list the same tasks in the same order.
#include "plan/report/perfetto_trace.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "plan/io/protobuf_wire.hpp"
#include "plan/spec/reader.hpp"

namespace paratwin {

namespace {

namespace pf = perfetto_field;

constexpr std::uint64_t kSequence = 1;  // one writer, one packet sequence

// Track ids: a stage's process, a stream's thread under it, a collective kind's child of the stream.
std::uint64_t process_uuid(int stage) {
  return std::uint64_t(stage + 1) << 16;
}
std::uint64_t stream_uuid(int stage, StreamKind s) {
  return process_uuid(stage) | (std::uint64_t(s) + 1) << 8;
}
std::uint64_t collective_uuid(int stage, StreamKind s, cost::CollectiveKind k) {
  return stream_uuid(stage, s) | (std::uint64_t(k) + 1);
}

std::uint64_t nanoseconds(double seconds) {
  return std::uint64_t(std::llround(seconds * 1e9));
}

class PacketStream {
 public:
  explicit PacketStream(std::ostream& out) : out_(out) {}
  void write(protowire::Writer& packet) {
    packet.varint(pf::kSequenceId, kSequence);
    if (first_) packet.varint(pf::kSequenceFlags, 1);  // SEQ_INCREMENTAL_STATE_CLEARED
    first_ = false;
    framed_.clear();
    framed_.message(pf::kTracePacket, packet);
    out_.write(framed_.data().data(), std::streamsize(framed_.data().size()));
    packet.clear();
  }

 private:
  std::ostream& out_;
  protowire::Writer framed_;
  bool first_ = true;
};

void describe_tracks(PacketStream& stream, const Program& program) {
  protowire::Writer packet, track, who;
  const auto emit = [&] {
    packet.message(pf::kTrackDescriptor, track);
    stream.write(packet);
    track.clear();
    who.clear();
  };
  for (const Role& role : program.roles) {
    const int stage = role.pipeline_rank;
    track.varint(pf::kUuid, process_uuid(stage));
    who.varint(pf::kPid, std::uint64_t(stage + 1));  // pid 0 is the idle task to Perfetto
    who.bytes(pf::kProcessName, "stage " + std::to_string(stage) + " (" + role.pool + ", " +
                                    std::to_string(role.instances) + " ranks)");
    track.message(pf::kProcess, who);
    emit();
    std::map<StreamKind, std::vector<cost::CollectiveKind>> collectives;
    for (const Task& t : role.tasks)
      if (t.kind == TaskKind::Collective) {
        auto& kinds = collectives[t.stream];
        if (std::find(kinds.begin(), kinds.end(), t.collective) == kinds.end()) kinds.push_back(t.collective);
      }
    for (const auto& [name, s] : kStreamKindNames) {
      track.varint(pf::kUuid, stream_uuid(stage, s));
      track.varint(pf::kParentUuid, process_uuid(stage));
      who.varint(pf::kPid, std::uint64_t(stage + 1));
      who.varint(pf::kTid, std::uint64_t(stage + 1) * 16 + std::uint64_t(s));  // unique per trace
      who.bytes(pf::kThreadName, name);
      track.message(pf::kThread, who);
      emit();
      for (cost::CollectiveKind k : collectives[s]) {
        track.varint(pf::kUuid, collective_uuid(stage, s, k));
        track.varint(pf::kParentUuid, stream_uuid(stage, s));
        track.bytes(pf::kTrackName, name + " " + enum_name(k, kCollectiveKindNames));
        emit();
      }
    }
  }
}

// Flow ids pairing each send with its receive: the n-th send from stage a to stage b of a direction
// and micro-batch goes with the n-th receive at b from a of the same direction and micro-batch.
using TransferKey = std::tuple<int, int, Direction, int>;  // from, to, direction, micro-batch
std::map<std::pair<int, size_t>, std::uint64_t> pair_transfers(const Program& program) {
  std::map<TransferKey, std::vector<std::uint64_t>> sent;
  std::map<std::pair<int, size_t>, std::uint64_t> flow;  // (role, task) -> flow id
  std::uint64_t next = 1;
  for (size_t r = 0; r < program.roles.size(); ++r)
    for (size_t i = 0; i < program.roles[r].tasks.size(); ++i) {
      const Task& t = program.roles[r].tasks[i];
      if (t.kind != TaskKind::Send) continue;
      sent[{program.roles[r].pipeline_rank, t.peer, t.direction, t.microbatch}].push_back(next);
      flow[{int(r), i}] = next++;
    }
  std::map<TransferKey, size_t> received;
  for (size_t r = 0; r < program.roles.size(); ++r)
    for (size_t i = 0; i < program.roles[r].tasks.size(); ++i) {
      const Task& t = program.roles[r].tasks[i];
      if (t.kind != TaskKind::Recv) continue;
      const TransferKey key{t.peer, program.roles[r].pipeline_rank, t.direction, t.microbatch};
      const auto it = sent.find(key);
      size_t& n = received[key];
      if (it != sent.end() && n < it->second.size()) flow[{int(r), i}] = it->second[n++];
    }
  return flow;
}

}  // namespace

void write_perfetto_trace(std::ostream& out, const Program& program, const Evaluation& ev) {
  PacketStream stream(out);
  describe_tracks(stream, program);
  const auto flows = pair_transfers(program);
  protowire::Writer packet, event;
  for (size_t r = 0; r < program.roles.size(); ++r) {
    const Role& role = program.roles[r];
    for (size_t i = 0; i < role.tasks.size(); ++i) {
      const Task& t = role.tasks[i];
      const TaskTiming& tm = ev.roles[r].tasks[i];
      const std::uint64_t track = t.kind == TaskKind::Collective
                                      ? collective_uuid(role.pipeline_rank, t.stream, t.collective)
                                      : stream_uuid(role.pipeline_rank, t.stream);
      event.varint(pf::kType, pf::kSliceBegin);
      event.varint(pf::kTrackUuid, track);
      event.bytes(pf::kCategories, enum_name(t.kind, kTaskKindNames));
      event.bytes(pf::kName, t.name);
      if (const auto f = flows.find({int(r), i}); f != flows.end()) event.fixed64(pf::kFlowIds, f->second);
      packet.varint(pf::kTimestamp, nanoseconds(tm.start_s));
      packet.message(pf::kTrackEvent, event);
      stream.write(packet);
      event.clear();
      event.varint(pf::kType, pf::kSliceEnd);
      event.varint(pf::kTrackUuid, track);
      packet.varint(pf::kTimestamp, nanoseconds(tm.end_s));
      packet.message(pf::kTrackEvent, event);
      stream.write(packet);
      event.clear();
    }
  }
}

}  // namespace paratwin
