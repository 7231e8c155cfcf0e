// The profile of a live run as `paratwin calibrate` reads it: the measured duration of every task of
// the Program, keyed by its task name, plus what the Program was lowered from (model, training and
// plan; the cluster is the one being calibrated). exec/ writes profiles; this side reads them back and
// lowers the same Program again, so that every measurement meets the work the cost model charged.
#pragma once

#include <string>
#include <vector>

#include "plan/ir/program.hpp"
#include "plan/spec/scenario.hpp"

namespace paratwin {

inline constexpr const char* kProfileFormat = "paratwin-profile";
// 2 (2026-12-07): the Program holds the data loader's copies (Purpose::InputBatch); a profile of version 1
// has none, and lower_profile lets it stand for the Program without them.
inline constexpr int kProfileVersion = 2;

// The profile's "inputs": a scenario in YAML with the model written out in full, the training job
// and the complete plan, and no cluster.
std::string profile_inputs_yaml(const ScenarioSpec& scenario, const Plan& plan);

// One task as measured (medians over the measured steps and the ranks).
struct ProfiledTask {
  std::string name;
  int index = 0;
  Location where;     // of its entry in the profile, for messages
  int count = 0;      // samples
  double wall_s = 0;  // median wall time
  // Compute tasks: the thread's CPU time, and the part of it inside dense and attention GEMMs and
  // inside the attention core's softmax over the scores (0: not timed apart, as on a GPU).
  double cpu_s = 0, gemm_s = 0, attention_s = 0, scores_s = 0;
  double cpu_cv = -1;     // step-to-step coefficient of variation of the CPU time (each rank against its
                          // mean); -1: not recorded (profiles before it)
  double gemm_flops = 0;  // as the Program that was run counted them
  // Collectives: the bytes moved, and the duration on the rank that joined last (the transfer alone).
  double bytes = 0, transfer_s = 0;
};

struct Profile {
  std::string path;
  int version = kProfileVersion;
  std::string scenario, backend, model, cluster, pool, device;
  int ranks = 0;
  int nodes = 1;    // hosts the ranks ran on (runs across hosts: --hosts, --hostfile, Slurm)
  int threads = 1;  // per rank (CPU runs): each rank a device of that many cores (rank_threads.hpp)
  int steps = 0, measured_steps = 0;
  double step_cpu_cv = -1;           // of a rank's compute tasks' CPU time together; -1: not recorded (older)
  double step_cpu_correlation = -1;  // of the ranks' step totals, pairwise; -1: not recorded (older)
  double rank_cpu_cv = -1;           // of the ranks' mean step totals; -1: not recorded (older)
  std::string inputs;                // profile_inputs_yaml of the run
  Location inputs_location;
  std::vector<ProfiledTask> tasks;
  // MoE runs: the tokens the measured ranks routed to each of `routed_experts` experts, per MoE layer
  // they ran ({model layer, tokens per expert}); empty for dense models.
  int routed_experts = 0;
  std::vector<std::pair<int, std::vector<double>>> routed;
  Location routed_location;
};

// Reads a profile written by `paratwin run --profile`. Throws InputError (file:line:col) when the file
// is not such a profile or a field is missing or malformed.
Profile load_profile(const std::string& path);
// The same from a document already read; `path` names it in messages (fuzzing).
Profile parse_profile(const DocNode& document, const std::string& path);

// The cluster named on the command line: a catalog name or a path. Throws InputError.
ClusterSpec load_cluster_argument(const std::string& cluster);

// A profile with the Program it measured.
struct ProfiledRun {
  Profile profile;
  ScenarioSpec scenario;  // the inputs on the cluster being calibrated, sized to the profile's ranks
  Program program;
};

// Lowers the profile's inputs on `cluster` (a catalog name or a path; a cluster of one pool is resized
// to the profile's hosts and ranks, as `paratwin run --ranks` and `--hosts` do) and checks that the profile
// measured exactly that Program: the same tasks in the same order with the same work. Throws InputError
// naming every task that is missing, extra or different.
ProfiledRun lower_profile(const Profile& profile, const std::string& cluster);

}  // namespace paratwin
