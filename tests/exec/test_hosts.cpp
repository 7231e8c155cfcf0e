// Hosts of a live run across machines: --hosts and Open MPI hostfiles read (bad input as InputError at
// file:line:column), ranks placed by the plan's rank layout (TP groups inside hosts), mpirun's
// sequential placement file, and the hosts a supervisor has up.
#define BOOST_TEST_MODULE hosts
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "exec/run/live_run.hpp"
#include "exec/supervise/host_pool.hpp"
#include "exec/supervise/host_probe.hpp"
#include "exec/supervise/hosts.hpp"
#include "plan/spec/diagnostics.hpp"
#include "source_tree.hpp"

using namespace paratwin;
using namespace paratwin::exec;
namespace fs = std::filesystem;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.diagnostics().front().str();
  }
  return "";
}

fs::path write_temp(const std::string& name, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / (name + std::to_string(::getpid()));
  std::ofstream(p) << text;
  return p;
}

// tiny-gpt on cpu-hosts: `ranks` data-parallel replicas of tp x pp on `nodes` hosts.
LiveRunSetup job(int ranks, int tp, int pp, int nodes) {
  LiveRunOptions o;
  o.scenario = paratwin_test::source_dir() + "/scenarios/live-cpu-tiny.yaml";
  o.sets = {"cluster=cpu-hosts", "training.global_batch=8", "plan.micro_batch=1",
            "plan.tp=" + std::to_string(tp), "plan.pp=" + std::to_string(pp)};
  o.ranks = ranks;
  o.nodes = nodes;
  return prepare_live_run(o);
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_host_list_gives_names_and_slots_in_order) {
  const std::vector<Host> hosts = parse_host_list("node1:4,node2,10.0.0.3:2");
  BOOST_TEST(hosts.size() == 3u);
  BOOST_TEST(hosts[0].name == "node1");
  BOOST_TEST(hosts[0].slots == 4);
  BOOST_TEST(hosts[1].slots == 1);
  BOOST_TEST(hosts[2].name == "10.0.0.3");
  BOOST_TEST(hosts[2].slots == 2);
}

BOOST_AUTO_TEST_CASE(a_bad_host_list_is_refused_at_its_column) {
  BOOST_TEST(error_of([] { parse_host_list("a:4,b:zero"); }) ==
             "<--hosts a:4,b:zero>:1:7: error: expected a positive number of ranks after 'b:', as in b:4");
  BOOST_TEST(error_of([] { parse_host_list("a:4,,b"); }).find(":1:5: error: expected a host name") !=
             std::string::npos);
  BOOST_TEST(error_of([] { parse_host_list("a:2,a:2"); }).find("listed twice") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(an_open_mpi_hostfile_reads_as_mpirun_counts_it) {
  const fs::path p =
      write_temp("paratwin-hostfile-",
                 "# the cluster\nnode1 slots=4 max_slots=8\n\nnode2   # one slot\nnode1 slots=2\n");
  const std::vector<Host> hosts = load_hostfile(p.string());
  BOOST_TEST(hosts.size() == 2u);
  BOOST_TEST(hosts[0].name == "node1");
  BOOST_TEST(hosts[0].slots == 6);  // listed twice: the slots add up
  BOOST_TEST(hosts[1].slots == 1);
  fs::remove(p);
}

BOOST_AUTO_TEST_CASE(a_bad_hostfile_names_line_column_and_the_nearest_keyword) {
  const fs::path p = write_temp("paratwin-hostfile-bad-", "node1 slots=2\nnode2 slot=2\n");
  BOOST_TEST(error_of([&] { load_hostfile(p.string()); }) ==
             p.string() +
                 ":2:7: error: unknown hostfile keyword 'slot'; expected slots=N or max_slots=N (did you "
                 "mean 'slots'?)");
  std::ofstream(p) << "node1 slots=-1\n";
  BOOST_TEST(error_of([&] { load_hostfile(p.string()); }).find(":1:13: error: expected a positive number") !=
             std::string::npos);
  fs::remove(p);
  BOOST_TEST(error_of([&] { load_hostfile(p.string()); }).find("cannot read the hostfile") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(hostfile_and_host_list_together_are_refused) {
  BOOST_TEST(error_of([] { resolve_hosts("some-file", "a:1"); }).find("not both") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(tp_groups_land_inside_hosts_and_pipeline_stages_on_their_own) {
  // tp 2 x pp 2 on 2 hosts of 2: the rank order puts tp fastest, so each stage's TP pair shares a host.
  const LiveRunSetup s = job(1, 2, 2, 2);
  const std::vector<Host> hosts = parse_host_list("a:2,b:2");
  const std::vector<int> host = host_of_ranks(s.plan, s.scenario.cluster, hosts, "job");
  BOOST_TEST(host == (std::vector<int>{0, 0, 1, 1}), boost::test_tools::per_element());
  BOOST_TEST(sequential_hostfile(hosts, host) == "a\na\nb\nb\n");
}

BOOST_AUTO_TEST_CASE(the_plans_nodes_must_be_the_hosts_given) {
  const LiveRunSetup s = job(4, 1, 1, 2);
  BOOST_TEST(error_of([&] {
               host_of_ranks(s.plan, s.scenario.cluster, parse_host_list("a:2,b:2,c:2"), "job");
             }).find("the plan runs on 2 node(s) of cluster cpu-hosts but 3 host(s) were given") !=
             std::string::npos);
  BOOST_TEST(error_of([&] {
               host_of_ranks(s.plan, s.scenario.cluster, parse_host_list("a:1,b:2"), "job");
             }).find("places 2 ranks on node 0 but its host a has 1 slot(s)") != std::string::npos);
  // Processes that do not split evenly over the hosts, and a one-machine cluster on several hosts.
  BOOST_TEST(error_of([] { job(3, 1, 1, 2); }).find("do not split evenly over 2 hosts") != std::string::npos);
  LiveRunOptions local;
  local.scenario = paratwin_test::source_dir() + "/scenarios/live-cpu-tiny.yaml";
  local.ranks = 2;
  local.nodes = 2;
  BOOST_TEST(error_of([&] { prepare_live_run(local); }).find("cluster local-cpu describes one machine") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(this_machine_named_by_address_is_written_as_its_host_name) {
  // mpirun knows its own node by name: an address of this machine in the placement would not match.
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  const std::vector<Host> hosts = parse_host_list("127.0.0.1:1,192.0.2.7:1");
  BOOST_TEST(local_address_of("127.0.0.1").value_or("") == "127.0.0.1");
  BOOST_TEST(!local_address_of("192.0.2.7"));  // TEST-NET-1: never this machine's
  BOOST_TEST(sequential_hostfile(hosts, {0, 1, 0}) == std::string(name) + "\n192.0.2.7\n" + name + "\n");
}

BOOST_AUTO_TEST_CASE(a_host_out_takes_the_replicas_on_it_out_until_it_answers_after_its_time) {
  // dp 4 on 2 hosts of 2: replicas 0 and 1 on host 0, 2 and 3 on host 1.
  HostPool pool(parse_host_list("a:2,b:2"), {0, 0, 1, 1}, {0, 1, 2, 3});
  BOOST_TEST(pool.nodes_for(4) == 2);
  BOOST_TEST(pool.nodes_for(2) == 1);
  BOOST_TEST(pool.nodes_for(3) == 0);  // not whole hosts
  pool.take_out(1, 10.0);
  std::vector<int> index;
  BOOST_TEST(pool.up(5.0, index).size() == 1u);
  BOOST_TEST(index == std::vector<int>{0});
  BOOST_TEST(pool.slot_up(1, 5.0));
  BOOST_TEST(!pool.slot_up(2, 5.0));
  BOOST_TEST(pool.awaiting_answer(5.0).empty());  // not probed during its down time
  BOOST_TEST(pool.awaiting_answer(10.0) == std::vector<int>{1});
  BOOST_TEST(!pool.slot_up(2, 20.0));  // its time is over, but it has not answered
  const int outage = pool.outages(1);
  pool.answered(1);
  BOOST_TEST(pool.slot_up(2, 20.0));
  BOOST_TEST(pool.up(20.0, index).size() == 2u);
  pool.take_out(1, 30.0);
  BOOST_TEST(pool.outages(1) == outage + 1);  // an answer to an earlier probe does not count for this one
}

BOOST_AUTO_TEST_CASE(hosts_that_are_out_are_probed_through_mpirun_and_back_when_they_answer) {
  // This machine answers; a host that mpirun's launch agent cannot reach (an agent that always fails,
  // as ssh to a dead host does) does not.
  ::setenv("OMPI_MCA_plm_rsh_agent", "false", 1);
  HostPool pool(parse_host_list("localhost:1,192.0.2.7:1"), {0, 1}, {0, 1});
  pool.take_out(0, 0.0);
  pool.take_out(1, 0.0);
  HostProber prober;
  std::vector<std::string> said;
  const auto start = std::chrono::steady_clock::now();
  const auto now = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  BOOST_TEST(!prober.settled(pool, now()));
  while (!prober.settled(pool, now())) {
    prober.poll(pool, now(), [&](const std::string& m) { said.push_back(m); });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::unsetenv("OMPI_MCA_plm_rsh_agent");
  std::vector<int> index;
  pool.up(now(), index);
  BOOST_TEST(index == std::vector<int>{0});
  BOOST_TEST(pool.awaiting_answer(now()) == std::vector<int>{1});
  std::string all;
  for (const auto& m : said) all += m + "\n";
  BOOST_TEST_INFO(all);
  BOOST_TEST(all.find("host localhost answers\n") != std::string::npos);
  BOOST_TEST(all.find("host 192.0.2.7 does not answer (mpirun there exits with status ") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_slurm_allocation_gives_its_nodes_and_tasks_per_node) {
  // Slurm's own scontrol expands the node list (offline, from a configuration naming the cluster).
  if (std::system("command -v scontrol > /dev/null 2>&1") != 0) {
    BOOST_TEST_MESSAGE("scontrol is not installed (Debian: slurm-client): the Slurm case is not checked");
    return;
  }
  BOOST_TEST(!slurm_hosts());  // outside an allocation
  const fs::path conf = write_temp("paratwin-slurm-conf-", "ClusterName=paratwin\nSlurmctldHost=localhost\n");
  ::setenv("SLURM_CONF", conf.c_str(), 1);
  ::setenv("SLURM_JOB_ID", "42", 1);
  ::setenv("SLURM_JOB_NODELIST", "node[1-2],gpu-a07", 1);
  ::setenv("SLURM_JOB_CPUS_PER_NODE", "8(x2),4", 1);
  std::vector<Host> hosts = slurm_hosts().value();
  BOOST_TEST(hosts.size() == 3u);
  BOOST_TEST(hosts[0].name == "node1");
  BOOST_TEST(hosts[2].name == "gpu-a07");
  BOOST_TEST(hosts[1].slots == 8);
  BOOST_TEST(hosts[2].slots == 4);
  ::setenv("SLURM_NTASKS_PER_NODE", "2", 1);  // the tasks asked for win over the CPUs
  hosts = resolve_hosts("", "");
  BOOST_TEST(hosts[2].slots == 2);
  BOOST_TEST(resolve_hosts("", "a:1").front().name == "a");  // a flag wins over the allocation
  for (const char* v : {"SLURM_CONF", "SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_JOB_CPUS_PER_NODE",
                        "SLURM_NTASKS_PER_NODE"})
    ::unsetenv(v);
  fs::remove(conf);
}
