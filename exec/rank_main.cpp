// paratwin-rank: one rank of `paratwin run`, started by it under mpirun with the same flags. Its own
// executable because SimGrid's library (linked into paratwin) defines the MPI symbols too.
#include <iostream>

#include "exec/run/live_run.hpp"
#include "plan/spec/diagnostics.hpp"

int main(int argc, char** argv) {
  CLI::App app{"one rank of a live ParaTwin run (started by `paratwin run`)", "paratwin-rank"};
  paratwin::exec::LiveRunOptions options;
  paratwin::exec::add_live_run_options(app, options);
  try {
    app.parse(argc, argv);
    return paratwin::exec::run_live_rank(options);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const paratwin::InputError& e) {
    for (const auto& d : e.diagnostics()) std::cerr << d.str() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "paratwin run: error: " << e.what() << "\n";
    return 1;
  }
}
