// Whether every rank of a job sees its checkpoint directory as one: on several hosts it must be a
// shared file system, or a restart would find each host's own checkpoints (or none).
#pragma once

#include <string>

#include "exec/comm/communicator.hpp"

namespace paratwin::exec {

// A collective over `comm`: each rank writes a probe file into `directory` (created if missing), then
// reads back every other rank's and removes its own. Throws InputError on every rank, all with the
// same message, when some rank cannot write there or does not see another rank's file (naming the
// first such rank, its host and the file it missed).
void probe_shared_directory(const std::string& directory, Communicator& comm);

}  // namespace paratwin::exec
