// A scenario lowered and evaluated for the Program's tests: the plan verified, its Program, the analytic
// evaluation; and what those tests look up in a role.
#pragma once

#include <boost/test/unit_test.hpp>
#include <string>
#include <vector>

#include "catalog_scenario.hpp"
#include "plan/analytic/evaluate.hpp"
#include "plan/ir/program.hpp"

namespace paratwin_test {

// tiny-gpt on two DGX A100 nodes; a test adds its plan.
inline const char* kTinyOnTwoNodes =
    "model: tiny-gpt\ncluster: {from: dgx-a100-80g, nodes: 2}\ntraining: {global_batch: 32, seq_len: 128}\n";

struct Run {
  paratwin::ScenarioSpec s;
  paratwin::Plan plan;
  paratwin::Program program;
  paratwin::Evaluation eval;
};

inline Run run(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  Run r{scenario(yaml, sets), {}, {}, {}};
  r.plan = paratwin::complete_plan(r.s);
  const auto problems = paratwin::verify(r.plan, r.s.model, r.s.cluster, r.s.training);
  BOOST_REQUIRE_MESSAGE(problems.empty(), (problems.empty() ? std::string() : problems.front()));
  r.program = paratwin::lower(r.plan, r.s.model, r.s.cluster, r.s.training);
  r.eval = paratwin::evaluate(r.program, r.s.cluster, r.s.training);
  return r;
}

// Tasks of a role by purpose.
inline std::vector<size_t> tasks_for(const paratwin::Role& role, paratwin::Purpose purpose) {
  std::vector<size_t> out;
  for (size_t i = 0; i < role.tasks.size(); ++i)
    if (role.tasks[i].purpose == purpose) out.push_back(i);
  return out;
}

inline std::string joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  return all;
}

}  // namespace paratwin_test
