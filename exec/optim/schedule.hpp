// The learning-rate schedule (linear warm-up, then cosine decay to a floor) and global-norm gradient
// clipping: the two things besides AdamW that make a short run train stably.
#pragma once

#include <cstddef>
#include <cstdint>

namespace paratwin::exec {

struct LearningRate {
  float max = 3e-3f;
  float min_ratio = 0.1f;  // the floor, as a fraction of max
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;

  // The rate of step `step` (0-based): max x (step+1)/warmup during warm-up, then cosine to the floor.
  float at(int64_t step) const;
};

// Scale that brings a gradient of global norm `norm` within `max_norm` (1 when it already is).
float clip_scale(double norm, double max_norm);

// Sum of squares of grads [begin, end), on the rank's threads, in a fixed order of pieces (the same
// bits on any number of threads).
double sum_of_squares(const float* grads, size_t begin, size_t end);

}  // namespace paratwin::exec
