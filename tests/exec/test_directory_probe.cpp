// The checkpoint directory probe under mpirun -np 2: a directory both ranks share passes and keeps no
// probe file; directories that differ per rank (hosts without a shared file system) are refused on
// every rank with the same message, naming the rank that missed the other's file.
#define BOOST_TEST_MODULE directory_probe
#include <boost/test/unit_test.hpp>

#include <filesystem>

#include "exec/checkpoint/directory_probe.hpp"
#include "mpi_fixture.hpp"
#include "plan/spec/diagnostics.hpp"

using namespace paratwin;
using namespace paratwin::exec;
using paratwin::exec::test::mpi;
namespace fs = std::filesystem;

namespace {

// One directory name for the job, from rank 0's process id (a collective).
fs::path job_dir() {
  double pid = mpi->world->rank() == 0 ? double(::getpid()) : 0.0;
  pid = mpi->world->allreduce_max(pid);
  return fs::temp_directory_path() / ("paratwin-probe-" + std::to_string(long(pid)));
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_shared_directory_passes_and_keeps_no_probe) {
  const fs::path dir = job_dir();
  BOOST_CHECK_NO_THROW(probe_shared_directory(dir.string(), *mpi->world));
  mpi->world->barrier();
  BOOST_TEST(fs::is_empty(dir));
  mpi->world->barrier();
  if (mpi->world->rank() == 0) fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_directory_each_rank_sees_alone_is_refused_on_every_rank) {
  if (mpi->world->size() < 2) return;  // one rank sees only itself
  const fs::path job = job_dir();
  const fs::path dir = job / ("rank-" + std::to_string(mpi->world->rank()));
  std::string message;
  try {
    probe_shared_directory(dir.string(), *mpi->world);
  } catch (const InputError& e) {
    message = e.diagnostics().front().message;
  }
  BOOST_TEST(message.find("--checkpoint-dir is not one directory for every rank: rank 0 on host ") !=
             std::string::npos);
  BOOST_TEST(message.find("does not see the probe file") != std::string::npos);
  BOOST_TEST(message.find("that rank 1 wrote") != std::string::npos);
  mpi->world->barrier();
  if (mpi->world->rank() == 0) fs::remove_all(job);
}
