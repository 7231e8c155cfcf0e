// SimGrid library version.
#include "sim/engine_info.hpp"

#include <xbt/base.h>  // version.h relies on its declaration macros

#include <simgrid/version.h>

namespace paratwin::sim {

std::string simgrid_version() {
  int major = 0, minor = 0, patch = 0;
  sg_version_get(&major, &minor, &patch);
  return "SimGrid " + std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

}  // namespace paratwin::sim
