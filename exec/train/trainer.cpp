// The live CPU trainer: the session's hooks over the ParallelRunner (see trainer.hpp).
#include "exec/train/trainer.hpp"

#include <utility>

#include "exec/memory/memory_meter.hpp"
#include "exec/train/parallel_runner.hpp"

namespace paratwin::exec {

Trainer::Trainer(const ScenarioSpec& scenario, const Plan& plan, Communicator& comm, TrainOptions options)
    : TrainingSession(scenario, plan, comm, std::move(options), LiveBackend::Cpu),
      model_(gpt_config(scenario.model)) {
  // The whole model, initialized as on one rank, of which the runner takes this rank's shard.
  model_.initialize(this->options().seed);
  runner_ = std::make_unique<ParallelRunner>(
      ParallelSetup{this->scenario(), this->plan(), program(), world(), data(), lr(), this->options().adamw,
                    this->options().max_grad_norm},
      model_);
  // The runner's shard is this rank's model: the whole one's buffers would only weigh on its memory.
  Buffer<float>().swap(model_.parameters());
  Buffer<float>().swap(model_.gradients());
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
  // Where one rank holds the whole model, the trained model, whole, on every rank.
  const Plan& p = plan();
  if (p.tp * p.pp * p.cp * p.ep == 1) {
    const Buffer<float>& shard = runner_->shard_weights();
    MemoryUseScope use(MemoryUse::Parameters);
    model_.parameters().assign(model_.layout().total, 0.0f);
    runner_->model().put_shard(shard.data(), model_.parameters().data());
  }
}

}  // namespace paratwin::exec
