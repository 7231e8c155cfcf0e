// A profile's tokens per expert as the model's routing.
#include "plan/calibrate/measured_routing.hpp"

namespace paratwin {

MoeRouting measured_routing(const Profile& profile, const ModelSpec& model) {
  const Location where = profile.routed.empty() ? Location{profile.path} : profile.routed_location;
  if (!model.moe)
    throw InputError(where, "model " + model.name + " has no experts: there is no routing to measure");
  if (profile.routed.empty())
    throw InputError(where,
                     "the profile records no expert routing (a run of ParaTwin before it did, or a "
                     "dense model); run the MoE scenario again with --profile");
  if (profile.routed_experts != model.moe->experts)
    throw InputError(where, "the profile routed to " + std::to_string(profile.routed_experts) +
                                " experts but model " + model.name + " has " +
                                std::to_string(model.moe->experts));
  std::vector<int> moe_layers;
  for (int l = 0; l < model.layers; ++l)
    if (model.is_moe_layer(l)) moe_layers.push_back(l);
  MoeRouting r;
  r.kind = RoutingKind::Measured;
  bool every_layer = profile.routed.size() == moe_layers.size();
  for (size_t i = 0; every_layer && i < moe_layers.size(); ++i)
    every_layer = profile.routed[i].first == moe_layers[i];
  if (every_layer) {
    for (const auto& [layer, tokens] : profile.routed) r.tokens.push_back(tokens);
  } else {
    std::vector<double> sum(size_t(model.moe->experts), 0.0);
    for (const auto& [layer, tokens] : profile.routed)
      for (size_t e = 0; e < sum.size(); ++e) sum[e] += tokens[e];
    r.tokens.push_back(sum);
  }
  return r;
}

std::string measured_model_yaml(const ProfiledRun& run, const std::string& timestamp) {
  ModelSpec model = run.scenario.model;
  model.moe->routing = measured_routing(run.profile, model);
  return "# " + model.name +
         " with the expert routing measured by a live run (paratwin calibrate --routing,\n" + "# " +
         timestamp + ", profile " + run.profile.path + ": " + std::to_string(run.profile.steps) +
         " steps on " + std::to_string(run.profile.ranks) + " ranks). Use it with --set model=THIS_FILE.\n" +
         to_yaml(model);
}

}  // namespace paratwin
