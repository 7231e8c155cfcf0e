// The shipped catalog: every file loads, names match file names, and every scenario is runnable.
#define BOOST_TEST_MODULE catalog
#include <boost/test/unit_test.hpp>

#include "plan/spec/catalog.hpp"
#include "plan/spec/jobs.hpp"
#include "plan/spec/scenario.hpp"
#include "plan/topology/job_placement.hpp"
#include "source_tree.hpp"

using namespace paratwin;

static const Catalog catalog(paratwin_test::source_dir());

BOOST_AUTO_TEST_CASE(catalog_has_the_promised_entries) {
  const auto models = catalog.names(CatalogKind::Model);
  for (const char* name :
       {"gpt3-1.7b",   "gpt3-3.6b",   "gpt3-7.5b",    "gpt3-18.4b", "gpt3-39.1b", "gpt3-76.1b", "gpt3-145.6b",
        "gpt3-310.1b", "gpt3-529.6b", "gpt3-1t",      "gpt3-175b",  "llama2-7b",  "llama2-70b", "llama3-8b",
        "llama3-70b",  "llama3-405b", "mixtral-8x7b", "gpt2-124m",  "tiny-gpt",   "tiny-moe"})
    BOOST_TEST((std::find(models.begin(), models.end(), name) != models.end()), name);
  BOOST_TEST(catalog.find(CatalogKind::Scenario, "quickstart").has_value());
}

BOOST_AUTO_TEST_CASE(model_and_cluster_names_match_their_files) {
  for (const auto& e : catalog.list(CatalogKind::Model)) BOOST_TEST(load_model_file(e.path).name == e.name);
  for (const auto& e : catalog.list(CatalogKind::Topology))
    BOOST_TEST(load_cluster_file(e.path).name == e.name);
}

BOOST_AUTO_TEST_CASE(every_scenario_loads_and_passes_its_checks) {
  for (const auto& e : catalog.list(CatalogKind::Scenario)) {
    BOOST_TEST_CONTEXT(e.name) {
      if (holds_jobs(load_yaml_file(e.path))) {  // several jobs: loaded and placed
        JobsScenario jobs;
        BOOST_CHECK_NO_THROW(jobs = load_jobs_scenario(e.path, {}, catalog));
        BOOST_CHECK_NO_THROW(place_jobs(jobs));
        continue;
      }
      BOOST_CHECK_NO_THROW(load_scenario(e.path, {}, catalog));
    }
  }
}

BOOST_AUTO_TEST_CASE(unknown_names_are_not_found) {
  BOOST_TEST(!catalog.find(CatalogKind::Model, "gpt5").has_value());
  BOOST_TEST(!catalog.find(CatalogKind::Model, "../topologies/dgx-h100").has_value() == false);
}
