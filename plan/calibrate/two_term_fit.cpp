// Two-term least squares on relative residuals.
#include "plan/calibrate/two_term_fit.hpp"

#include <cmath>

namespace paratwin {

double rms_residual(const std::vector<Row>& rows, double x, double y) {
  double sum = 0;
  for (const Row& r : rows) sum += std::pow((r.c + r.a * x + r.b * y - r.time) / r.time, 2);
  return rows.empty() ? 0 : std::sqrt(sum / double(rows.size()));
}

TwoTermFit fit_two_terms(std::vector<Row> rows, double y_prior, bool fit_y) {
  std::erase_if(rows, [](const Row& r) { return !(r.time > 0) || (r.a <= 0 && r.b <= 0); });
  TwoTermFit f;
  f.samples = int(rows.size());
  f.y = y_prior;
  if (rows.empty()) return f;
  // Normal equations of the rows divided by their time (relative residuals); the target of each is
  // the share of its time the two terms must explain, (time - c) / time.
  double aa = 0, ab = 0, bb = 0, a1 = 0, b1 = 0;
  for (const Row& r : rows) {
    const double a = r.a / r.time, b = r.b / r.time, target = (r.time - r.c) / r.time;
    aa += a * a, ab += a * b, bb += b * b, a1 += a * target, b1 += b * target;
  }
  const double det = aa * bb - ab * ab;
  // Joint only when the columns are far from proportional (more than ~6 degrees apart): measurements
  // are noisy, and a nearly singular fit would turn a few percent of noise into any split at all.
  if (fit_y && aa > 0 && bb > 0 && det > 1e-2 * aa * bb) {
    const double x = (a1 * bb - b1 * ab) / det, y = (b1 * aa - a1 * ab) / det;
    if (x > 0 && y >= 0) {
      f.x = x, f.y = y, f.both = true;
      f.rms = rms_residual(rows, x, y);
      return f;
    }
  }
  double work = 0, time = 0;
  for (const Row& r : rows) work += r.a, time += r.time - r.c - r.b * y_prior;
  f.x = work > 0 && time > 0 ? time / work : 0;
  f.rms = rms_residual(rows, f.x, f.y);
  return f;
}

}  // namespace paratwin
