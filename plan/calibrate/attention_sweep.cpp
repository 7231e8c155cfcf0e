// Reading an attention-kernel sweep, and the fused-attention figures it gives a device.
#include "plan/calibrate/attention_sweep.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "plan/calibrate/csv_table.hpp"
#include "plan/spec/doc.hpp"
#include "plan/spec/reader.hpp"
#include "plan/spec/suggest.hpp"
#include "plan/util/number_text.hpp"
#include "plan/util/text_lines.hpp"

namespace paratwin {
namespace {

using cost::FusedKernel;

const EnumNames<FusedKernel> kKernels = {
    {"flash2", FusedKernel::Flash2}, {"flash3", FusedKernel::Flash3}, {"triton", FusedKernel::Triton}};
const EnumNames<Precision> kSixteenBit = {{"bf16", Precision::Bf16}, {"fp16", Precision::Fp16}};
const EnumNames<bool> kCausal = {{"true", true}, {"false", false}};
const std::vector<std::string> kColumns = {"kernel", "causal",     "head_dim",  "seq_len",
                                           "dtype",  "fwd_tflops", "bwd_tflops"};
// flash-attention's benchmarks print a method's rates under their own names; the ones that are a kernel
// of the device file. Their "Triton" is OpenAI's kernel (triton.ops.flash_attention, the Triton
// tutorial's), another than the flash_attn_triton.py that `triton` stands for; "CuDNN" is cuDNN's.
const std::map<std::string, FusedKernel, std::less<>> kBenchmarkMethods = {
    {"Flash2", FusedKernel::Flash2}, {"Fav2", FusedKernel::Flash2}, {"Fav3", FusedKernel::Flash3}};

std::string label(FusedKernel kernel) {
  switch (kernel) {
    case FusedKernel::Flash2:
      return "FlashAttention 2";
    case FusedKernel::Flash3:
      return "FlashAttention 3";
    case FusedKernel::Triton:
      return "Triton FlashAttention";
  }
  return "";
}

bool whole(double v) {
  return v == double(int(v));
}

void parse_csv(std::string_view text, AttentionSweep& sweep, Diagnostics& diag) {
  for_each_csv_row(text, sweep.path, kColumns, diag, [&](const CsvRow& cells) {
    AttentionSweepRow row;
    row.line = cells.line();
    double head = 0, length = 0, fwd = 0, bwd = 0;
    bool ok = cells.choice("kernel", kKernels, row.kernel);
    ok &= cells.choice("causal", kCausal, row.causal);
    ok &= cells.choice("dtype", kSixteenBit, row.dtype);
    ok &= cells.positive("head_dim", 1024, head);
    ok &= cells.positive("seq_len", 1 << 24, length);
    ok &= cells.positive("fwd_tflops", 1e5, fwd);
    ok &= cells.positive("bwd_tflops", 1e5, bwd);
    if (!ok) return;  // the numbers may be out of range: nothing converted
    if (!(whole(head) && whole(length))) {
      diag.error(cells.where(whole(head) ? "seq_len" : "head_dim"), "expected a whole number");
      return;
    }
    row.head_dim = int(head), row.seq_len = int(length);
    row.forward_flops_per_s = fwd * 1e12, row.backward_flops_per_s = bwd * 1e12;
    sweep.rows.push_back(row);
  });
}

// A configuration line of flash-attention's benchmarks: "### causal=True, headdim=128, batch_size=2,
// seqlen=8192 ###" (benchmarks/benchmark_flash_attention.py), "### headdim = 128, causal = True, seqlen
// = 8192 ###" (hopper/benchmark_attn.py) or, in the latter's earlier form, with "mode = 'fwd'" (then the
// result lines under it are of that direction alone).
struct Configuration {
  bool causal = true;
  int head_dim = 0, seq_len = 0;
  std::optional<bool> forward_only;  // mode 'fwd' (true) or 'bwd' (false)
};

bool is_configuration(std::string_view line) {
  const size_t at = line.find_first_not_of(" \t");
  return at != std::string_view::npos && line.substr(at).starts_with("###") &&
         line.find("causal") != std::string_view::npos;
}

std::optional<Configuration> parse_configuration(std::string_view line, const std::string& path, int number,
                                                 Diagnostics& diag) {
  std::map<std::string, LineField, std::less<>> values;  // key -> value, at its column
  for (const LineField& f : comma_fields(line)) {
    const size_t eq = f.text.find('=');
    if (eq == std::string_view::npos) continue;
    auto trim = [](std::string_view t, std::string_view chars) {
      while (!t.empty() && chars.find(t.front()) != std::string_view::npos) t.remove_prefix(1);
      while (!t.empty() && chars.find(t.back()) != std::string_view::npos) t.remove_suffix(1);
      return t;
    };
    const std::string_view value = f.text.substr(eq + 1), trimmed = trim(value, "# '\"");
    const int column = f.column + int(eq) + 1 + int(value.find(trimmed.empty() ? value : trimmed));
    values[std::string(trim(f.text.substr(0, eq), "# "))] = {trimmed, column};
  }
  Configuration c;
  bool ok = true;
  auto field = [&](const char* key, const char* expected, auto parse) {
    const auto it = values.find(key);
    if (it == values.end() || !parse(it->second.text)) {
      diag.error(
          {path, number, it == values.end() ? 1 : it->second.column},
          std::string("expected ") + key + " = " + expected + " in the benchmark's configuration line");
      ok = false;
    }
  };
  auto whole_number = [](int& v) { return [&v](std::string_view t) { return parse_field(t, v) && v > 0; }; };
  field("headdim", "a positive whole number", whole_number(c.head_dim));
  field("seqlen", "a positive whole number", whole_number(c.seq_len));
  field("causal", "True or False", [&](std::string_view t) {
    c.causal = t == "True";
    return t == "True" || t == "False";
  });
  if (values.contains("mode"))
    field("mode", "'fwd' or 'bwd'", [&](std::string_view t) {
      c.forward_only = t == "fwd";
      return t == "fwd" || t == "bwd";
    });
  if (!ok) return std::nullopt;
  return c;
}

// A result line: "<method> fwd: X TFLOPs/s, bwd: Y TFLOPs/s, fwd + bwd: Z TFLOPs/s" (both directions),
// "<method> fwd: T ms, X TFLOPS" (one) or, under a mode, "<method>: T ms, X TFLOPS".
struct Result {
  std::string method;
  std::optional<LineField> forward, backward;  // the rate's text
};

std::optional<Result> result_of(const std::vector<LineField>& t, const std::optional<Configuration>& mode) {
  if (t.size() >= 6 && t[1].text == "fwd:" && t[4].text == "bwd:")
    return Result{std::string(t[0].text), t[2], t[5]};
  if (t.size() < 4 || t.back().text != "TFLOPS") return std::nullopt;
  const LineField& rate = t[t.size() - 2];
  if (t[1].text == "fwd:" || t[1].text == "bwd:") {
    Result r{std::string(t[0].text), {}, {}};
    (t[1].text == "fwd:" ? r.forward : r.backward) = rate;
    return r;
  }
  if (mode && mode->forward_only && t[0].text.ends_with(':')) {
    Result r{std::string(t[0].text.substr(0, t[0].text.size() - 1)), {}, {}};
    (*mode->forward_only ? r.forward : r.backward) = rate;
    return r;
  }
  return std::nullopt;
}

void parse_benchmark(std::string_view text, AttentionSweep& sweep, Diagnostics& diag) {
  std::optional<Configuration> configuration;
  // A kernel's rates by configuration, gathered over the lines (one script prints the directions apart).
  struct Rates {
    std::optional<double> forward, backward;
    int line = 0;
  };
  std::map<std::tuple<std::string, bool, int, int>, Rates> measured;  // (method, causal, head dim, length)
  std::map<std::string, int> others;                                  // other methods' result lines
  int not_run = 0;
  for_each_line(text, [&](std::string_view line, int number) {
    if (is_configuration(line)) {
      configuration = parse_configuration(line, sweep.path, number, diag);
      return;
    }
    const std::optional<Result> result = result_of(whitespace_fields(line), configuration);
    if (!result) return;
    if (!configuration) {
      diag.error({sweep.path, number, 1},
                 "a result line before any '### ... causal ..., headdim ..., seqlen "
                 "... ###' configuration line");
      return;
    }
    const auto kernel = kBenchmarkMethods.find(result->method);
    if (kernel == kBenchmarkMethods.end()) {
      ++others[result->method];
      return;
    }
    Rates& rates =
        measured[{result->method, configuration->causal, configuration->head_dim, configuration->seq_len}];
    rates.line = number;
    for (auto [field, into] :
         {std::pair{&result->forward, &rates.forward}, {&result->backward, &rates.backward}}) {
      if (!*field) continue;
      double v = 0;
      if (!parse_field((*field)->text, v) || v < 0)
        diag.error({sweep.path, number, (*field)->column},
                   "expected a rate in TFLOP/s, got '" + std::string((*field)->text) + "'");
      else
        *into = v;
    }
  });
  int one_direction = 0;
  for (const auto& [key, rates] : measured) {
    const auto& [method, causal, head_dim, length] = key;
    if (!rates.forward || !rates.backward) {
      ++one_direction;
    } else if (*rates.forward == 0 || *rates.backward == 0) {
      ++not_run;  // the benchmarks print 0.00 for a configuration that did not run (out of memory)
    } else {
      AttentionSweepRow row;
      row.kernel = kBenchmarkMethods.find(method)->second, row.causal = causal;
      row.head_dim = head_dim, row.seq_len = length, row.line = rates.line;
      row.forward_flops_per_s = *rates.forward * 1e12, row.backward_flops_per_s = *rates.backward * 1e12;
      sweep.rows.push_back(row);
    }
  }
  for (const auto& [method, lines] : others)
    sweep.skipped.push_back(std::to_string(lines) + " " + method +
                            " line(s) skipped: not a kernel of the device file" +
                            (method == "Triton" ? " (OpenAI's triton.ops kernel)" : ""));
  if (not_run > 0)
    sweep.skipped.push_back(std::to_string(not_run) +
                            " configuration(s) of 0.00 TFLOP/s skipped: they did not run");
  if (one_direction > 0)
    sweep.skipped.push_back(
        std::to_string(one_direction) +
        " configuration(s) with a forward or a backward rate alone skipped: the figures need both");
}

// The rows of one kernel at one head size, as shares of the peak summed by mask and key length.
struct Means {
  struct Sum {
    double forward = 0, backward = 0;
    int rows = 0;
  };
  std::map<std::pair<bool, int>, Sum> by;  // (causal, key length)

  // The means at `length` (which has a causal row), the non-causal ones beside them where measured.
  EfficiencySpec::FusedRates at(int length) const {
    const Sum& c = by.at({true, length});
    EfficiencySpec::FusedRates r;
    r.forward = c.forward / c.rows, r.backward = c.backward / c.rows;
    if (auto full = by.find({false, length}); full != by.end())
      r.forward_full = full->second.forward / full->second.rows,
      r.backward_full = full->second.backward / full->second.rows;
    return r;
  }
};

}  // namespace

AttentionSweep parse_attention_sweep(std::string_view text, const std::string& path) {
  AttentionSweep sweep;
  sweep.path = path;
  Diagnostics diag;
  bool benchmark = false;
  for_each_line(text, [&](std::string_view line, int) { benchmark |= is_configuration(line); });
  sweep.form = benchmark ? "flash-attention benchmark" : "CSV";
  if (benchmark)
    parse_benchmark(text, sweep, diag);
  else
    parse_csv(text, sweep, diag);
  diag.throw_if_errors();
  if (sweep.rows.empty())
    throw InputError(Location{path}, benchmark
                                         ? "no Flash2, Fav2 or Fav3 result with both rates: nothing the "
                                           "device file holds"
                                         : "no measured kernel below the header");
  return sweep;
}

AttentionSweep load_attention_sweep(const std::string& path) {
  return parse_attention_sweep(read_input_file(path), path);
}

void apply_attention_sweeps(const std::vector<AttentionSweep>& sweeps, Calibration& cal) {
  DeviceSpec& device = cal.cluster.devices.at(cal.device);
  std::map<FusedKernel, std::vector<std::pair<const AttentionSweepRow*, const std::string*>>> by_kernel;
  for (const AttentionSweep& sweep : sweeps) {
    cal.inputs.push_back(sweep.path + ": attention sweep (" + sweep.form + "), " +
                         std::to_string(sweep.rows.size()) + " measurements");
    for (const std::string& s : sweep.skipped) cal.notes.push_back(sweep.path + ": " + s);
    for (const AttentionSweepRow& r : sweep.rows) by_kernel[r.kernel].push_back({&r, &sweep.path});
  }
  for (const auto& [kernel, rows] : by_kernel) {
    const std::string name = enum_name(kernel, kKernels);
    std::map<int, Means> by_head;  // each head size's rows, as shares of the peak
    std::string peak_name;
    for (const auto& [r, path] : rows) {
      auto peak = device.peak.find(r->dtype);
      if (peak == device.peak.end())
        peak = device.peak.find(r->dtype == Precision::Bf16 ? Precision::Fp16 : Precision::Bf16);
      if (peak == device.peak.end())
        throw InputError(
            Location{*path, r->line, 1},
            "device " + cal.device + " has no 16-bit peak to measure a share of (its file's peak.bf16)");
      peak_name = enum_name(peak->first, kPrecisionNames);
      const double fwd = r->forward_flops_per_s / peak->second.value(),
                   bwd = r->backward_flops_per_s / peak->second.value();
      const double outside = std::max(fwd, bwd) > 1 ? std::max(fwd, bwd) : std::min(fwd, bwd);
      if (outside > 1 || outside < 0.001)
        throw InputError(Location{*path, r->line, 1},
                         "a rate at " + format_number("%.3g", outside) + " of device " + cal.device + "'s " +
                             peak_name + " peak (" + to_string(peak->second) +
                             "): measured on another device? (--cluster, --pool)");
      Means::Sum& sum = by_head[r->head_dim].by[{r->causal, r->seq_len}];
      sum.forward += fwd, sum.backward += bwd, ++sum.rows;
    }
    // One head size's curve: the rates at its longest causal key length, the others by length; empty
    // without a causal row.
    auto curve_of = [&](int head, const Means& means, EfficiencySpec::FusedCurve& curve) {
      std::set<int> causal, full;
      for (const auto& [key, sum] : means.by) (key.first ? causal : full).insert(key.second);
      if (causal.empty()) return std::set<int>{};
      curve.seq_len = *causal.rbegin();
      static_cast<EfficiencySpec::FusedRates&>(curve) = means.at(curve.seq_len);
      for (int length : causal)
        if (length != curve.seq_len) curve.by_seq_len[length] = means.at(length);
      for (int length : full)
        if (!causal.contains(length))
          cal.notes.push_back(name + ": the rates without a mask at " + std::to_string(length) +
                              " keys, head dim " + std::to_string(head) +
                              ", not used (no causal measurement at that length)");
      return causal;
    };
    // The largest head size measured carries the figures; the others are its by_head_dim.
    const auto& [head, means] = *by_head.rbegin();
    EfficiencySpec::FusedAttention f;
    f.head_dim = head;
    const std::set<int> causal = curve_of(head, means, f);
    if (causal.empty())
      throw InputError(Location{*rows.front().second},
                       name + ": no causal measurement at head dim " + std::to_string(head) +
                           ": the figures are a causal kernel's, with the non-causal rates beside them");
    int used = 0, unmasked = 0;
    for (const auto& [key, sum] : means.by)
      used += sum.rows, unmasked += !key.first && causal.contains(key.second);
    std::string others;
    for (const auto& [h, m] : by_head) {
      if (h == head) continue;
      EfficiencySpec::FusedCurve curve;
      if (curve_of(h, m, curve).empty()) {
        cal.notes.push_back(name + ": the rates at head dim " + std::to_string(h) +
                            " not used (no causal measurement at that head size)");
        continue;
      }
      f.by_head_dim[h] = curve;
      for (const auto& [key, sum] : m.by) used += sum.rows;
      others += (others.empty() ? "; head dims " : ", ") + std::to_string(h);
    }
    cost::fused_figures(device.efficiency, kernel) = f;
    set_figure(cal, {"devices." + cal.device + ".efficiency." + name,
                     label(kernel) + " (head dim " + std::to_string(head) + ")",
                     format_number("%.3f", f.forward) + " forward, " + format_number("%.3f", f.backward) +
                         " backward of the " + peak_name + " peak at " + std::to_string(f.seq_len) +
                         " keys; " + std::to_string(causal.size()) + " key length(s) from " +
                         std::to_string(*causal.begin()) + ", " + std::to_string(unmasked) +
                         " without a mask too" + others + (others.empty() ? "" : " by_head_dim"),
                     true, used, -1});
  }
}

}  // namespace paratwin
