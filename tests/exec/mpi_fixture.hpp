// MPI for a Boost.Test module run under mpirun: initialized once for the whole module, with the
// job's world communicator at `mpi->world`. Include once, from the module's one source file.
#pragma once

#include <boost/test/unit_test.hpp>

#include <memory>

#include "exec/comm/communicator.hpp"

namespace {

struct Mpi {
  paratwin::exec::MpiSession session;
  std::unique_ptr<paratwin::exec::Communicator> world = paratwin::exec::mpi_world();
};
Mpi* mpi = nullptr;

struct MpiFixture {
  MpiFixture() { mpi = new Mpi; }
  ~MpiFixture() {
    delete mpi;
    mpi = nullptr;
  }
};
BOOST_TEST_GLOBAL_FIXTURE(MpiFixture);

}  // namespace
