// The checkpoint directory probe: write, barrier, read everyone's, agree on the first problem.
#include "exec/checkpoint/directory_probe.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "plan/spec/diagnostics.hpp"

namespace paratwin::exec {

namespace fs = std::filesystem;

void probe_shared_directory(const std::string& directory, Communicator& comm) {
  // One name for this probe on every rank: a stale file of another job never passes for this one's.
  uint64_t nonce = 0;
  if (comm.rank() == 0) nonce = (uint64_t(std::random_device{}()) << 32) | std::random_device{}();
  comm.broadcast(&nonce, sizeof nonce, 0);
  char stem[48];
  std::snprintf(stem, sizeof stem, ".paratwin-probe-%016llx-", static_cast<unsigned long long>(nonce));
  const auto probe = [&](int rank) { return fs::path(directory) / (stem + std::to_string(rank)); };
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::error_code ec;
  fs::create_directories(directory, ec);
  bool wrote = false;
  {
    std::ofstream out(probe(comm.rank()));
    out << host << "\n";
    wrote = bool(out.flush());
  }
  comm.barrier();
  int missed = wrote ? -1 : comm.rank();  // the first rank whose file this one does not see
  for (int r = 0; r < comm.size() && missed < 0; ++r)
    if (r != comm.rank() && !fs::exists(probe(r), ec)) missed = r;
  comm.barrier();  // every rank has looked before any file goes
  fs::remove(probe(comm.rank()), ec);
  // The lowest rank that found a problem tells every rank what it was.
  const double worst = comm.allreduce_max(missed >= 0 ? double(comm.size() - comm.rank()) : 0.0);
  if (worst == 0) return;
  const int reporter = comm.size() - int(worst);
  char what[512] = {};
  if (comm.rank() == reporter) {
    if (missed == comm.rank())
      std::snprintf(what, sizeof what, "rank %d on host %s cannot write its probe file %s", reporter, host,
                    probe(reporter).c_str());
    else
      std::snprintf(what, sizeof what, "rank %d on host %s does not see the probe file %s that rank %d wrote",
                    reporter, host, probe(missed).c_str(), missed);
  }
  comm.broadcast(what, sizeof what, reporter);
  throw InputError(Location{directory},
                   "--checkpoint-dir is not one directory for every rank: " + std::string(what) +
                       "; give a directory on a file system every host shares");
}

}  // namespace paratwin::exec
