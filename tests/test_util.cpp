// The small utilities every layer shares (plan/util): the seeded generator, child processes and
// axis ticks.
#define BOOST_TEST_MODULE util
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "plan/io/gzip_stream.hpp"
#include "plan/util/axis_ticks.hpp"
#include "plan/util/child_process.hpp"
#include "plan/util/seeded_random.hpp"

using namespace paratwin;

BOOST_AUTO_TEST_CASE(seeded_random_is_splitmix64) {
  // The reference sequence of SplitMix64 seeded with 1234567 (Vigna's splitmix64.c).
  SeededRandom r(1234567);
  BOOST_TEST(r.next() == 6457827717110365317ULL);
  BOOST_TEST(r.next() == 3203168211198807973ULL);
  BOOST_TEST(r.next() == 9817491932198370423ULL);
  BOOST_TEST(r.next() == 4593380528125082431ULL);
  BOOST_TEST(r.next() == 16408922859458223821ULL);
}

BOOST_AUTO_TEST_CASE(seeded_random_draws_stay_in_their_ranges) {
  SeededRandom r(7);
  double sum = 0, sum_sq = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double u = r.uniform(), o = r.uniform_open();
    BOOST_REQUIRE(u >= 0.0 && u < 1.0);
    BOOST_REQUIRE(o > 0.0 && o < 1.0);
    BOOST_REQUIRE(r.below(5) < 5u);
    const double z = r.normal();
    sum += z, sum_sq += z * z;
  }
  BOOST_TEST(std::fabs(sum / n) < 0.05);
  BOOST_TEST(std::fabs(sum_sq / n - 1.0) < 0.05);
}

BOOST_AUTO_TEST_CASE(a_spawned_child_reads_and_writes_through_pipes) {
  const ChildProcess child =
      spawn_process({"/bin/cat"}, {.input = ChildStream::Pipe, .output = ChildStream::Pipe});
  const std::string text = "through the pipes\n";
  BOOST_REQUIRE(::write(child.to, text.data(), text.size()) == ssize_t(text.size()));
  ::close(child.to);
  std::string back;
  char buf[256];
  for (ssize_t n; (n = ::read(child.from, buf, sizeof buf)) > 0;) back.append(buf, size_t(n));
  ::close(child.from);
  BOOST_TEST(back == text);
  BOOST_TEST(exit_code_of(wait_for_process(child.pid)) == 0);
}

BOOST_AUTO_TEST_CASE(exit_codes_and_signals_read_as_a_shell_reports_them) {
  BOOST_TEST(exit_code_of(wait_for_process(spawn_process({"false"}, {.search_path = true}).pid)) == 1);
  const pid_t sleeper = spawn_process({"sleep", "30"}, {.search_path = true, .own_process_group = true}).pid;
  BOOST_TEST(::getpgid(sleeper) == sleeper);
  ::kill(sleeper, SIGKILL);
  BOOST_TEST(exit_code_of(wait_for_process(sleeper)) == 128 + SIGKILL);
}

BOOST_AUTO_TEST_CASE(a_missing_executable_is_an_error_naming_it) {
  try {
    spawn_process({"/nonexistent/paratwin-nothing"});
    BOOST_FAIL("spawned a missing executable");
  } catch (const std::runtime_error& e) {
    BOOST_TEST(std::string(e.what()).find("/nonexistent/paratwin-nothing") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(a_forked_copy_hands_back_its_text_and_status) {
  const ForkedResult ok = run_forked([] { return std::pair<std::string, int>{"computed in the copy", 0}; });
  BOOST_TEST(ok.output == "computed in the copy");
  BOOST_TEST(exit_code_of(ok.status) == 0);
  const ForkedResult failed = run_forked([] { return std::pair<std::string, int>{"", 3}; });
  BOOST_TEST(exit_code_of(failed.status) == 3);
  const ForkedResult threw =
      run_forked([]() -> std::pair<std::string, int> { throw std::runtime_error("in the copy"); });
  BOOST_TEST(threw.output.empty());
  BOOST_TEST(exit_code_of(threw.status) == 1);
}

BOOST_AUTO_TEST_CASE(steps_are_one_two_five_or_with_two_and_a_half) {
  BOOST_TEST(nice_step(1.0, 5) == 0.2);
  BOOST_TEST(nice_step(7.0, 5) == 2.0);
  BOOST_TEST(nice_step(12.0, 6) == 2.0);
  BOOST_TEST(nice_step(13.0, 6) == 5.0);
  BOOST_TEST(nice_step(13.0, 6, TickSteps::OneTwoHalfTwoFive) == 2.5);
  BOOST_TEST(nice_step(0.0, 4) > 0.0);
}

BOOST_AUTO_TEST_CASE(ticks_are_the_multiples_within_the_range) {
  namespace tt = boost::test_tools;
  BOOST_TEST(multiples_within(-0.3, 1.0, 0.2) == (std::vector<double>{-0.2, 0.0, 0.2, 0.4, 0.6, 0.8, 1.0}),
             tt::tolerance(1e-12) << tt::per_element());
  BOOST_TEST(multiples_within(-0.3, 1.0, 0.2)[1] == 0.0);  // exactly zero, for its label
  const auto [lo, hi] = widen_to_multiples(0.3, 9.1, 2.0);
  BOOST_TEST(lo == 0.0);
  BOOST_TEST(hi == 10.0);
}

// Gzip written in pieces across zlib's 64 KiB chunks reads back whole; damage and truncation are errors.
BOOST_AUTO_TEST_CASE(gzip_stream_round_trips_and_rejects_damaged_data) {
  std::string text;
  SeededRandom random(7);
  for (int i = 0; i < 40000; ++i) text += "event " + std::to_string(random.uniform() * 1e6) + "\n";
  BOOST_REQUIRE(text.size() > 3 * (size_t(1) << 16));
  std::ostringstream sink;
  GzipOStream gz(sink);
  gz << text.substr(0, 1000);
  gz.write(text.data() + 1000, std::streamsize(text.size() - 1000));
  gz.finish();
  const std::string packed = sink.str();
  BOOST_TEST(looks_gzipped(packed));
  BOOST_TEST(packed.size() < text.size() / 2);
  BOOST_TEST(gunzip(packed) == text);
  BOOST_TEST(gunzip(packed + packed) == text + text);  // concatenated members, as `cat` makes them
  BOOST_CHECK_THROW(gunzip(packed.substr(0, packed.size() / 2)), std::runtime_error);
  std::string damaged = packed;
  damaged[damaged.size() / 2] = char(damaged[damaged.size() / 2] ^ 0x55);
  BOOST_CHECK_THROW(gunzip(damaged), std::runtime_error);
  BOOST_CHECK_THROW(gunzip("plain text"), std::runtime_error);
  BOOST_TEST(is_gzip_path("trace.json.gz"));
  BOOST_TEST(!is_gzip_path("trace.json"));
}
