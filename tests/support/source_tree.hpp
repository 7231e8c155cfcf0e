// Where the suites and benchmarks find the repository's files and the built programs. The paths are
// compiled into source_tree.cpp alone, not into every suite: ccache keys a compile on its
// preprocessed text, so a path in a suite's string literals would make a clone at another path
// compile every suite anew.
#pragma once

#include <string>

namespace paratwin_test {

const std::string& source_dir();  // the repository: models/, topologies/, scenarios/, tests/, bench/
const std::string& build_dir();   // the build tree (screenshots/)
const std::string& bin_dir();     // the built programs (paratwin, paratwin-rank, the suites)

}  // namespace paratwin_test
