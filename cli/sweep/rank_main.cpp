// paratwin-sweep-rank: `paratwin sweep` under mpirun (paratwin becomes this executable, which links
// Open MPI but not SimGrid). Rank 0 coordinates as `paratwin sweep` does, handing points to its own
// workers and, through MPI messages, to every other rank's; the other ranks relay points to their
// local workers (`paratwin sweep --worker`, --jobs of them) and send the results back. Rank 0 saves
// and writes everything.
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/sweep/sweep_command.hpp"
#include "cli/sweep/worker_pool.hpp"
#include "exec/comm/mpi_check.hpp"

namespace paratwin::cli {
namespace {

constexpr int kAssignTag = 1;  // rank 0 -> rank r: int[2] {local slot, point index or -1 to stop}
constexpr int kResultTag = 2;  // rank r -> rank 0: JSON {slot, index, result, failure, interrupted}

// Rank 0's view of the other ranks: their workers as slots, (rank - 1) x jobs + local slot.
class MpiPeers : public PointChannel {
 public:
  MpiPeers(int ranks, int jobs) : ranks_(ranks), jobs_(jobs) {}
  ~MpiPeers() override {
    if (!finished_) finish();
  }

  int slots() const override { return (ranks_ - 1) * jobs_; }

  void assign(int slot, int index) override { send(slot, index); }

  std::vector<Finished> poll(int) override {
    std::vector<Finished> out;
    for (;;) {
      int arrived = 0;
      MPI_Status status;
      PARATWIN_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, kResultTag, MPI_COMM_WORLD, &arrived, &status));
      if (!arrived) return out;
      int bytes = 0;
      PARATWIN_MPI_CHECK(MPI_Get_count(&status, MPI_CHAR, &bytes));
      std::string text(static_cast<size_t>(bytes), '\0');
      PARATWIN_MPI_CHECK(MPI_Recv(text.data(), bytes, MPI_CHAR, status.MPI_SOURCE, kResultTag, MPI_COMM_WORLD,
                                  MPI_STATUS_IGNORE));
      const nlohmann::json j = nlohmann::json::parse(text);
      out.push_back({(status.MPI_SOURCE - 1) * jobs_ + j.at("slot").get<int>(), j.at("index").get<int>(),
                     j.at("result").get<std::string>(), j.at("failure").get<std::string>(),
                     j.at("interrupted").get<bool>()});
    }
  }

  void finish() override {
    finished_ = true;
    for (int s = 0; s < slots(); ++s) send(s, -1);
  }

 private:
  void send(int slot, int index) {
    int message[2] = {slot % jobs_, index};
    PARATWIN_MPI_CHECK(MPI_Send(message, 2, MPI_INT, 1 + slot / jobs_, kAssignTag, MPI_COMM_WORLD));
  }

  int ranks_, jobs_;
  bool finished_ = false;
};

// A rank other than 0: runs the points rank 0 sends on local workers until each slot is told to stop.
int relay(const SweepOptions& options) {
  WorkerPool pool(worker_command(options), options.jobs);
  int running = pool.slots();
  while (running > 0) {
    int arrived = 0;
    PARATWIN_MPI_CHECK(MPI_Iprobe(0, kAssignTag, MPI_COMM_WORLD, &arrived, MPI_STATUS_IGNORE));
    if (arrived) {
      int message[2];
      PARATWIN_MPI_CHECK(MPI_Recv(message, 2, MPI_INT, 0, kAssignTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      if (message[1] < 0)
        --running;
      else
        pool.assign(message[0], message[1]);
      continue;
    }
    for (const Finished& f : pool.poll(5)) {
      const std::string text = nlohmann::json{
          {"slot", f.slot},
          {"index", f.index},
          {"result", f.result},
          {"failure", f.failure},
          {"interrupted",
           f.interrupted}}.dump();
      PARATWIN_MPI_CHECK(MPI_Send(text.data(), int(text.size()), MPI_CHAR, 0, kResultTag, MPI_COMM_WORLD));
    }
  }
  return 0;
}

}  // namespace
}  // namespace paratwin::cli

int main(int argc, char** argv) {
  using namespace paratwin::cli;
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CLI::App app{"one rank of `paratwin sweep` under mpirun", "paratwin-sweep-rank"};
  SweepOptions options;
  add_sweep_options(app, options);
  int status = 0;
  try {
    app.parse(argc, argv);
    // Every rank loads the sweep, so bad input ends all of them alike; rank 0 alone says why.
    const LoadedSweep sweep = load_sweep(options);
    if (rank == 0) {
      for (const auto& w : sweep.scenario.warnings) std::cerr << w.str() << "\n";
      MpiPeers peers(size, options.jobs);
      status = run_sweep(options, sweep, {&peers});
    } else {
      status = relay(options);
    }
  } catch (const CLI::ParseError& e) {
    status = rank == 0 ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 1);
    if (status != 0) status = 2;
  } catch (const paratwin::InputError& e) {
    if (rank == 0)
      for (const auto& d : e.diagnostics()) std::cerr << d.str() << "\n";
    status = 2;
  } catch (const std::exception& e) {
    std::cerr << "paratwin sweep: error on rank " << rank << ": " << e.what() << "\n";
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  // Interrupted: mpirun is ending the job, and the other ranks may be gone already.
  if (status == 130) std::_Exit(130);
  MPI_Finalize();
  return status;
}
