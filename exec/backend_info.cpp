// MPI library version, from the headers: the `paratwin` binary also links SimGrid, whose SMPI exports
// the MPI symbols too, so a call such as MPI_Get_library_version could answer for SMPI instead.
// (Rank processes are the separate `paratwin-rank` binary, which links Open MPI alone.)
#include "exec/backend_info.hpp"

#include <mpi.h>

namespace paratwin::exec {

std::string mpi_library_version() {
#ifdef OMPI_MAJOR_VERSION
  return "Open MPI " + std::to_string(OMPI_MAJOR_VERSION) + "." + std::to_string(OMPI_MINOR_VERSION) + "." +
         std::to_string(OMPI_RELEASE_VERSION) + " (MPI " + std::to_string(MPI_VERSION) + "." +
         std::to_string(MPI_SUBVERSION) + ")";
#else
  return "MPI " + std::to_string(MPI_VERSION) + "." + std::to_string(MPI_SUBVERSION);
#endif
}

}  // namespace paratwin::exec
