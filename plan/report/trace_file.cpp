// Trace files: the atomic writer, with gzip between it and the trace writer when asked.
#include "plan/report/trace_file.hpp"

#include "plan/io/atomic_file.hpp"
#include "plan/io/gzip_stream.hpp"

namespace paratwin {

void write_trace_file(const std::string& path, const std::function<void(std::ostream&)>& write) {
  AtomicFileWriter file(path);
  if (is_gzip_path(path)) {
    GzipOStream gz(file.stream());
    write(gz);
    gz.finish();
  } else {
    write(file.stream());
  }
  file.commit();
}

bool is_perfetto_path(const std::string& path) {
  return path.ends_with(".pftrace");
}

}  // namespace paratwin
