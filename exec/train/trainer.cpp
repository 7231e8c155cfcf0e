// The live CPU trainer: the session's hooks over the ParallelRunner (see trainer.hpp).
#include "exec/train/trainer.hpp"

#include <stdexcept>
#include <utility>

#include "exec/memory/memory_meter.hpp"
#include "exec/train/parallel_runner.hpp"

namespace paratwin::exec {

Trainer::Trainer(const ScenarioSpec& scenario, const Plan& plan, Communicator& comm, TrainOptions options)
    : TrainingSession(scenario, plan, comm, std::move(options), LiveBackend::Cpu) {
  // This rank's shard only, initialized as the whole model would be there (no whole copy is made).
  runner_ = std::make_unique<ParallelRunner>(
      ParallelSetup{this->scenario(), this->plan(), program(), world(), data(), lr(), this->options().adamw,
                    this->options().max_grad_norm, this->options().seed},
      gpt_config(scenario.model));
  timing_group_ = world().split(runner_->coordinates().pp == 0 ? 0 : -1);
}

Trainer::~Trainer() = default;

const Role& Trainer::role() const {
  return program().roles.at(size_t(runner_->coordinates().pp));
}

StepRunner& Trainer::steps() {
  return *runner_;
}

void Trainer::gather_state(std::vector<float>& weights, std::vector<float>& m, std::vector<float>& v) {
  runner_->gather_state(weights, m, v);
}

void Trainer::scatter_state(const TrainingState& s) {
  runner_->scatter_state(s.weights, s.adam_m, s.adam_v);
}

void Trainer::after_iteration(std::vector<TaskSpan>& spans) {
  runner_->attribute_tp_time(spans);
}

void Trainer::steps_starting() {
  reset_memory_peak();  // what the steps hold, not the set-up's temporaries
}

void Trainer::steps_ended(RunResult& result) {
  result.memory = read_memory();
  // Where one rank holds the whole model, its shard is the trained model (under ZeRO 3, gathered whole
  // again on every rank).
  const Plan& p = plan();
  if (p.tp * p.pp * p.cp * p.ep == 1) runner_->shard_weights();
}

const Buffer<float>& Trainer::weights() const {
  static const Buffer<float> none;
  const Plan& p = plan();
  if (p.tp * p.pp * p.cp * p.ep != 1) return none;
  // One rank's shard of the whole model is laid out as the whole model is.
  for (const ShardTensor& t : runner_->model().tensors())
    if (t.offset != t.full_offset || t.cols != t.full_cols)
      throw std::logic_error("the shard of " + t.name + " is not laid out as the whole model");
  return runner_->model().parameters();
}

}  // namespace paratwin::exec
