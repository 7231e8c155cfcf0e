// What every part of the plan search reads: the scenario, the plan fields it fixes, and the figures
// derived from them once.
#pragma once

#include <string>
#include <vector>

#include "plan/cost/memory.hpp"
#include "plan/ir/plan.hpp"
#include "plan/spec/scenario.hpp"

namespace paratwin::search {

// The density of top-k compression when the search chooses it.
inline constexpr double kSearchedTopkRatio = 0.01;

struct SearchContext {
  SearchContext(const ScenarioSpec& scenario, bool exhaustive_search)
      : s(scenario),
        req(scenario.plan),
        exhaustive(exhaustive_search),
        elem(cost::element_bytes(scenario.training.precision)),
        grad_elem(cost::gradient_bytes(scenario.training)),
        gather_elem(cost::gathered_weight_bytes(scenario.training)),
        params(count_parameters(scenario.model)),
        orders{scenario.plan.order.value_or(Plan().order), "tp-cp-pp-dp"} {
    for (const PoolSpec& pool : s.cluster.pools) devices.push_back(&s.cluster.device_of(pool));
    for (int l = 0; l < s.model.layers; ++l) moe_layers += s.model.is_moe_layer(l) ? 1 : 0;
  }

  const ScenarioSpec& s;
  const PlanRequest& req;  // the plan fields the scenario fixes
  bool exhaustive;         // every candidate evaluated, twins included (SearchOptions::exhaustive)
  double elem;             // bytes per element in the training precision
  double grad_elem;        // bytes per gradient element (cost::gradient_bytes)
  double gather_elem;      // bytes per weight in the DP weight gathers (cost::gathered_weight_bytes)
  std::vector<const DeviceSpec*> devices;  // by pool (device_of looks them up by name)
  ParameterCount params;
  int moe_layers = 0;
  // The rank orders the search tries: the requested or default one, then the other (SearchSpace::orders).
  std::vector<std::string> orders;

  // plan.reshard as the scenario asks it (the search does not choose it): ZeRO 3's plans get it.
  Reshard reshard() const { return req.reshard.value_or(Reshard::AfterForward); }
  // How many times ZeRO 3 gathers each parameter in a step of m micro-batches, at least: before every
  // forward and backward under reshard after_forward; once under the others (a unit held from its
  // forward to its backward is gathered at least once a step).
  double zero3_gathers(int m) const { return reshard() == Reshard::AfterForward ? 2.0 * m : 1.0; }
  // How many times ZeRO 3 reduce-scatters each gradient in a step of m micro-batches (and HSDP
  // all-reduces its shard): every micro-batch, or once under reshard after_step.
  double zero3_reductions(int m) const { return reshard() == Reshard::AfterStep ? 1.0 : double(m); }

  // Micro-batches per data-parallel replica and step.
  int microbatches(int dp, int micro_batch) const {
    return static_cast<int>(s.training.global_batch / dp / micro_batch);
  }
};

}  // namespace paratwin::search
