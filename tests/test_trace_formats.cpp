// The trace formats of `--trace`, end to end: each decoded with its own library and compared, task by
// task, with the Chrome JSON trace of the same plan.
#define BOOST_TEST_MODULE trace_formats
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "paratwin_process.hpp"
#include "plan/io/gzip_stream.hpp"

namespace fs = std::filesystem;
using paratwin::gunzip;
using paratwin::looks_gzipped;
using paratwin_test::Output;
using paratwin_test::run_paratwin;
using paratwin_test::slurp;

namespace {

const std::string kSource = PARATWIN_SOURCE_DIR;

}  // namespace

// `--trace FILE.json.gz` writes the JSON trace of the same plan, gzip-compressed: decoded, it holds the
// same tasks at the same times; no temporary file is left beside it.
BOOST_AUTO_TEST_CASE(plan_writes_a_gzip_trace_that_decodes_to_the_json_trace) {
  const fs::path dir = fs::temp_directory_path() / ("paratwin_tracegz_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string scenario = kSource + "/scenarios/gpt3-175b-1024-a100.yaml";
  const std::string plain = (dir / "trace.json").string(), packed = (dir / "trace.json.gz").string();
  for (const std::string& trace : {plain, packed}) {
    const Output r = run_paratwin("plan " + scenario + " --trace " + trace);
    BOOST_TEST_INFO(r.text);
    BOOST_REQUIRE(r.status == 0);
  }
  const std::string json_text = slurp(plain), gz_bytes = slurp(packed);
  BOOST_REQUIRE(looks_gzipped(gz_bytes));
  BOOST_TEST(gz_bytes.size() * 5 < json_text.size());
  const std::string decoded = gunzip(gz_bytes);
  // The tasks ("X" events) and their times, read from each.
  const auto spans = [](const std::string& text) {
    std::vector<std::pair<double, double>> out;
    const nlohmann::json doc = nlohmann::json::parse(text);
    for (const auto& e : doc["traceEvents"])
      if (e["ph"] == "X") out.emplace_back(e["ts"].get<double>(), e["dur"].get<double>());
    return out;
  };
  const auto want = spans(json_text), got = spans(decoded);
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
  const fs::path dir = fs::temp_directory_path() / ("paratwin_simgz_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string scenario = kSource + "/scenarios/quickstart.yaml";
  const std::string plain = (dir / "trace.json").string(), packed = (dir / "trace.json.gz").string();
  for (const std::string& trace : {plain, packed}) {
    const Output r = run_paratwin("simulate " + scenario + " --seed 3 --trace " + trace);
    BOOST_TEST_INFO(r.text);
    BOOST_REQUIRE(r.status == 0);
  }
  const std::string gz_bytes = slurp(packed);
  BOOST_REQUIRE(looks_gzipped(gz_bytes));
  BOOST_TEST(gunzip(gz_bytes) == slurp(plain));
  fs::remove_all(dir);
}
