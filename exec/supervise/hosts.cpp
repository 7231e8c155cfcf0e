// Reading the hosts of a live run and placing its ranks on them by the plan's rank layout.
#include "exec/supervise/hosts.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "plan/spec/diagnostics.hpp"
#include "plan/spec/suggest.hpp"
#include "plan/topology/rank_layout.hpp"
#include "plan/util/child_process.hpp"

namespace paratwin::exec {

namespace {

// A positive integer, or nullopt.
std::optional<int> count_of(const std::string& text) {
  if (text.empty() || text.size() > 6 || text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  const int n = std::atoi(text.c_str());
  return n > 0 ? std::optional<int>(n) : std::nullopt;
}

// Adds `slots` to `name`'s entry, keeping the hosts in the order first named.
void add_slots(std::vector<Host>& hosts, const std::string& name, int slots) {
  for (Host& h : hosts)
    if (h.name == name) {
      h.slots += slots;
      return;
    }
  hosts.push_back({name, slots});
}

// "4(x2),2" (SLURM_JOB_CPUS_PER_NODE, SLURM_TASKS_PER_NODE): the count of each node in order.
std::vector<int> slurm_counts(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t paren = item.find("(x");
    const int n = std::atoi(item.substr(0, paren).c_str());
    const int times = paren == std::string::npos ? 1 : std::atoi(item.substr(paren + 2).c_str());
    for (int i = 0; i < times; ++i) out.push_back(n);
  }
  return out;
}

std::vector<in_addr> local_ipv4_addresses() {
  std::vector<in_addr> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (const ifaddrs* a = list; a; a = a->ifa_next)
    if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET)
      out.push_back(reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr);
  ::freeifaddrs(list);
  return out;
}

std::string this_host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

}  // namespace

std::vector<Host> parse_host_list(const std::string& text) {
  const std::string where = "<--hosts " + text + ">";
  std::vector<Host> hosts;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, end - start);
    const size_t colon = item.find(':');
    const std::string name = item.substr(0, colon);
    const int column = int(start) + 1;
    if (name.empty())
      throw InputError(Location{where, 1, column}, "expected a host name, as in --hosts node1:4,node2:4");
    std::optional<int> slots = 1;
    if (colon != std::string::npos) slots = count_of(item.substr(colon + 1));
    if (!slots)
      throw InputError(Location{where, 1, column + int(colon) + 1},
                       "expected a positive number of ranks after '" + name + ":', as in " + name + ":4");
    for (const Host& h : hosts)
      if (h.name == name)
        throw InputError(Location{where, 1, column},
                         "host " + name + " is listed twice; give it once with all its ranks");
    hosts.push_back({name, *slots});
    start = end + 1;
  }
  return hosts;
}

std::vector<Host> load_hostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(Location{path}, "cannot read the hostfile");
  std::vector<Host> hosts;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::string name, word;
    if (!(words >> name)) continue;
    int slots = 1;
    while (words >> word) {
      const int column = int(line.find(word)) + 1;
      const size_t eq = word.find('=');
      const std::string key = word.substr(0, eq);
      if (key != "slots" && key != "max_slots" && key != "max-slots") {
        const auto near = nearest(key, {"slots", "max_slots"});
        throw InputError(Location{path, number, column},
                         "unknown hostfile keyword '" + key + "'; expected slots=N or max_slots=N" +
                             (near ? " (did you mean '" + *near + "'?)" : ""));
      }
      const auto n = eq == std::string::npos ? std::nullopt : count_of(word.substr(eq + 1));
      if (!n)
        throw InputError(Location{path, number, column + int(key.size()) + 1},
                         "expected a positive number of slots, as in " + key + "=4");
      if (key == "slots") slots = *n;
    }
    add_slots(hosts, name, slots);
  }
  if (hosts.empty())
    throw InputError(Location{path, 1, 1},
                     "the hostfile names no host; expected lines such as node1 slots=4");
  return hosts;
}

std::optional<std::vector<Host>> slurm_hosts() {
  const char* job = std::getenv("SLURM_JOB_ID");
  const char* nodes = std::getenv("SLURM_JOB_NODELIST");
  if (!job) return std::nullopt;
  const Location where{"<Slurm job " + std::string(job) + ">"};
  if (!nodes)
    throw InputError(where, "SLURM_JOB_ID is set but SLURM_JOB_NODELIST is not; run inside salloc or sbatch");
  std::string listed;
  int status = -1;
  try {
    const ChildProcess child =
        spawn_process({"scontrol", "show", "hostnames", nodes},
                      {.search_path = true, .input = ChildStream::Null, .output = ChildStream::Pipe});
    char buf[4096];
    ssize_t n;
    while ((n = ::read(child.from, buf, sizeof buf)) > 0) listed.append(buf, size_t(n));
    ::close(child.from);
    status = exit_code_of(wait_for_process(child.pid));
  } catch (const std::runtime_error& e) {
    throw InputError(where, std::string("cannot list the allocation's nodes: ") + e.what());
  }
  if (status != 0) throw InputError(where, "`scontrol show hostnames " + std::string(nodes) + "` failed");
  const char* per_node = std::getenv("SLURM_NTASKS_PER_NODE");
  const char* cpus = std::getenv("SLURM_JOB_CPUS_PER_NODE");
  const std::vector<int> counts = slurm_counts(per_node ? per_node : cpus ? cpus : "");
  std::vector<Host> hosts;
  std::istringstream lines(listed);
  std::string name;
  while (lines >> name) {
    const size_t i = hosts.size();
    hosts.push_back({name, counts.empty() ? 1 : counts[std::min(i, counts.size() - 1)]});
  }
  if (hosts.empty()) throw InputError(where, "the allocation " + std::string(nodes) + " names no node");
  return hosts;
}

std::vector<Host> resolve_hosts(const std::string& hostfile, const std::string& host_list) {
  if (!hostfile.empty() && !host_list.empty())
    throw InputError(Location{"<--hosts " + host_list + ">", 1, 1}, "give --hosts or --hostfile, not both");
  if (!hostfile.empty()) return load_hostfile(hostfile);
  if (!host_list.empty()) return parse_host_list(host_list);
  return slurm_hosts().value_or(std::vector<Host>{});
}

std::vector<int> host_of_ranks(const Plan& plan, const ClusterSpec& cluster, const std::vector<Host>& hosts,
                               const std::string& source) {
  const RankLayout layout(plan, cluster);
  if (layout.nodes() != int(hosts.size()))
    throw InputError(Location{source},
                     "the plan runs on " + std::to_string(layout.nodes()) + " node(s) of cluster " +
                         cluster.name + " but " + std::to_string(hosts.size()) +
                         " host(s) were given; give one host per node (or size the cluster with --set)");
  std::vector<int> host(size_t(layout.world()));
  std::vector<int> placed(hosts.size(), 0);
  for (int r = 0; r < layout.world(); ++r) {
    host[size_t(r)] = layout.site(layout.gpu_of(r)).node;
    ++placed[size_t(host[size_t(r)])];
  }
  for (size_t h = 0; h < hosts.size(); ++h)
    if (placed[h] > hosts[h].slots)
      throw InputError(Location{source}, "the plan places " + std::to_string(placed[h]) + " ranks on node " +
                                             std::to_string(h) + " but its host " + hosts[h].name + " has " +
                                             std::to_string(hosts[h].slots) + " slot(s); expected at least " +
                                             std::to_string(placed[h]));
  return host;
}

std::optional<std::string> local_address_of(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return std::nullopt;
  std::optional<std::string> out;
  const std::vector<in_addr> local = local_ipv4_addresses();
  for (const addrinfo* a = found; a && !out; a = a->ai_next) {
    const in_addr address = reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr;
    for (const in_addr& mine : local)
      if (mine.s_addr == address.s_addr) {
        char text[INET_ADDRSTRLEN];
        out = ::inet_ntop(AF_INET, &address, text, sizeof text);
      }
  }
  ::freeaddrinfo(found);
  return out;
}

std::string sequential_hostfile(const std::vector<Host>& hosts, const std::vector<int>& host_of_rank) {
  std::map<int, std::string> names;
  for (int h : host_of_rank)
    if (!names.count(h))
      names[h] = local_address_of(hosts[size_t(h)].name) ? this_host_name() : hosts[size_t(h)].name;
  std::string text;
  for (int h : host_of_rank) text += names[h] + "\n";
  return text;
}

}  // namespace paratwin::exec
