// For tests of what a plan choice does: a scenario's fixed plan verified, lowered and evaluated, and the
// optimizer's pruned search against its brute force. Every step must succeed (BOOST_REQUIRE), so that a
// test reads the outcome only.
#pragma once

#include <boost/test/unit_test.hpp>
#include <string>
#include <vector>

#include "catalog_scenario.hpp"
#include "plan/analytic/evaluate.hpp"
#include "plan/ir/plan.hpp"
#include "plan/ir/program.hpp"
#include "plan/search/optimizer.hpp"

namespace paratwin_test {

struct EvaluatedPlan {
  paratwin::ScenarioSpec s;
  paratwin::Plan plan;
  paratwin::Program program;
  paratwin::Evaluation eval;
};

inline EvaluatedPlan evaluated_plan(const std::string& yaml, const std::vector<std::string>& sets) {
  EvaluatedPlan r{scenario(yaml, sets), {}, {}, {}};
  r.plan = paratwin::complete_plan(r.s);
  const auto problems = verify(r.plan, r.s.model, r.s.cluster, r.s.training);
  BOOST_REQUIRE_MESSAGE(problems.empty(), (problems.empty() ? std::string() : problems.front()));
  r.program = paratwin::lower(r.plan, r.s.model, r.s.cluster, r.s.training);
  const auto broken = paratwin::verify(r.program);
  BOOST_REQUIRE_MESSAGE(broken.empty(), (broken.empty() ? std::string() : broken.front()));
  r.eval = paratwin::evaluate(r.program, r.s.cluster, r.s.training);
  return r;
}

// The top plans of the brute force (every candidate evaluated), once the pruned search found the same
// best: its bounds held.
inline std::vector<paratwin::Candidate> brute_force_top(const paratwin::ScenarioSpec& s) {
  const paratwin::SearchResult pruned = paratwin::search_plans(s, {3, false});
  const paratwin::SearchResult every = paratwin::search_plans(s, {64, true});
  BOOST_REQUIRE(!pruned.top.empty());
  BOOST_TEST(pruned.top[0].objective == every.top[0].objective);
  return every.top;
}

}  // namespace paratwin_test
