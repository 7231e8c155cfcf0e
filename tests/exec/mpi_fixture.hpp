// The MPI session of an MPI test executable (run under mpirun, or alone as one rank): `mpi->world` is
// MPI_COMM_WORLD for every test case. Include once per test module, after boost/test.
#pragma once

#include <memory>

#include "exec/comm/communicator.hpp"

namespace paratwin::exec::test {

struct Mpi {
  MpiSession session;
  std::unique_ptr<Communicator> world = mpi_world();
};
inline Mpi* mpi = nullptr;

struct MpiFixture {
  MpiFixture() { mpi = new Mpi; }
  ~MpiFixture() {
    delete mpi;
    mpi = nullptr;
  }
};
BOOST_TEST_GLOBAL_FIXTURE(MpiFixture);

}  // namespace paratwin::exec::test
