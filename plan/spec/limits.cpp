// Limits in force: defaults, or the environment's values.
#include "plan/spec/limits.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>

#include "plan/spec/checked.hpp"

#include "plan/spec/diagnostics.hpp"

namespace paratwin {

std::int64_t limit_value(const InputLimit& limit) {
  const char* text = std::getenv(limit.variable);
  if (!text || !*text) return limit.default_value;
  std::int64_t value = 0;
  const char* end = text + std::strlen(text);
  const auto [at, error] = std::from_chars(text, end, value);
  if (error != std::errc() || at != end || value < 1)
    throw InputError(Location{std::string("<") + limit.variable + ">"},
                     std::string("expected a whole number >= 1 for ") + limit.variable + " (" + limit.what +
                         "), got '" + text + "'");
  return value;
}

std::int64_t estimated_role_tasks(std::int64_t virtual_stages, std::int64_t microbatches, std::int64_t layers,
                                  std::int64_t pp, int zero) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  const std::int64_t units = zero >= 2 ? layers / std::max<std::int64_t>(pp, 1) + 2 : 0;
  const std::optional<std::int64_t> passes = checked_product({microbatches, virtual_stages, 24});
  const std::optional<std::int64_t> sharded = checked_product({microbatches, units, 3});
  const std::optional<std::int64_t> per_layer = checked_product({layers, 4});
  if (!passes || !sharded || !per_layer || *passes > kMax - *sharded - *per_layer - 64) return kMax;
  return *passes + *sharded + *per_layer + 64;
}

std::int64_t estimated_program_tasks(std::int64_t pp, std::int64_t virtual_stages, std::int64_t microbatches,
                                     std::int64_t layers, int zero) {
  return checked_product({pp, estimated_role_tasks(virtual_stages, microbatches, layers, pp, zero)})
      .value_or(std::numeric_limits<std::int64_t>::max());
}

std::string program_size_problem(std::int64_t pp, std::int64_t virtual_stages, std::int64_t microbatches,
                                 std::int64_t layers, int zero) {
  const std::int64_t tasks = estimated_program_tasks(pp, virtual_stages, microbatches, layers, zero);
  if (tasks <= limit_value(kProgramTasksLimit)) return "";
  const bool saturated = tasks == std::numeric_limits<std::int64_t>::max();
  return "the Program would hold " +
         (saturated ? std::string("more than 9.2e18") : "about " + std::to_string(tasks)) + " tasks (" +
         std::to_string(microbatches) + " micro-batches per step x " + std::to_string(virtual_stages) +
         " chunks on each of " + std::to_string(pp) +
         " pipeline ranks); fewer micro-batches per step bring it under: raise plan.micro_batch or plan.dp, "
         "or "
         "lower training.global_batch" +
         limit_note(kProgramTasksLimit);
}

std::string limit_note(const InputLimit& limit) {
  return "; ParaTwin's limit is " + std::to_string(limit_value(limit)) + " " + limit.what + " (set " +
         limit.variable + " to raise it; see docs/limits.md)";
}

}  // namespace paratwin
