// Checkpoints of a live run: weights, optimizer state, RNG seed, data position, step and plan, in a
// directory per step (DIR/step-00000040/) with a manifest of sizes and checksums written last. A
// checkpoint appears whole or not at all: written under a temporary name, every file flushed to
// disk, then the directory renamed into place.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
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

// Reads one checkpoint directory; throws std::runtime_error saying what is wrong with it. A checkpoint
// may come from elsewhere: the manifest is checked before any other file is read and before anything
// is allocated for it (it names exactly the four files a checkpoint holds, nothing outside its
// directory; sizes that match the files on disk and this model; no links), then the checksums, then
// every field of state.json.
TrainingState load_checkpoint(const std::string& path, size_t expected_parameters);

// What a manifest promises, checked against this model: the four files and their sizes and checksums.
struct CheckpointManifest {
  struct File {
    std::string name;
    uint64_t bytes = 0;
    std::string fnv1a64;  // 16 hex digits
  };
  int64_t step = 0;
  std::vector<File> files;  // weights.bin, optimizer.bin, state.json, plan.yaml
};
// Parses MANIFEST.json's text; throws std::runtime_error saying what is wrong.
CheckpointManifest parse_checkpoint_manifest(std::string_view text, size_t expected_parameters);
// Parses state.json's text (weights and moments left empty); throws std::runtime_error.
TrainingState parse_checkpoint_state(std::string_view text);

// The step, model and global batch of the newest checkpoint in `dir` whose manifest and state.json
// read (the tensors are not read): to refuse a resume of another model before any rank starts.
// nullopt when there is none.
std::optional<TrainingState> peek_latest_checkpoint(const std::string& dir);

// Removes what writers killed mid-write left in `dir` (temporary directories and files, never a
// complete checkpoint); returns how many. Only while no writer runs there.
int remove_unfinished_checkpoints(const std::string& dir);

// FNV-1a, 64 bits: enough to catch torn writes and flipped bits (not an adversary).
uint64_t fnv1a64(const void* data, size_t bytes);

}  // namespace paratwin::exec
