// MPI library version.
#include "exec/backend_info.hpp"

#include <mpi.h>

namespace paratwin::exec {

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string s(text, static_cast<size_t>(length));
  if (auto nl = s.find_first_of(",\n"); nl != std::string::npos) s.resize(nl);
  return s;
}

}  // namespace paratwin::exec
