// The Timeline as Perfetto's native protobuf trace (`--trace FILE.pftrace`): a `Trace` message of
// TracePackets written one after another, never held whole. One process per pipeline stage (role),
// one thread track per stream, each collective kind on a child track of its stream, each task a
// slice (a begin and an end event), and a flow from every send to its receive. Perfetto reads this
// form faster and smaller than the JSON one.
#pragma once

#include <cstdint>
#include <ostream>

#include "plan/analytic/evaluate.hpp"
#include "plan/ir/program.hpp"

namespace paratwin {

void write_perfetto_trace(std::ostream& out, const Program& program, const Evaluation& evaluation);

// The field numbers of Perfetto's public schema (protos/perfetto/trace/trace_packet.proto,
// track_event/track_event.proto, track_descriptor.proto) that the writer uses; tests decode with them.
namespace perfetto_field {
constexpr int kTracePacket = 1;  // Trace.packet
// TracePacket
constexpr int kTimestamp = 8, kSequenceId = 10, kTrackEvent = 11, kSequenceFlags = 13, kTrackDescriptor = 60;
// TrackDescriptor, ProcessDescriptor, ThreadDescriptor
constexpr int kUuid = 1, kTrackName = 2, kProcess = 3, kThread = 4, kParentUuid = 5;
constexpr int kPid = 1, kProcessName = 6, kTid = 2, kThreadName = 5;
// TrackEvent
constexpr int kType = 9, kTrackUuid = 11, kCategories = 22, kName = 23, kFlowIds = 47;
constexpr std::uint64_t kSliceBegin = 1, kSliceEnd = 2;
}  // namespace perfetto_field

}  // namespace paratwin
