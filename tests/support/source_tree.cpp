#include "source_tree.hpp"

namespace paratwin_test {

const std::string& source_dir() {
  static const std::string dir = PARATWIN_SOURCE_DIR;
  return dir;
}

const std::string& build_dir() {
  static const std::string dir = PARATWIN_BUILD_DIR;
  return dir;
}

const std::string& bin_dir() {
  static const std::string dir = PARATWIN_BIN_DIR;
  return dir;
}

}  // namespace paratwin_test
