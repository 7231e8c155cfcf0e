// Where a trace goes: a file named by `--trace`, written atomically, gzip-compressed on the way when
// its name ends in ".gz" (a 16K-GPU trace shrinks about tenfold).
#pragma once

#include <functional>
#include <ostream>
#include <string>

namespace paratwin {

// Writes to `path` what `write` puts in the stream it is given: plain, or gzip for "*.gz"; through a
// temporary file renamed at the end ("-" is standard output). Throws std::runtime_error as
// AtomicFileWriter does.
void write_trace_file(const std::string& path, const std::function<void(std::ostream&)>& write);

// True when `path` asks for Perfetto's protobuf trace (".pftrace") rather than Chrome JSON.
bool is_perfetto_path(const std::string& path);

}  // namespace paratwin
