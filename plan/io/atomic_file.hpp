// Output files appear whole or not at all: written to a temporary file beside the target, flushed
// to disk, then renamed over it. An interrupted run never leaves a half-written report.
#pragma once

#include <string>
#include <string_view>

namespace paratwin {

// Writes `content` to `path` atomically; "-" writes to standard output. Throws std::runtime_error
// naming the path and the system's reason when the directory is missing or not writable.
// `sync`: flush the data to disk before the rename, so that the file survives a power loss too.
// Without it the file is still whole or absent when the process is killed, at a fraction of the cost
// (progress files rewritten many times a second).
void write_file_atomically(const std::string& path, std::string_view content, bool sync = true);

}  // namespace paratwin
