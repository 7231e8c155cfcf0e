// plan.reshard: when ZeRO 3 frees the parameters it gathers, as PyTorch FSDP's three choices do, in the
// lowered Program (its gathers, reduce-scatters and memory), the plan file, verification and the search.
#define BOOST_TEST_MODULE reshard
#include <boost/test/unit_test.hpp>

#include "evaluated_plan.hpp"

using namespace paratwin;

namespace {

using Run = paratwin_test::EvaluatedPlan;

Run run(const std::string& yaml, const std::vector<std::string>& sets) {
  return paratwin_test::evaluated_plan(yaml, sets);
}

int count(const Role& role, Purpose purpose) {
  int n = 0;
  for (const Task& t : role.tasks) n += t.purpose == purpose ? 1 : 0;
  return n;
}

// 24 layers over 32 data-parallel ranks on a slow network, 4 micro-batches a step.
const std::string kDataParallel =
    "model: gpt3-1.7b\ncluster: {from: a100-pcie-ethernet, nodes: 4}\n"
    "training: {global_batch: 256}\n"
    "plan: {tp: 1, pp: 1, dp: 32, micro_batch: 2, zero: 3}\n";

// The same model over 4 pipeline stages (6 layers each) and 8 replicas, 8 micro-batches in 1F1B.
const std::string kPipeline =
    "model: gpt3-1.7b\ncluster: {from: a100-pcie-ethernet, nodes: 4}\n"
    "training: {global_batch: 128}\n"
    "plan: {tp: 1, pp: 4, dp: 8, micro_batch: 2, zero: 3}\n";

}  // namespace

// Per unit (layer) and micro-batch: after_forward gathers before the forward and again before the
// backward; after_backward before the forward only (one micro-batch at a time here, so each forward
// follows the reshard of the backward before); after_step once a step. The gradients are
// reduce-scattered every micro-batch, or under after_step once, after the unit's last backward.
BOOST_AUTO_TEST_CASE(each_choice_gathers_and_reduce_scatters_as_fsdp_does) {
  const int layers = 24, m = 4;
  const Run forward = run(kDataParallel, {}), backward = run(kDataParallel, {"plan.reshard=after_backward"}),
            step = run(kDataParallel, {"plan.reshard=after_step"});
  BOOST_TEST(forward.plan.num_microbatches == m);
  BOOST_TEST(count(forward.program.roles[0], Purpose::PassGather) == 2 * m * layers);
  BOOST_TEST(count(forward.program.roles[0], Purpose::GradientReduce) == m * layers);
  BOOST_TEST(count(backward.program.roles[0], Purpose::PassGather) == m * layers);
  BOOST_TEST(count(backward.program.roles[0], Purpose::GradientReduce) == m * layers);
  BOOST_TEST(count(step.program.roles[0], Purpose::PassGather) == layers);
  BOOST_TEST(count(step.program.roles[0], Purpose::GradientReduce) == layers);
  for (const Task& t : step.program.roles[0].tasks)
    if (t.purpose == Purpose::GradientReduce) BOOST_TEST(t.microbatch == m - 1);
  // Less traffic on a slow network: a faster step.
  BOOST_TEST(backward.eval.iteration_time_s < forward.eval.iteration_time_s);
  BOOST_TEST(step.eval.iteration_time_s < backward.eval.iteration_time_s);
}

// after_forward holds at most two gathered units and one unit's gradient; after_backward every unit's
// parameters at the end of the forward; after_step those and every unit's unsharded gradient too.
BOOST_AUTO_TEST_CASE(held_parameters_and_gradients_raise_the_peak_in_order) {
  const Run forward = run(kDataParallel, {}), backward = run(kDataParallel, {"plan.reshard=after_backward"}),
            step = run(kDataParallel, {"plan.reshard=after_step"});
  const double params = forward.program.roles[0].parameters;  // before sharding: 2 bytes each, bf16
  const double a = forward.eval.roles[0].activations_peak.value(),
               b = backward.eval.roles[0].activations_peak.value(),
               c = step.eval.roles[0].activations_peak.value();
  BOOST_TEST_INFO(a << " " << b << " " << c << " params " << params);
  BOOST_TEST(b - a > 0.8 * 2 * params);
  BOOST_TEST(b - a < 1.0 * 2 * params);
  BOOST_TEST(c - b > 0.9 * 2 * params);  // the unsharded gradients, bf16
  BOOST_TEST(c - b < 1.1 * 2 * params);
  // The model state is the same shard in all three.
  BOOST_TEST(forward.program.roles[0].state.total().value() == step.program.roles[0].state.total().value());
}

// Under a pipeline the micro-batches in flight share a unit's gathered parameters: held once per unit
// (not once per micro-batch), and gathered again only after a backward resharded it.
BOOST_AUTO_TEST_CASE(micro_batches_in_flight_share_one_gathered_copy) {
  const Run forward = run(kPipeline, {}), backward = run(kPipeline, {"plan.reshard=after_backward"}),
            step = run(kPipeline, {"plan.reshard=after_step"});
  const int m = 8, chunk_layers = 6;
  const Role& first = backward.program.roles[0];
  const double chunk = first.parameters * 2;  // rank 0's chunk, gathered, bf16 (with the embedding)
  const int gathers = count(first, Purpose::PassGather);
  BOOST_TEST_INFO("after_backward gathers " << gathers);
  BOOST_TEST(gathers < 2 * m * chunk_layers);
  BOOST_TEST(gathers >= m * chunk_layers / 2);
  BOOST_TEST(count(step.program.roles[0], Purpose::PassGather) == chunk_layers);
  const double a = forward.eval.roles[0].activations_peak.value(),
               b = backward.eval.roles[0].activations_peak.value();
  BOOST_TEST_INFO(a << " " << b << " chunk " << chunk);
  BOOST_TEST(b - a < 1.0 * chunk);  // not 4 in-flight micro-batches' worth
  BOOST_TEST(b - a > 0.5 * chunk);
  // Interleaved chunks verify as well.
  run(kPipeline, {"plan.reshard=after_step", "plan.schedule=interleaved", "plan.virtual_stages=2"});
  run(kPipeline, {"plan.reshard=after_backward", "plan.schedule=interleaved", "plan.virtual_stages=2"});
}

// The verifier follows the plan's choice: a Program lowered for after_step, read as after_forward,
// runs its backwards (and every later forward) on layers freed since their gather.
BOOST_AUTO_TEST_CASE(the_program_verifier_checks_each_pass_against_the_reshard_of_its_plan) {
  Run step = run(kDataParallel, {"plan.reshard=after_step"});
  step.program.plan.reshard = Reshard::AfterForward;
  const auto problems = verify(step.program);
  BOOST_REQUIRE(!problems.empty());
  BOOST_TEST(problems.front().find("runs layer 23 without a ZeRO-3 gather of it before") !=
             std::string::npos);
  Run forward = run(kDataParallel, {});
  forward.program.plan.reshard = Reshard::AfterStep;  // the backwards' gathers find their layers held
  const auto twice = verify(forward.program);
  BOOST_REQUIRE(!twice.empty());
  BOOST_TEST(twice.front().find("which is gathered already") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(the_plan_file_keeps_the_choice_and_verify_refuses_it_without_zero_3) {
  const Run step = run(kDataParallel, {"plan.reshard=after_step"});
  const std::string yaml = to_yaml(step.plan);
  BOOST_TEST(yaml.find("\nreshard: after_step\n") != std::string::npos);
  BOOST_TEST(to_yaml(run(kDataParallel, {}).plan).find("reshard: after_forward") != std::string::npos);
  Plan zero1 = step.plan;
  zero1.zero = 1;
  const auto problems = verify(zero1, step.s.model, step.s.cluster, step.s.training);
  BOOST_REQUIRE(problems.size() == 1u);
  BOOST_TEST(problems.front() ==
             "reshard after_step says when ZeRO 3 frees the parameters it gathers, and the plan has zero 1: "
             "use zero 3, or reshard after_forward");
  BOOST_TEST(to_yaml(zero1).find("reshard") == std::string::npos);  // only ZeRO 3 writes it
}

// The search keeps plan.reshard as asked: with zero left to it, a reshard other than after_forward
// fixes zero 3; the pruned search still finds the brute force's best (its bounds hold).
BOOST_AUTO_TEST_CASE(the_search_keeps_the_reshard_asked_and_its_bounds_hold) {
  const std::string small =
      "model: {name: small, layers: 8, hidden: 512, heads: 8, vocab: 4096, seq_len: 512}\n"
      "cluster: {from: a100-pcie-ethernet, nodes: 2}\n"
      "training: {global_batch: 32, seq_len: 512}\n"
      "plan: auto\n";
  for (const char* reshard : {"plan={reshard: after_backward}", "plan={reshard: after_step}"}) {
    BOOST_TEST_CONTEXT(reshard) {
      const ScenarioSpec s = paratwin_test::scenario(small, {reshard});
      for (const Candidate& c : paratwin_test::brute_force_top(s)) {
        BOOST_TEST(c.plan.zero == 3);
        BOOST_TEST((c.plan.reshard == *s.plan.reshard));
      }
    }
  }
}
