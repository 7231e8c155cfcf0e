// The supervisor's flags on `paratwin run`, and what the ranks get of the command line.
#include "exec/supervise/supervise_options.hpp"

#include "exec/supervise/supervisor.hpp"
#include "plan/spec/units.hpp"

namespace paratwin::exec {

void add_supervise_options(CLI::App& cmd, SuperviseOptions& o) {
  const std::string group = "Fault tolerance";
  cmd.add_option("--inject", o.inject,
                 "inject a fault at the end of a step: kill|hang|slow|error@STEP:RANK (repeatable)")
      ->type_name("KIND@STEP:RANK")
      ->group(group);
  cmd.add_option("--chaos", o.chaos_seed, "kill random ranks at random moments, drawn from this seed")
      ->type_name("SEED")
      ->group(group);
  cmd.add_option("--chaos-kills", o.chaos_kills, "how many ranks --chaos kills (default 3)")
      ->check(CLI::NonNegativeNumber)
      ->group(group);
  cmd.add_option("--chaos-mtbf", o.chaos_mtbf, "mean training time between --chaos kills (default 5s)")
      ->type_name("DURATION")
      ->group(group);
  cmd.add_option("--min-ranks", o.min_ranks,
                 "shrink to no fewer ranks than this after failures (default: --ranks, no shrinking)")
      ->check(CLI::PositiveNumber)
      ->group(group);
  cmd.add_option("--down-time", o.down_time,
                 "a failed rank's slot stays out this long (default 0s); on hosts, its host is out this "
                 "long and then until it answers a probe")
      ->type_name("DURATION")
      ->group(group);
  cmd.add_option("--hang-timeout", o.hang_timeout, "a job without progress this long hangs (default 60s)")
      ->type_name("DURATION")
      ->group(group);
  cmd.add_option("--max-restarts", o.max_restarts,
                 "recover from at most this many failures (default 10; 0: none)")
      ->check(CLI::NonNegativeNumber)
      ->group(group);
  cmd.add_option("--control-address", o.control_address,
                 "listen for the ranks' heartbeats on this IPv4 address (default 127.0.0.1; on several "
                 "hosts, the first host's address)")
      ->group(group);
  const std::string hosts = "Hosts";
  cmd.add_option("--hosts", o.hosts, "run on these hosts through mpirun, ranks per host after ':'")
      ->type_name("H1:N,H2:N")
      ->group(hosts);
  cmd.add_option("--hostfile", o.hostfile, "run on the hosts of this Open MPI hostfile")
      ->type_name("FILE")
      ->group(hosts);
  cmd.add_option("--failure-trace", o.failure_trace,
                 "write the run's failures for `paratwin simulate --failure-trace`")
      ->type_name("FILE")
      ->group(group);
}

namespace {

// The supervisor's flags (and those it sets per launch): the ranks get the rest.
const std::vector<std::string> kValueFlags = {
    "--inject",    "--chaos",        "--chaos-kills",  "--chaos-mtbf",      "--min-ranks",
    "--down-time", "--hang-timeout", "--max-restarts", "--control-address", "--failure-trace",
    "--ranks",     "--json",         "--hosts",        "--hostfile",        "--nodes"};

}  // namespace

std::vector<std::string> rank_arguments(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    bool skip = args[i] == "--resume";
    for (const auto& f : kValueFlags) {
      if (args[i] == f) {
        skip = true;
        ++i;  // and its value
        break;
      }
      if (args[i].rfind(f + "=", 0) == 0) skip = true;
    }
    if (!skip) out.push_back(args[i]);
  }
  return out;
}

double duration_flag(const std::string& flag, const std::string& text, bool allow_zero) {
  const QuantityParse q = parse_quantity(text, Dimension::Duration);
  if (!q.value || *q.value < 0 || (!allow_zero && *q.value == 0))
    throw InputError(Location{"<" + flag + " " + text + ">", 1, 1},
                     std::string("expected a ") + (allow_zero ? "" : "positive ") +
                         "duration such as 5s or 2min for " + flag + (q.error.empty() ? "" : ": " + q.error));
  return *q.value;
}

}  // namespace paratwin::exec
