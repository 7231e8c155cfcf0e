// Least squares of measured times against two terms of the cost model (time ~ c + a x + b y), on
// relative residuals: what `calibrate` fits every pair of rates with (plan/calibrate/fit.hpp).
#pragma once

#include <vector>

namespace paratwin {

// One measured task: the work the model divides by two figures (a x: bytes over a bandwidth, b y:
// launches or steps times a latency), a part the fitted figures do not touch (c), and the time.
struct Row {
  double a = 0, b = 0, time = 0;
  double c = 0;
};

struct TwoTermFit {
  double x = 0, y = 0;
  bool both = false;  // y was fitted too (else it kept its prior)
  int samples = 0;
  double rms = 0;  // relative residual
};

// The rms of (c + a x + b y - time) / time over the rows.
double rms_residual(const std::vector<Row>& rows, double x, double y);

// Fits x and y minimizing the relative residuals. y keeps `y_prior` unless `fit_y` and the rows tell
// the two terms apart (a and b not in the same proportion in every row) with a positive result; then
// x alone is fitted so that the total time comes out right. Rows without a positive time or work are
// left out.
TwoTermFit fit_two_terms(std::vector<Row> rows, double y_prior, bool fit_y = true);

}  // namespace paratwin
