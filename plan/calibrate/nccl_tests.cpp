// Reading nccl-tests output, and the curves and NIC figures it gives a cluster.
#include "plan/calibrate/nccl_tests.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "plan/calibrate/inter_host_fit.hpp"
#include "plan/spec/doc.hpp"
#include "plan/spec/reader.hpp"
#include "plan/spec/suggest.hpp"
#include "plan/util/text_lines.hpp"

namespace paratwin {
namespace {

using cost::CollectiveKind;

// The collectives calibrate reads, by nccl-tests' binary names: those whose curves a node's fabric
// holds (IntraNodeSpec), and the all-to-all, whose runs across hosts time the NIC too.
const EnumNames<CollectiveKind> kTestedCollectives = {{"all_reduce", CollectiveKind::AllReduce},
                                                      {"all_gather", CollectiveKind::AllGather},
                                                      {"reduce_scatter", CollectiveKind::ReduceScatter},
                                                      {"alltoall", CollectiveKind::AllToAll}};

// Beyond any collective a run measures; keeps the rates the curve derives finite.
constexpr long long kMostBytes = 1LL << 50;

std::optional<CollectiveKind> kind_in_name(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  std::erase(name, '_');
  for (const auto& [key, kind] : kTestedCollectives) {
    std::string k = key;
    std::erase(k, '_');
    if (name.find(k) != std::string::npos) return kind;
  }
  return std::nullopt;
}

std::vector<std::string> tested_names() {
  std::vector<std::string> names;
  for (const auto& [key, kind] : kTestedCollectives) names.push_back(key + "_perf");
  return names;
}

std::optional<BusbwCurve>& curve_of(IntraNodeSpec& fabric, CollectiveKind kind) {
  return kind == CollectiveKind::AllGather       ? fabric.all_gather_curve
         : kind == CollectiveKind::ReduceScatter ? fabric.reduce_scatter_curve
                                                 : fabric.all_reduce_curve;
}

std::string curve_summary(const BusbwCurve& curve) {
  const auto& [first_size, first_bw] = curve.points.front();
  const auto& [last_size, last_bw] = curve.points.back();
  return std::to_string(curve.points.size()) + " sizes, " + to_string(first_bw) + " at " +
         to_string(first_size) + " to " + to_string(last_bw) + " at " + to_string(last_size);
}

}  // namespace

NcclTestsRun parse_nccl_tests(std::string_view text, const std::string& path) {
  NcclTestsRun run;
  run.path = path;
  std::map<std::string, int> per_host;  // ranks on each host
  std::optional<CollectiveKind> kind;
  Diagnostics diag;
  for_each_line(text, [&](std::string_view line, int line_number) {
    const std::vector<LineField> t = whitespace_fields(line);
    if (t.empty()) return;
    if (t[0].text.starts_with('#')) {
      const size_t at = line.find("Collective test starting:");
      if (at != std::string_view::npos && t.size() >= 5) {
        const LineField& name = t[4];
        std::string key(name.text);
        if (key.ends_with("_perf")) key.resize(key.size() - 5);
        std::optional<CollectiveKind> k;
        for (const auto& [n, v] : kTestedCollectives)
          if (n == key) k = v;
        if (!k)
          diag.error({path, line_number, name.column}, "nccl-tests of " + std::string(name.text) +
                                                           ": calibrate reads " + join(tested_names()) +
                                                           did_you_mean(name.text, tested_names()));
        else if (kind && *kind != *k)
          diag.error({path, line_number, name.column},
                     "a second collective in one output: one nccl-tests run a file");
        else
          kind = k;
      }
      // "#  Rank  0 Group  0 Pid 1583987 on HOST device  0 [0000:29:00] NVIDIA H100 80GB HBM3" (before
      // nccl-tests 2.10 without "Group  0")
      const auto on = std::find_if(t.begin(), t.end(), [](const LineField& k) { return k.text == "on"; });
      if (t.size() > 1 && t[1].text == "Rank" && on != t.end() && on + 1 != t.end()) {
        ++run.ranks;
        ++per_host[std::string((on + 1)->text)];
        const auto bus =
            std::find_if(on, t.end(), [](const LineField& k) { return k.text.starts_with('['); });
        if (run.device.empty() && bus != t.end() && bus + 1 != t.end())
          run.device = std::string(line.substr(size_t((bus + 1)->column - 1)));
      }
      return;
    }
    // A result row starts with its size; other lines (NCCL's own log lines) are not nccl-tests'.
    long long size = 0;
    const bool digits = t[0].text.find_first_not_of("0123456789") == std::string_view::npos;
    if (!digits) return;
    if (!parse_field(t[0].text, size) || size > kMostBytes) {
      diag.error({path, line_number, t[0].column}, "size: expected at most 2^50 bytes");
      return;
    }
    double time_us = 0;
    if (t.size() < 6 || !parse_field(t[5].text, time_us) || !(time_us >= 1e-3 && time_us <= 1e12)) {
      const int column = t.size() < 6 ? int(line.size()) + 1 : t[5].column;
      diag.error({path, line_number, column},
                 "expected a result row: size, count, type, redop, root, then the out-of-place time in "
                 "microseconds (0.001 to 10^12)");
      return;
    }
    if (size > 0) run.rows.push_back({Bytes(double(size)), Seconds(time_us * 1e-6), line_number});
  });
  diag.throw_if_errors();
  if (!kind) kind = kind_in_name(path);
  if (!kind)
    throw InputError(Location{path},
                     "which collective: no '# Collective test starting:' line (nccl-tests 2.13 and later "
                     "print it) and the file name names none of " +
                         join(tested_names()));
  run.kind = *kind;
  if (run.ranks == 0)
    throw InputError(Location{path},
                     "no '#  Rank N Group G Pid P on HOST device D' lines: expected nccl-tests' header, "
                     "which lists every rank and its host");
  if (run.rows.empty())
    throw InputError(Location{path},
                     "no result rows: expected nccl-tests' table (size, count, type, redop, root, time, "
                     "algbw, busbw, ...) with sizes above 0");
  run.hosts = int(per_host.size());
  for (const auto& [host, ranks] : per_host)
    if (ranks != per_host.begin()->second)
      throw InputError(Location{path}, std::to_string(ranks) + " ranks on " + host + ", " +
                                           std::to_string(per_host.begin()->second) + " on " +
                                           per_host.begin()->first +
                                           ": calibrate reads runs with as many ranks on each host");
  if (run.ranks > kMaxClusterGpus)
    throw InputError(Location{path}, std::to_string(run.ranks) + " ranks: at most " +
                                         std::to_string(kMaxClusterGpus) + " GPUs in a cluster");
  return run;
}

NcclTestsRun load_nccl_tests(const std::string& path) {
  return parse_nccl_tests(read_input_file(path), path);
}

BytesPerSecond bus_bandwidth(const NcclTestsRun& run, const NcclTestsRow& row) {
  const double n = run.ranks, algbw = row.size.value() / row.time.value();
  return BytesPerSecond(algbw * (run.kind == CollectiveKind::AllReduce ? 2 * (n - 1) / n : (n - 1) / n));
}

void apply_nccl_tests(const std::vector<NcclTestsRun>& runs, Calibration& cal) {
  PoolSpec& pool = cal.cluster.pool_named(cal.pool);
  const std::string pp = "pools." + cal.pool;
  std::vector<TimedCollective> across;
  std::vector<ClusterSpec> clusters;  // the cluster each run across hosts ran on
  for (const NcclTestsRun& run : runs) {
    cal.inputs.push_back(run.path + ": nccl-tests " + enum_name(run.kind, kTestedCollectives) + ", " +
                         std::to_string(run.ranks) + " ranks on " + std::to_string(run.hosts) +
                         (run.hosts == 1 ? " host" : " hosts") +
                         (run.device.empty() ? "" : " (" + run.device + ")") + ", " +
                         std::to_string(run.rows.size()) + " sizes");
    const int per_host = run.ranks / run.hosts;  // parse_nccl_tests checked they are spread evenly
    if (per_host > pool.gpus_per_node)
      throw InputError(Location{run.path},
                       std::to_string(per_host) + " ranks on a host, but pool " + cal.pool +
                           "'s nodes have " + std::to_string(pool.gpus_per_node) +
                           " GPUs: calibrate the pool this run's GPUs belong to (--pool)");
    if (run.hosts > 1) {
      // On the cluster as sized for the run, as a profile's: at least as many nodes as it had hosts.
      ClusterSpec sized = cal.cluster;
      PoolSpec& sized_pool = sized.pool_named(cal.pool);
      sized_pool.nodes = std::max(sized_pool.nodes, run.hosts);
      for (const NcclTestsRow& row : run.rows)
        across.push_back(
            {run.kind, row.size, {run.ranks, per_host, false}, 1, row.time.value(), clusters.size()});
      clusters.push_back(std::move(sized));
      continue;
    }
    const std::string key = enum_name(run.kind, kTestedCollectives);
    const std::string field = pp + ".intra_node.busbw." + key, what = key + " inside a node";
    if (run.kind == CollectiveKind::AllToAll) {
      set_figure(cal, {field, what,
                       "kept: a node's fabric holds no all-to-all curve (the cost model times an all-to-all "
                       "inside a node by the all-gather and reduce-scatter curves, the same volume)",
                       false, int(run.rows.size()), 0});
      continue;
    }
    if (per_host < pool.gpus_per_node) {
      set_figure(cal, {field, what,
                       "kept: " + run.path + " ran on " + std::to_string(per_host) + " of a node's " +
                           std::to_string(pool.gpus_per_node) + " GPUs (the curve is of all of them)",
                       false, int(run.rows.size()), 0});
      continue;
    }
    // One point a size (the last row of a size wins), in size order as the curve requires.
    std::map<double, BytesPerSecond> by_size;
    for (const NcclTestsRow& row : run.rows) by_size[row.size.value()] = bus_bandwidth(run, row);
    BusbwCurve curve;
    for (const auto& [size, busbw] : by_size) curve.points.push_back({Bytes(size), busbw});
    curve_of(pool.intra_node, run.kind) = curve;
    // The calibrated model against every row: what the curve leaves between its points.
    double sum = 0;
    for (const NcclTestsRow& row : run.rows) {
      const double model =
          cost::collective_time(run.kind, row.size, {run.ranks, run.ranks, false}, pool, cal.cluster)
              .time.value();
      sum += std::pow(model / row.time.value() - 1, 2);
    }
    set_figure(cal, {field, what, curve_summary(curve) + " (" + run.path + ")", true, int(run.rows.size()),
                     std::sqrt(sum / double(run.rows.size()))});
  }
  if (!across.empty()) fit_inter_host(across, std::move(clusters), cal);
}

}  // namespace paratwin
