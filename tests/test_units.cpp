// Quantities with units: parsing, rejection of bare numbers and wrong units, formatting.
#define BOOST_TEST_MODULE units
#include <boost/test/unit_test.hpp>

#include "plan/spec/units.hpp"

using namespace paratwin;

static double parse(const char* text, Dimension d) {
  auto r = parse_quantity(text, d);
  BOOST_TEST_INFO(text << ": " << r.error);
  BOOST_REQUIRE(r.value.has_value());
  return *r.value;
}

static std::string error_of(const char* text, Dimension d) {
  auto r = parse_quantity(text, d);
  BOOST_REQUIRE(!r.value.has_value());
  return r.error;
}

BOOST_AUTO_TEST_CASE(bandwidth_in_bits_is_divided_by_eight) {
  BOOST_TEST(parse("200Gbps", Dimension::Bandwidth) == 25e9);
  BOOST_TEST(parse("400 Gb/s", Dimension::Bandwidth) == 50e9);
  BOOST_TEST(parse("25GBps", Dimension::Bandwidth) == 25e9);
  BOOST_TEST(parse("1GiBps", Dimension::Bandwidth) == 1073741824.0);
}

BOOST_AUTO_TEST_CASE(data_sizes_distinguish_decimal_and_binary_prefixes) {
  BOOST_TEST(parse("80GiB", Dimension::DataSize) == 80.0 * 1024 * 1024 * 1024);
  BOOST_TEST(parse("80GB", Dimension::DataSize) == 80e9);
  BOOST_TEST(parse("512 MiB", Dimension::DataSize) == 512.0 * 1024 * 1024);
}

BOOST_AUTO_TEST_CASE(durations_from_nanoseconds_to_weeks) {
  BOOST_TEST(parse("1.5us", Dimension::Duration) == 1.5e-6, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(parse("30min", Dimension::Duration) == 1800.0);
  BOOST_TEST(parse("54d", Dimension::Duration) == 54 * 86400.0);
  BOOST_TEST(parse("2h", Dimension::Duration) == 7200.0);
}

BOOST_AUTO_TEST_CASE(flop_rates_power_and_money) {
  BOOST_TEST(parse("312Tflops", Dimension::FlopRate) == 312e12);
  BOOST_TEST(parse("989 TFLOP/s", Dimension::FlopRate) == 989e12);
  BOOST_TEST(parse("700W", Dimension::Power) == 700.0);
  BOOST_TEST(parse("$2.50", Dimension::Money) == 2.5);
  BOOST_TEST(parse("$1.2M", Dimension::Money) == 1.2e6);
}

BOOST_AUTO_TEST_CASE(counts_accept_bare_numbers_and_scales) {
  BOOST_TEST(parse("15T", Dimension::Count) == 15e12);
  BOOST_TEST(parse("300B", Dimension::Count) == 300e9);
  BOOST_TEST(parse("1e9", Dimension::Count) == 1e9);
}

BOOST_AUTO_TEST_CASE(bare_number_is_rejected_where_a_unit_is_needed) {
  BOOST_TEST(error_of("200", Dimension::Bandwidth) ==
             "expected a bandwidth with a unit such as 200Gbps or 25GBps, got bare number '200'");
}

BOOST_AUTO_TEST_CASE(unit_of_another_dimension_is_named) {
  BOOST_TEST(error_of("80GB", Dimension::Bandwidth) ==
             "'80GB' is a data size; expected a bandwidth such as "
             "200Gbps or 25GBps");
}

BOOST_AUTO_TEST_CASE(misspelled_unit_gets_the_nearest_one) {
  const std::string e = error_of("200Gbs", Dimension::Bandwidth);
  BOOST_TEST(e.find("unknown unit 'Gbs'") != std::string::npos);
  BOOST_TEST(e.find("did you mean 'Gbps'?") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(negative_and_non_numeric_values_are_rejected) {
  BOOST_TEST(error_of("-5GB", Dimension::DataSize).find("non-negative") != std::string::npos);
  BOOST_TEST(error_of("lots", Dimension::DataSize).find("expected a data size") != std::string::npos);
  BOOST_TEST(error_of("", Dimension::Duration).find("expected a duration") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(typed_quantities_combine_into_time) {
  const Seconds t = Bytes(50e9) / BytesPerSecond(25e9);
  BOOST_TEST(t.value() == 2.0);
  const Seconds c = Flops(312e12) / FlopsPerSecond(312e12);
  BOOST_TEST(c.value() == 1.0);
}

BOOST_AUTO_TEST_CASE(formatting_picks_a_readable_unit) {
  BOOST_TEST(format_quantity(80.0 * 1024 * 1024 * 1024, Dimension::DataSize) == "80 GiB");
  BOOST_TEST(format_quantity(1.5e-6, Dimension::Duration) == "1.50 us");
  BOOST_TEST(format_quantity(312e12, Dimension::FlopRate) == "312 TFLOP/s");
  BOOST_TEST(format_quantity(2.5, Dimension::Money) == "$2.50");
  BOOST_TEST(format_count(174.6e9) == "174.60B");
}
