// Checkpoints of a live run: weights, optimizer state, RNG seed, data position, step and plan, in a
// directory per step (DIR/step-00000040/) with a manifest of sizes and checksums written last. A
// checkpoint appears whole or not at all: written under a temporary name, every file flushed to
// disk, then the directory renamed into place.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace paratwin::exec {

struct TrainingState {
  int64_t step = 0;            // steps done
  int64_t data_sequence = 0;   // global sequences consumed: where the data stream resumes
  uint64_t seed = 0;           // the run's seed (weights init); no other randomness is drawn
  int dp = 1;                  // ranks that wrote it (resume may use another number)
  int64_t global_batch = 0;    // sequences per step, kept on resume
  std::string model;           // the model's name; a checkpoint of another model is refused
  std::string plan_yaml;       // the plan it ran
  std::vector<double> losses;  // per step so far
  std::vector<float> weights;
  std::vector<float> adam_m, adam_v;
};

// Writes DIR/step-<step>/; creates DIR. Throws std::runtime_error naming the path on I/O errors.
// Returns the checkpoint's directory.
std::string save_checkpoint(const std::string& dir, const TrainingState& state);

struct CheckpointSearch {
  std::optional<TrainingState> state;  // the newest complete checkpoint, if any
  std::string path;                    // its directory
  std::vector<std::string> rejected;   // "DIR/step-N: why" for each newer one skipped
};

// The newest checkpoint in `dir` whose manifest, sizes and checksums all hold and whose weights have
// `expected_parameters` entries; corrupt or truncated ones are listed in `rejected`, never loaded.
CheckpointSearch load_latest_checkpoint(const std::string& dir, size_t expected_parameters);

// Reads one checkpoint directory; throws std::runtime_error saying what is wrong with it.
TrainingState load_checkpoint(const std::string& path, size_t expected_parameters);

// Removes what writers killed mid-write left in `dir` (temporary directories and files, never a
// complete checkpoint); returns how many. Only while no writer runs there.
int remove_unfinished_checkpoints(const std::string& dir);

// FNV-1a, 64 bits: enough to catch torn writes and flipped bits (not an adversary).
uint64_t fnv1a64(const void* data, size_t bytes);

}  // namespace paratwin::exec
