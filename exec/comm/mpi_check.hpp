// PARATWIN_MPI_CHECK: every MPI call goes through it; a failure throws std::runtime_error with the
// file, the line, MPI's own message and a hint.
#pragma once

// The C bindings only (Open MPI would otherwise pull in its deprecated C++ bindings).
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <stdexcept>
#include <string>

namespace paratwin::exec::detail {

[[noreturn]] inline void throw_mpi_error(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw std::runtime_error(
      std::string(file) + ":" + std::to_string(line) + ": " + call +
      " failed: " + std::string(text, size_t(length)) +
      " (hint: are all ranks running the same plan and step? see mpirun's output above)");
}

}  // namespace paratwin::exec::detail

#define PARATWIN_MPI_CHECK(call)                                                                  \
  do {                                                                                            \
    const int paratwin_mpi_status_ = (call);                                                      \
    if (paratwin_mpi_status_ != MPI_SUCCESS)                                                      \
      ::paratwin::exec::detail::throw_mpi_error(paratwin_mpi_status_, #call, __FILE__, __LINE__); \
  } while (0)
