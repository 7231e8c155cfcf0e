// Two candidates side by side: each plan field and result on one row, with which side is better
// where "better" has a direction (faster, higher MFU, less memory).
#pragma once

#include <QString>
#include <vector>

#include "plan/search/optimizer.hpp"

namespace paratwin::gui {

struct ComparisonRow {
  QString label;
  QString a, b;
  int better = 0;  // -1: a is better, 1: b is better, 0: same or no direction
  bool differs = false;
};

std::vector<ComparisonRow> compare(const Candidate& a, const Candidate& b);

}  // namespace paratwin::gui
