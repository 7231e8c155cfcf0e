// The catalog's model and topology files by name, for tests that cost one model on one cluster.
#pragma once

#include <string>

#include "plan/spec/scenario.hpp"
#include "source_tree.hpp"

namespace paratwin::test {

inline ModelSpec model(const std::string& name) {
  return load_model_file(paratwin_test::source_dir() + "/models/" + name + ".yaml");
}

inline ClusterSpec cluster(const std::string& name) {
  return load_cluster_file(paratwin_test::source_dir() + "/topologies/" + name + ".yaml");
}

}  // namespace paratwin::test
