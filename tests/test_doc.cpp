// Located YAML documents: positions, duplicate keys, merging and --set overrides.
#define BOOST_TEST_MODULE doc
#include <boost/test/unit_test.hpp>

#include "plan/spec/doc.hpp"
#include "plan/spec/suggest.hpp"

using namespace paratwin;

BOOST_AUTO_TEST_CASE(every_node_knows_its_file_line_and_column) {
  DocNode d = parse_yaml("a: 1\nb:\n  c: [x, y]\n", "f.yaml");
  const DocNode* c = d.find("b")->find("c");
  BOOST_REQUIRE(c);
  BOOST_TEST(c->location.str() == "f.yaml:3:6");
  BOOST_TEST(c->items[1].location.str() == "f.yaml:3:10");
  BOOST_TEST(d.entries[1].key_location.str() == "f.yaml:2:1");
}

BOOST_AUTO_TEST_CASE(quoted_scalars_are_told_apart_from_plain_ones) {
  DocNode d = parse_yaml("a: \"8\"\nb: 8\n", "f.yaml");
  BOOST_TEST(d.find("a")->quoted);
  BOOST_TEST(!d.find("b")->quoted);
}

BOOST_AUTO_TEST_CASE(duplicate_keys_are_an_error_naming_the_first) {
  try {
    parse_yaml("a: 1\nb: 2\na: 3\n", "f.yaml");
    BOOST_FAIL("expected InputError");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()) == "f.yaml:3:1: error: duplicate key 'a' (first defined at line 1)");
  }
}

BOOST_AUTO_TEST_CASE(syntax_errors_carry_their_position) {
  try {
    parse_yaml("a: [1, 2\nb: 3\n", "f.yaml");
    BOOST_FAIL("expected InputError");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).rfind("f.yaml:", 0) == 0);
    BOOST_TEST(std::string(e.what()).find("YAML syntax error") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(deep_merge_overlays_mappings_and_replaces_the_rest) {
  DocNode base = parse_yaml("a: {x: 1, y: 2}\nb: [1]\n", "base.yaml");
  DocNode over = parse_yaml("a: {y: 3, z: 4}\nb: [2, 3]\n", "over.yaml");
  deep_merge(base, over);
  BOOST_TEST(base.find("a")->find("x")->scalar == "1");
  BOOST_TEST(base.find("a")->find("y")->scalar == "3");
  BOOST_TEST(base.find("a")->find("y")->location.file == "over.yaml");
  BOOST_TEST(base.find("b")->items.size() == 2u);
}

BOOST_AUTO_TEST_CASE(override_turns_a_reference_into_from_plus_fields) {
  DocNode d = parse_yaml("cluster: dgx-h100\n", "s.yaml");
  apply_override(d, parse_override("cluster.nodes=16"));
  const DocNode* c = d.find("cluster");
  BOOST_REQUIRE(c->is_mapping());
  BOOST_TEST(c->find("from")->scalar == "dgx-h100");
  BOOST_TEST(c->find("nodes")->scalar == "16");
  BOOST_TEST(c->find("nodes")->location.str() == "<--set cluster.nodes=16>:1:15");
}

BOOST_AUTO_TEST_CASE(override_values_are_yaml) {
  DocNode d = parse_yaml("plan: {tp: 2}\n", "s.yaml");
  apply_override(d, parse_override("plan.overlap={dp: true}"));
  BOOST_TEST(d.find("plan")->find("overlap")->find("dp")->scalar == "true");
  BOOST_TEST(d.find("plan")->find("tp")->scalar == "2");
}

BOOST_AUTO_TEST_CASE(malformed_overrides_are_input_errors) {
  BOOST_CHECK_THROW(parse_override("noequals"), InputError);
  BOOST_CHECK_THROW(parse_override("=3"), InputError);
  BOOST_CHECK_THROW(parse_override("a..b=3"), InputError);
  DocNode d = parse_yaml("plan: [1, 2]\n", "s.yaml");
  BOOST_CHECK_THROW(apply_override(d, parse_override("plan.tp.x=1")), InputError);
}

BOOST_AUTO_TEST_CASE(suggestions_find_typos_not_unrelated_words) {
  BOOST_TEST(nearest("hiden", {"hidden", "heads", "layers"}).value_or("") == "hidden");
  BOOST_TEST(nearest("interleave", {"gpipe", "1f1b", "interleaved"}).value_or("") == "interleaved");
  BOOST_TEST(nearest("mlp_kind", {"gpipe", "1f1b", "interleaved"}).has_value() == false);
  BOOST_TEST(edit_distance("1fb1", "1f1b") == 1);  // transposition
}
