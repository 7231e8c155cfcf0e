// A live training run on this rank on the CPU: the training session (exec/train/session.hpp) with this
// rank's shard of the GPT, run by the ParallelRunner (exec/train/parallel_runner.hpp) whatever the
// plan's degrees: data parallelism alone is its tp = pp = cp = 1 case, where the shard is the whole
// model. Tasks run step after step: forward and backward, DP gradient buckets reduced while the
// backward goes on, the AdamW step; with checkpoints, resume and per-task timings.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "exec/comm/communicator.hpp"
#include "exec/gpt/model.hpp"
#include "exec/train/session.hpp"

namespace paratwin::exec {

class ParallelRunner;

class Trainer final : public TrainingSession {
 public:
  // comm.size() must be the plan's dp x tp x pp x cp. Throws std::invalid_argument (every problem,
  // live_cpu_limitations() among them) when the plan cannot run, and when the corpus cannot feed the
  // model.
  Trainer(const ScenarioSpec& scenario, const Plan& plan, Communicator& comm, TrainOptions options);
  ~Trainer() override;

  const Role& role() const override;
  Communicator* timing_group() const override { return timing_group_.get(); }
  std::string devices() const override { return "CPU ranks"; }
  // The whole model's weights as trained, laid out as parameter_layout() (tp = pp = cp = ep = 1: after
  // run(), every rank holds them). Under tp, pp, cp or ep the shards hold the weights and this is empty.
  const Buffer<float>& weights() const;

 private:
  StepRunner& steps() override;
  void gather_state(std::vector<float>& weights, std::vector<float>& m, std::vector<float>& v) override;
  void scatter_state(const TrainingState& state) override;
  void after_iteration(std::vector<TaskSpan>& spans) override;
  void steps_starting() override;
  void steps_ended(RunResult& result) override;

  std::unique_ptr<ParallelRunner> runner_;
  std::unique_ptr<Communicator> timing_group_;
};

}  // namespace paratwin::exec
