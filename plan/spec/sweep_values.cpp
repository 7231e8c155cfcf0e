// A sweep's values checked against their fields before any point runs: each applied to the scenario as
// the overrides that set it (sweep_overrides), problems reported once at the value or its path.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "plan/spec/scenario.hpp"

namespace paratwin {

std::vector<Override> sweep_overrides(const std::vector<SweepSetting>& settings) {
  std::vector<Override> out;
  for (const auto& setting : settings) {
    Override o = parse_override(setting.path + "=null");
    o.value = setting.value;
    o.text = setting.path + "=" + to_flow_yaml(setting.value);
    out.push_back(std::move(o));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Override& a, const Override& b) { return a.path.size() < b.path.size(); });
  return out;
}

void check_sweep_values(const ScenarioSpec& scenario, const SweepSpec& sweep, const Catalog& catalog,
                        Diagnostics& diag) {
  DocNode base = scenario.document;
  std::erase_if(base.entries, [](const DocEntry& e) { return e.key == "sweep"; });
  // Applies `settings` to the scenario and reports what is wrong, each message once, prefixed by
  // `name`; problems located in an override's path go to the path as the sweep writes it.
  auto check = [&](const std::vector<SweepSetting>& settings, const std::string& name) {
    Diagnostics point;
    DocNode doc = base;
    const std::vector<Override> overrides = sweep_overrides(settings);
    try {
      for (const Override& o : overrides) apply_override(doc, o);
      parse_scenario_document(std::move(doc), catalog, point, /*run_checks=*/false);
    } catch (const InputError& e) {
      for (const auto& d : e.diagnostics()) point.error(d.where, d.message);
    }
    for (const auto& d : point.all()) {
      if (d.severity != Severity::Error) continue;
      Location where = d.where;
      std::string message = name + ": " + d.message;
      for (const Override& o : overrides) {
        if (d.where.file != override_location(o.text).file) continue;
        for (const auto& setting : settings)
          if (o.text.rfind(setting.path + "=", 0) == 0) {
            where = setting.location;
            message = name + (settings.size() > 1 ? "." + setting.path : "") + ": " + d.message;
          }
      }
      const bool seen = std::any_of(diag.all().begin(), diag.all().end(), [&](const Diagnostic& x) {
        return x.where.str() == where.str() && x.message == message;
      });
      if (!seen) diag.error(where, message);
    }
  };
  // Each check loads the scenario (about a millisecond): a sweep of thousands of values is checked on
  // its first kMostChecks distinct ones, the others when their points run (an invalid value makes an
  // invalid point there), so that loading a scenario stays quick whatever its sweep holds.
  constexpr size_t kMostChecks = 200;
  std::set<std::string> checked;
  size_t skipped = 0, values = 0;
  auto check_once = [&](const std::vector<SweepSetting>& settings, const std::string& name) {
    ++values;
    std::string key;
    for (const auto& setting : settings) key += setting.path + "=" + to_flow_yaml(setting.value) + "\n";
    if (checked.count(key)) return;
    if (checked.size() >= kMostChecks) {
      ++skipped;
      return;
    }
    checked.insert(key);
    check(settings, name);
  };
  for (const auto& axis : sweep.grid)
    for (const auto& value : axis.values)
      check_once({{axis.path, axis.location, value}}, "sweep.grid." + axis.path);
  for (size_t i = 0; i < sweep.list.size(); ++i)
    check_once(sweep.list[i], "sweep.list[" + std::to_string(i) + "]");
  if (skipped > 0)
    diag.warning(sweep.location,
                 std::to_string(skipped) + " of the sweep's " + std::to_string(values) +
                     " values were not checked here (only the first " + std::to_string(kMostChecks) +
                     " distinct ones are); each is checked when its points run, and an invalid "
                     "one makes them invalid points");
}

}  // namespace paratwin
