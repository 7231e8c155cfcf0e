// What `paratwin run` checks before any rank starts, beside the plan (prepare_live_run): whatever the
// ranks could only fail at, the data, the checkpoint to resume and the memory the job needs, is refused
// with exit status 2 here instead of launched, counted as a failure and retried.
#pragma once

#include <string>
#include <vector>

#include "exec/run/live_run.hpp"

namespace paratwin::exec {

// The token file or text a run trains on: --data, else the catalog's small corpus.
std::string live_data_path(const LiveRunOptions& options);

// Throws InputError listing every problem: the data (readable, long enough for a sequence, no token
// outside the vocabulary), the newest checkpoint when resuming (of this model and global batch), the
// memory the job's ranks need by the twin's model (plus each rank's copy of the data) against this
// machine's memory, the tokens of all its steps in 64 bits, and the size of its --trace. Reads the data
// once; loads no tensor.
void check_before_launch(const LiveRunOptions& options, const LiveRunSetup& setup);

}  // namespace paratwin::exec
