// Scenario summaries as text and JSON.
#include "plan/spec/summary.hpp"

#include <cstdio>

namespace paratwin {

ScenarioSummary summarize(const ScenarioSpec& s) {
  ScenarioSummary out;
  out.scenario = s.name;
  out.model = s.model.name.empty() ? "(inline)" : s.model.name;
  const ParameterCount params = count_parameters(s.model);
  out.parameters = params.total;
  out.active_parameters = params.active;
  out.flops_per_token = training_flops_per_token(s.model, s.training.seq_len);
  out.cluster = s.cluster.name.empty() ? "(inline)" : s.cluster.name;
  out.gpus = s.cluster.gpus();
  out.pools = static_cast<int>(s.cluster.pools.size());
  out.peak = s.cluster.peak(s.training.precision);
  out.device_memory = s.cluster.device_memory();
  out.tokens_per_iteration = double(s.training.global_batch) * s.training.seq_len;
  out.flops_per_iteration = Flops(out.flops_per_token * out.tokens_per_iteration);
  if (s.training.steps) out.iterations = double(*s.training.steps);
  if (s.training.tokens) out.iterations = *s.training.tokens / out.tokens_per_iteration;
  if (out.peak.value() > 0) out.ideal_iteration_time = out.flops_per_iteration / out.peak;
  return out;
}

std::string to_text(const ScenarioSummary& s) {
  std::string out;
  auto line = [&out](const char* label, const std::string& value) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "  %-26s %s\n", label, value.c_str());
    out += buf;
  };
  out += "scenario " + s.scenario + "\n";
  std::string params = format_count(s.parameters) + " parameters";
  if (s.active_parameters < s.parameters)
    params += " (" + format_count(s.active_parameters) + " active per token)";
  line("model", s.model + ": " + params);
  line("training FLOPs per token", to_string(Flops(s.flops_per_token)));
  line("cluster", s.cluster + ": " + std::to_string(s.gpus) + " GPUs" +
                      (s.pools > 1 ? " in " + std::to_string(s.pools) + " pools" : ""));
  line("peak (training precision)", to_string(s.peak));
  line("device memory", to_string(s.device_memory));
  line("tokens per iteration", format_count(s.tokens_per_iteration));
  line("FLOPs per iteration", to_string(s.flops_per_iteration));
  line("iteration at 100% of peak", to_string(s.ideal_iteration_time));
  if (s.iterations > 0) {
    line("iterations to train", format_count(s.iterations));
    line("training at 100% of peak", to_string(s.ideal_iteration_time * s.iterations));
  }
  return out;
}

nlohmann::json to_json(const ScenarioSummary& s) {
  return {{"scenario", s.scenario},
          {"model",
           {{"name", s.model},
            {"parameters", s.parameters},
            {"active_parameters", s.active_parameters},
            {"training_flops_per_token", s.flops_per_token}}},
          {"cluster",
           {{"name", s.cluster},
            {"gpus", s.gpus},
            {"pools", s.pools},
            {"peak_flops", s.peak.value()},
            {"device_memory_bytes", s.device_memory.value()}}},
          {"tokens_per_iteration", s.tokens_per_iteration},
          {"flops_per_iteration", s.flops_per_iteration.value()},
          {"iterations", s.iterations},
          {"ideal_iteration_time_s", s.ideal_iteration_time.value()}};
}

}  // namespace paratwin
