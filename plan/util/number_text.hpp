// A number printed with one printf conversion ("%.3f", "%.1f%%", "%.10g"): for messages and tables.
#pragma once

#include <cstdio>
#include <string>

namespace paratwin {

inline std::string format_number(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

}  // namespace paratwin
