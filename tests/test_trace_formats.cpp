// The trace formats of `--trace`, end to end: each decoded with its own library and compared, task by
// task, with the Chrome JSON trace of the same plan.
#define BOOST_TEST_MODULE trace_formats
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "paratwin_process.hpp"
#include "plan/io/gzip_stream.hpp"
#include "plan/io/protobuf_wire.hpp"
#include "plan/report/perfetto_trace.hpp"
#include "source_tree.hpp"

namespace fs = std::filesystem;
using paratwin::gunzip;
using paratwin::looks_gzipped;
using paratwin_test::Output;
using paratwin_test::run_paratwin;
using paratwin_test::slurp;

namespace {

const std::string kSource = paratwin_test::source_dir();

// The tasks ("X" events) of a Chrome trace: start and duration in microseconds, in file order.
std::vector<std::pair<double, double>> chrome_spans(const std::string& text) {
  std::vector<std::pair<double, double>> out;
  const nlohmann::json doc = nlohmann::json::parse(text);
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "X") out.emplace_back(e["ts"].get<double>(), e["dur"].get<double>());
  return out;
}

// A fresh directory holding `paratwin COMMAND` run once per trace name (`--trace DIR/NAME`).
fs::path write_traces(const std::string& tag, const std::string& command,
                      const std::vector<std::string>& names) {
  const fs::path dir = fs::temp_directory_path() / ("paratwin_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const std::string& name : names) {
    const Output r = run_paratwin(command + " --trace " + (dir / name).string());
    BOOST_TEST_INFO(r.text);
    BOOST_REQUIRE(r.status == 0);
  }
  return dir;
}

// What a .pftrace holds, decoded field by field with Perfetto's field numbers.
struct Decoded {
  std::map<std::uint64_t, std::uint64_t> tracks;  // uuid -> parent uuid (0: none)
  std::vector<std::pair<double, double>> spans;   // start and duration in microseconds
  std::vector<std::uint64_t> event_tracks;        // the track of each span
  std::map<std::uint64_t, int> flow_uses;         // flow id -> slices that carry it
  size_t packets = 0, unpaired_ends = 0;
};

Decoded decode_pftrace(const std::string& bytes) {
  namespace pf = paratwin::perfetto_field;
  using paratwin::protowire::Field;
  using paratwin::protowire::Reader;
  Decoded d;
  std::map<std::uint64_t, size_t> open;  // track -> index of its open span
  Reader trace(bytes);
  Field packet_field;
  while (trace.next(packet_field)) {
    BOOST_REQUIRE(packet_field.number == pf::kTracePacket);
    ++d.packets;
    std::uint64_t ts = 0;
    std::string_view event_bytes, track_bytes;
    Reader packet(packet_field.bytes);
    for (Field f; packet.next(f);) {
      if (f.number == pf::kTimestamp) ts = f.number_value;
      if (f.number == pf::kTrackEvent) event_bytes = f.bytes;
      if (f.number == pf::kTrackDescriptor) track_bytes = f.bytes;
    }
    if (!track_bytes.empty()) {
      std::uint64_t uuid = 0, parent = 0;
      Reader track(track_bytes);
      for (Field f; track.next(f);) {
        if (f.number == pf::kUuid) uuid = f.number_value;
        if (f.number == pf::kParentUuid) parent = f.number_value;
      }
      d.tracks[uuid] = parent;
    }
    if (event_bytes.empty()) continue;
    std::uint64_t type = 0, track = 0;
    Reader event(event_bytes);
    for (Field f; event.next(f);) {
      if (f.number == pf::kType) type = f.number_value;
      if (f.number == pf::kTrackUuid) track = f.number_value;
      if (f.number == pf::kFlowIds) ++d.flow_uses[f.number_value];
    }
    if (type == pf::kSliceBegin) {
      open[track] = d.spans.size();
      d.spans.emplace_back(double(ts) / 1e3, 0.0);
      d.event_tracks.push_back(track);
    } else if (type == pf::kSliceEnd && open.count(track)) {
      auto& span = d.spans[open[track]];
      span.second = double(ts) / 1e3 - span.first;
      open.erase(track);
    } else {
      ++d.unpaired_ends;
    }
  }
  return d;
}

}  // namespace

// `--trace FILE.json.gz` writes the JSON trace of the same plan, gzip-compressed: decoded, it holds the
// same tasks at the same times; no temporary file is left beside it.
BOOST_AUTO_TEST_CASE(plan_writes_a_gzip_trace_that_decodes_to_the_json_trace) {
  const fs::path dir = write_traces("tracegz", "plan " + kSource + "/scenarios/gpt3-175b-1024-a100.yaml",
                                    {"trace.json", "trace.json.gz"});
  const std::string plain = (dir / "trace.json").string(), packed = (dir / "trace.json.gz").string();
  const std::string json_text = slurp(plain), gz_bytes = slurp(packed);
  BOOST_REQUIRE(looks_gzipped(gz_bytes));
  BOOST_TEST(gz_bytes.size() * 5 < json_text.size());
  const std::string decoded = gunzip(gz_bytes);
  const auto want = chrome_spans(json_text), got = chrome_spans(decoded);
  BOOST_TEST(want.size() > 1000);
  BOOST_TEST(got.size() == want.size());
  BOOST_TEST((got == want));
  BOOST_TEST(decoded == json_text);
  size_t files = 0;
  for ([[maybe_unused]] const auto& f : fs::directory_iterator(dir)) ++files;
  BOOST_TEST(files == 2u);  // trace.json and trace.json.gz, no temporary file left
  fs::remove_all(dir);
}

// `simulate --trace FILE.json.gz` compresses the simulator's trace (link counters and all) the same way.
BOOST_AUTO_TEST_CASE(simulate_writes_a_gzip_trace_that_decodes_to_its_json_trace) {
  const fs::path dir = write_traces("simgz", "simulate " + kSource + "/scenarios/quickstart.yaml --seed 3",
                                    {"trace.json", "trace.json.gz"});
  const std::string plain = (dir / "trace.json").string(), packed = (dir / "trace.json.gz").string();
  const std::string gz_bytes = slurp(packed);
  BOOST_REQUIRE(looks_gzipped(gz_bytes));
  BOOST_TEST(gunzip(gz_bytes) == slurp(plain));
  fs::remove_all(dir);
}

// `--trace FILE.pftrace`: Perfetto's TracePackets, decoded: every track an event names is described
// (collective tracks under their stream's), one slice per task at the JSON trace's times (to the
// nanosecond the protobuf keeps), every begin ended, and each flow id on exactly a send and a receive.
BOOST_AUTO_TEST_CASE(plan_writes_a_perfetto_trace_with_the_json_traces_tasks) {
  const fs::path dir = write_traces("pftrace", "plan " + kSource + "/scenarios/gpt3-175b-1024-a100.yaml",
                                    {"trace.json", "trace.pftrace"});
  const std::string plain = (dir / "trace.json").string(), packed = (dir / "trace.pftrace").string();
  const auto want = chrome_spans(slurp(plain));
  const std::string bytes = slurp(packed);
  const Decoded got = decode_pftrace(bytes);
  BOOST_TEST(bytes.size() * 2 < slurp(plain).size());
  BOOST_TEST(want.size() > 1000);
  BOOST_REQUIRE(got.spans.size() == want.size());
  BOOST_TEST(got.unpaired_ends == 0u);
  for (size_t i = 0; i < want.size(); ++i) {
    BOOST_TEST(std::abs(got.spans[i].first - want[i].first) <= 1e-3, "task " << i);
    BOOST_TEST(std::abs(got.spans[i].second - want[i].second) <= 2e-3, "task " << i);
  }
  size_t child_tracks = 0;
  for (const auto& [uuid, parent] : got.tracks)
    if (parent != 0) {
      BOOST_TEST(got.tracks.count(parent) == 1u);
      child_tracks += got.tracks.at(parent) != 0;  // a collective's track under a stream's
    }
  BOOST_TEST(child_tracks > 0u);
  for (std::uint64_t track : got.event_tracks) BOOST_TEST(got.tracks.count(track) == 1u);
  BOOST_TEST(!got.flow_uses.empty());
  for (const auto& [id, uses] : got.flow_uses) BOOST_TEST(uses == 2, "flow " << id);
  // simulate keeps to JSON: asked for .pftrace, it says so and exits 2.
  const Output refused = run_paratwin("simulate " + kSource + "/scenarios/quickstart.yaml --trace " + packed);
  BOOST_TEST(refused.status == 2);
  BOOST_TEST(refused.text.find(".pftrace") != std::string::npos);
  fs::remove_all(dir);
}
