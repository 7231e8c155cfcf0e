// Reading a GEMM sweep, and the device figures it fits.
#include "plan/calibrate/gemm_sweep.hpp"

#include <cmath>
#include <set>

#include "plan/calibrate/csv_table.hpp"
#include "plan/spec/doc.hpp"
#include "plan/spec/reader.hpp"
#include "plan/util/number_text.hpp"
#include "plan/util/text_lines.hpp"

namespace paratwin {
namespace {

const std::vector<std::string> kColumns = {"m", "n", "k", "dtype", "tflops"};
const EnumNames<Precision> kSweepTypes = {
    {"bf16", Precision::Bf16}, {"fp16", Precision::Fp16}, {"fp8", Precision::Fp8}};

// The rows of one share (16-bit or fp8), and its fit.
struct Group {
  std::vector<const GemmSweepRow*> rows;
  double share = 0, rms = 0;
};

// The cost model's time of one launch of the row's GEMM on `device`.
double model_s(const GemmSweepRow& r, const DeviceSpec& device) {
  return cost::gemm_time(r.shape, device, r.dtype).value() + device.efficiency.kernel_launch.value();
}

double rms_of(const std::vector<const GemmSweepRow*>& rows, const DeviceSpec& device) {
  double sum = 0;
  for (const GemmSweepRow* r : rows) {
    const double measured = r->shape.flops() / r->flops_per_s;
    sum += std::pow(model_s(*r, device) / measured - 1, 2);
  }
  return rows.empty() ? 0 : std::sqrt(sum / double(rows.size()));
}

// The share of `group` (the device's gemm or gemm_fp8 as `fp8` says) that minimizes its rms residual:
// a golden-section search over (0, 1], the residual being unimodal in the share.
void fit_share(Group& g, DeviceSpec& device, bool fp8) {
  if (g.rows.empty()) return;
  auto set = [&](double share) {
    if (fp8)
      device.efficiency.gemm_fp8 = share;
    else
      device.efficiency.gemm = share;
  };
  auto cost = [&](double share) {
    set(share);
    return rms_of(g.rows, device);
  };
  const double phi = (std::sqrt(5.0) - 1) / 2;
  double a = 0.01, b = 1.0, c = b - phi * (b - a), d = a + phi * (b - a), fc = cost(c), fd = cost(d);
  for (int i = 0; i < 60; ++i) {
    if (fc < fd)
      b = d, d = c, fd = fc, c = b - phi * (b - a), fc = cost(c);
    else
      a = c, c = d, fc = fd, d = a + phi * (b - a), fd = cost(d);
  }
  g.share = (a + b) / 2;
  g.rms = cost(g.share);
}

}  // namespace

GemmSweep parse_gemm_sweep(std::string_view text, const std::string& path) {
  GemmSweep sweep;
  sweep.path = path;
  Diagnostics diag;
  for_each_csv_row(text, path, kColumns, diag, [&](const CsvRow& cells) {
    GemmSweepRow row;
    row.line = cells.line();
    double tflops = 0;
    bool ok = cells.positive("m", 1 << 24, row.shape.m);
    ok &= cells.positive("n", 1 << 24, row.shape.n);
    ok &= cells.positive("k", 1 << 24, row.shape.k);
    ok &= cells.positive("tflops", 1e5, tflops);
    row.flops_per_s = tflops * 1e12;
    ok &= cells.choice("dtype", kSweepTypes, row.dtype);
    row.shape.fp8 = row.dtype == Precision::Fp8;
    if (ok) sweep.rows.push_back(row);
  });
  diag.throw_if_errors();
  if (sweep.rows.empty()) throw InputError(Location{path}, "no measured GEMM below the header");
  return sweep;
}

GemmSweep load_gemm_sweep(const std::string& path) {
  return parse_gemm_sweep(read_input_file(path), path);
}

void apply_gemm_sweeps(const std::vector<GemmSweep>& sweeps, Calibration& cal) {
  if (sweeps.empty()) return;
  DeviceSpec& device = cal.cluster.devices.at(cal.device);
  const std::string dp = "devices." + cal.device + ".efficiency.";
  Group sixteen, eight;
  std::set<double> ks;
  for (const GemmSweep& sweep : sweeps) {
    cal.inputs.push_back(sweep.path + ": GEMM sweep, " + std::to_string(sweep.rows.size()) + " shapes");
    for (const GemmSweepRow& r : sweep.rows) {
      if (!device.peak.contains(r.dtype))
        throw InputError(Location{sweep.path, r.line, 1},
                         "device " + cal.device + " has no " + enum_name(r.dtype, kPrecisionNames) +
                             " peak to measure a share of (its file's peak." +
                             enum_name(r.dtype, kPrecisionNames) + ")");
      (r.shape.fp8 ? eight : sixteen).rows.push_back(&r);
      ks.insert(r.shape.k);
    }
  }
  // Both shares fitted at the device's current k-steps; their rms residual over all rows.
  auto fit_shares = [&] {
    fit_share(sixteen, device, false);
    fit_share(eight, device, true);
    const double n16 = double(sixteen.rows.size()), n8 = double(eight.rows.size());
    return std::sqrt((n16 * sixteen.rms * sixteen.rms + n8 * eight.rms * eight.rms) / (n16 + n8));
  };
  // The tiles' fixed cost is told apart from the shares only by GEMMs of several K: over a grid of
  // k-steps (0 to 8 by 1/8), each share fitted at each, the one with the least residual over all rows.
  const bool fit_steps = ks.size() > 1;
  if (fit_steps) {
    double best_steps = 0, best = INFINITY;
    for (int i = 0; i <= 64; ++i) {
      device.efficiency.gemm_tile_k_steps = i / 8.0;
      if (const double rms = fit_shares(); rms < best) best = rms, best_steps = i / 8.0;
    }
    device.efficiency.gemm_tile_k_steps = best_steps;
  }
  const double rms = fit_shares();
  for (auto [group, fp8] : {std::pair{&sixteen, false}, std::pair{&eight, true}}) {
    if (group->rows.empty()) continue;
    const Precision p = group->rows.front()->dtype;
    const std::string at = format_number("%.3f", group->share) + " of the " + enum_name(p, kPrecisionNames) +
                           " peak, " + to_string(FlopsPerSecond(group->share * device.peak.at(p).value())) +
                           " in the main loop";
    set_figure(cal, {dp + (fp8 ? "gemm_fp8" : "gemm"), fp8 ? "fp8 GEMMs" : "16-bit GEMMs", at, true,
                     int(group->rows.size()), group->rms});
    if (group->share > 0.99)
      cal.notes.push_back(std::string(fp8 ? "fp8" : "16-bit") +
                          " GEMMs ran at the device's peak: its file's peak may be below what it does");
  }
  set_figure(cal, {dp + "gemm_tile_k_steps", "GEMM tiles' fixed cost",
                   fit_steps ? format_number("%.3g", device.efficiency.gemm_tile_k_steps) + " k-steps"
                             : "kept: every GEMM measured had one K (sweep K to fit it)",
                   fit_steps, int(sixteen.rows.size() + eight.rows.size()), rms});
}

}  // namespace paratwin
