// The search's driver: best first by lower bound over the space (search_space.hpp), each candidate's
// bound tightened in steps -- its layout's coarse bound and its variant's (bounds.hpp), the bound of
// its partition (partitioner.hpp, bounds.hpp), the bound through its pass graph (pass_graph.hpp) --
// before it is lowered and evaluated exactly; the search stops when the smallest bound left cannot
// beat the N-th best.
#include "plan/search/optimizer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "plan/analytic/evaluate.hpp"
#include "plan/reliability/expected_goodput.hpp"
#include "plan/search/bounds.hpp"
#include "plan/search/explain.hpp"
#include "plan/search/layer_costs.hpp"
#include "plan/search/objective.hpp"
#include "plan/search/partitioner.hpp"
#include "plan/search/pass_graph.hpp"
#include "plan/search/search_space.hpp"

namespace paratwin {
namespace {

using search::ParallelLayout;
using search::Variant;

class Search {
 public:
  Search(const ScenarioSpec& s, const SearchOptions& o)
      : s_(s),
        o_(o),
        ctx_(s, o.exhaustive),
        costs_(ctx_),
        space_(ctx_, costs_, result_.rejected),
        bounds_(ctx_, costs_),
        graphs_(ctx_, costs_),
        partitioner_(ctx_, costs_),
        failures_(objective_counts_failures(s)) {
    if (failures_) cluster_job_ = job_shape(s, 1, 1);
  }

  SearchResult run() {
    const auto t0 = std::chrono::steady_clock::now();
    space_.enumerate([this](ParallelLayout layout, int microbatches) {
      layouts_.push_back(std::move(layout));
      add_variants(layouts_.size() - 1, microbatches);
    });
    // Best first by bound: a candidate with the coarse bound is refined (partition and its bound) and
    // queued again; then bounded through its pass graph and queued again; then evaluated exactly. Stop
    // when the smallest bound cannot beat the N-th best -- every candidate left has at least that bound.
    std::make_heap(queue_.begin(), queue_.end(), later);
    while (!queue_.empty()) {
      std::pop_heap(queue_.begin(), queue_.end(), later);
      const Entry e = queue_.back();
      queue_.pop_back();
      if (!o_.exhaustive && cutoff() > 0 && e.bound > cutoff()) break;
      if (e.level == Level::Layout) {
        expand(e);
        continue;
      }
      if (e.level == Level::Coarse) {
        refine(e);
        continue;
      }
      if (e.level == Level::Partition) {
        bound_passes(e);
        continue;
      }
      evaluate(e);
      if (o_.progress && !o_.progress(progress(e.bound))) {
        result_.stopped = true;
        break;
      }
    }
    result_.top = best_;
    result_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (best_.empty() && !result_.stopped)
      throw InputError(s_.document.location, nothing_fits(closest_ ? &*closest_ : nullptr));
    if (best_.size() > 1) result_.explanation = explain(best_[0], best_[1], s_.search.objective);
    if (!best_.empty() && fastest_ &&
        fastest_->report.metrics.iteration_time_s <
            best_[0].report.metrics.iteration_time_s * (1 - kTieMargin)) {
      result_.failures_explanation = explain_failures(best_[0], *fastest_, s_.search.objective);
      result_.faster_lost_to_failures = std::move(fastest_);
    }
    return std::move(result_);
  }

 private:
  // How far a candidate's bound has come: valid for every variant of its layout (an entry for all of
  // them), for every partition, following its partition through closed forms (Bounds::partition_bound),
  // through its pass graph (PassGraphBounds::bounds).
  enum class Level { Layout, Coarse, Partition, Graph };
  struct Entry {
    double bound;   // lower bound of the objective
    long sequence;  // enumeration order, for a deterministic order among equal bounds
    size_t layout;  // index into layouts_
    Variant variant;
    Level level = Level::Coarse;
    int partition = -1;  // the Partitioner's index once refined
  };
  // Heap order: the smallest bound on top.
  static bool later(const Entry& x, const Entry& y) {
    return std::tie(x.bound, x.sequence) > std::tie(y.bound, y.sequence);
  }

  int microbatches(const ParallelLayout& layout) const { return ctx_.microbatches(layout.dp, layout.mb); }

  // The bound past which no candidate can enter the top N (0 until N plans are known). A plan ranks
  // before the N-th best only by a better tie class (search::tie_class), or by the same one and more
  // simplicity, which takes an objective within a factor exp(kTieMargin) < 1 + 2 kTieMargin of it.
  double cutoff() const {
    return static_cast<int>(best_.size()) >= o_.top ? best_.back().objective * (1 + 2 * kTieMargin) : 0;
  }

  SearchProgress progress(double front_bound) const {
    return {result_.enumerated, result_.evaluated, front_bound, cutoff()};
  }

  // The layout's candidates are counted here but queued as one entry with the layout's bound, the
  // smallest of theirs: most layouts never reach the front, and a quarter of a million entries in the
  // queue cost more than the bounds. expand() queues them when it does, with the sequence numbers
  // they have here, so they are taken in the same order as if they had been queued now.
  void add_variants(size_t layout_index, int microbatches) {
    ParallelLayout& layout = layouts_[layout_index];
    layout.free_bound = bounds_.time_lower_bound(layout, microbatches);
    layout.scale = objective_scale(layout);
    layout.first_candidate = result_.enumerated + 1;
    bool any_fits = false;
    space_.for_each_variant(layout, [&](const Variant&, bool fits) {
      ++result_.enumerated;
      if (!fits) space_.reject("model states exceed device memory");
      any_fits = any_fits || fits;
    });
    if (any_fits)
      queue_.push_back(
          {layout.free_bound * layout.scale, layout.first_candidate, layout_index, {}, Level::Layout});
  }

  void expand(const Entry& e) {
    const ParallelLayout& layout = layouts_[e.layout];
    const int m = microbatches(layout);
    long sequence = layout.first_candidate;
    search::VariantCosts& costs = bounds_.variant_costs(layout);
    space_.for_each_variant(layout, [&](const Variant& v, bool fits) {
      const long candidate = sequence++;
      if (!fits) return;
      const double bound =
          std::max(layout.free_bound, bounds_.variant_bound(layout, m, v, costs)) * layout.scale;
      queue_.push_back({bound, candidate, e.layout, v});
      std::push_heap(queue_.begin(), queue_.end(), later);
    });
  }

  // The layout's cost tables, integer pipeline bound and time-optimal partition (once), then the
  // candidate's partition -- the time-optimal one when its states fit, else the best that fits -- and
  // the bound that follows that very partition.
  void refine(Entry e) {
    ++result_.refined;
    ParallelLayout& layout = layouts_[e.layout];
    const int m = microbatches(layout);
    if (!layout.refined) {
      layout.refined = true;
      layout.costs = &costs_.table(layout);
      if (s_.cluster.pools.size() == 1 && layout.pp > 1 && layout.schedule != Schedule::Interleaved)
        layout.free_bound = std::max(layout.free_bound, bounds_.pipeline_bound(layout, m));
      layout.time_optimal = partitioner_.time_optimal(layout, m);
      layout.counts = &graphs_.counts(layout, m);
    }
    e.level = Level::Partition;
    e.partition = partitioner_.fitted(layout, e.variant, m);
    if (e.partition < 0) {
      space_.reject("out of memory");
      return;
    }
    const double bound =
        std::max(layout.free_bound,
                 bounds_.partition_bound(layout, e.variant, e.partition, partitioner_.ranges(e.partition)));
    e.bound = std::max(e.bound, bound * layout.scale);
    queue_.push_back(e);
    std::push_heap(queue_.begin(), queue_.end(), later);
  }

  // The candidate's bound through its partition's pass graph and its tails, queued again.
  void bound_passes(Entry e) {
    ParallelLayout& layout = layouts_[e.layout];
    const auto& ranges = partitioner_.ranges(e.partition);
    // Every pass waits for its first unit's gather only where every pass gathers (reshard after_forward).
    const bool zero3 =
        e.variant.zero == 3 && layout.replicas() > 1 && ctx_.reshard() == Reshard::AfterForward;
    const search::PassBounds& passes =
        graphs_.bounds(layout, microbatches(layout), e.partition, ranges, e.variant.order, zero3);
    const auto tails = bounds_.rank_tails(layout, e.variant, ranges);
    double bound = 0;
    for (int r = 0; r < layout.pp; ++r) {
      bound = std::max(bound, passes.last_end[r] + tails.steps[r]);
      if (layout.replicas() > 1)
        bound = std::max(bound, passes.bucket_ready[r] + tails.dp_tails[r] + tails.steps[r]);
      bound = std::max(bound, tails.replica_sums[r] + tails.steps[r]);
    }
    e.level = Level::Graph;
    e.bound = std::max(e.bound, bound * layout.scale);
    queue_.push_back(e);
    std::push_heap(queue_.begin(), queue_.end(), later);
  }

  // objective_per_second for a layout; under failures divided by the most goodput its shape allows
  // (any checkpoint cost), so the bounds stay below every variant's objective.
  double objective_scale(const ParallelLayout& layout) const {
    std::vector<const PoolSpec*> pools;
    for (int pool : layout.rank_pool) pools.push_back(&s_.cluster.pools[pool]);
    const double scale =
        objective_per_second(s_, pools, static_cast<long long>(layout.dp) * layout.tp * layout.cp);
    if (!failures_) return scale;
    const double most = goodput_upper_bound(s_, layout_job(layout.dp, layout.tp * layout.pp * layout.cp));
    return most > 0 ? scale / most : std::numeric_limits<double>::infinity();
  }

  JobShape layout_job(int dp, int replica_gpus) const {
    JobShape job = cluster_job_;
    job.dp = dp;
    job.replica_gpus = replica_gpus;
    return job;
  }

  // The candidate's expected goodput under the scenario's failures (nothing without them).
  std::optional<ExpectedGoodput> candidate_goodput(const Plan& plan, const Program& program) const {
    if (!failures_) return std::nullopt;
    JobShape job = layout_job(plan.dp, plan.tp * plan.pp * plan.cp);
    job.checkpoint_cost_s = checkpoint_cost_s(program, s_.cluster);
    return expected_goodput(s_, job);
  }

  // The plan of a candidate: its layout, variant and partition, and the fields the scenario fixes.
  Plan candidate_plan(const Entry& e) const {
    const ParallelLayout& layout = layouts_[e.layout];
    const PlanRequest& req = s_.plan;
    Plan plan = layout.degrees(ctx_.orders[e.variant.order]);
    plan.micro_batch = layout.mb;
    plan.num_microbatches = microbatches(layout);
    plan.schedule = layout.schedule;
    plan.virtual_stages = layout.v;
    plan.sequence_parallel = layout.sp;
    plan.zero = e.variant.zero;
    if (plan.zero == 3) plan.reshard = ctx_.reshard();
    plan.dp_replicate = plan.zero == 3 ? layout.replicate : 1;  // HSDP is ZeRO 3's
    plan.offload_optimizer = e.variant.offload;
    if (req.offload_activations) plan.offload_activations = *req.offload_activations;
    if (req.compression)
      plan.compression = *req.compression;
    else if (e.variant.topk)
      plan.compression = {CompressionKind::TopK, search::kSearchedTopkRatio, true, 0};
    if (req.bucket_size) plan.bucket_size = *req.bucket_size;
    plan.overlap_dp = req.overlap_dp.value_or(true);
    plan.overlap_tp = req.overlap_tp.value_or(false);
    plan.overlap_pp = req.overlap_pp.value_or(true);
    plan.overlap_param_gather = req.overlap_param_gather.value_or(false);
    plan.overlap_ep = layout.overlap_ep;
    plan.checkpoint_interval = s_.checkpoint.interval;
    const auto& ranges = partitioner_.ranges(e.partition);
    for (int c = 0; c < plan.chunks(); ++c)
      plan.stages.push_back(
          {ranges[c].first, ranges[c].second, s_.cluster.pools[layout.rank_pool[c % layout.pp]].name,
           layout.recompute, layout.recompute == Recompute::None ? 1 : req.recompute_every.value_or(1),
           layout.recompute == Recompute::Selective ? req.recompute_modules.value_or(RecomputeModules{})
                                                    : RecomputeModules{}});
    return plan;
  }

  void evaluate(const Entry& e) {
    if (dominated(e)) return;
    const ParallelLayout& layout = layouts_[e.layout];
    const Plan plan = candidate_plan(e);
    if (auto problems = verify(plan, s_.model, s_.cluster, s_.training); !problems.empty()) {
      space_.reject(problems.front());
      return;
    }
    ++result_.evaluated;
    // Without task names: nothing here reads them (the report neither).
    const Program program = lower(plan, s_.model, s_.cluster, s_.training, {.task_names = false});
    auto timings = schedule_tasks(program, s_.cluster, s_.training);
    double end = 0;
    for (const auto& role_timings : timings)
      for (const TaskTiming& t : role_timings) end = std::max(end, t.end_s);
    const std::optional<ExpectedGoodput> goodput = candidate_goodput(plan, program);
    const double objective = objective_value(s_, plan, end, goodput ? goodput->goodput : 1);
    // The brute force (tests) checks every bound against the exact figure it bounds.
    if (o_.exhaustive && objective < e.bound * (1 - 1e-12))
      throw std::logic_error("search: the lower bound of a plan (" + std::to_string(e.bound) +
                             ") is above its evaluated objective (" + std::to_string(objective) + "):\n" +
                             to_yaml(plan));
    // Under failures the fastest plan per iteration is kept, to say why it lost, whatever its rank.
    const bool may_be_fastest = failures_ && (!fastest_ || end < fastest_->report.metrics.iteration_time_s);
    // Most candidates cannot enter the top list: their time and memory come from the schedule alone,
    // and only the others are summarized into a report (the same figures, by the same functions).
    if (!best_.empty()) {
      // Past the cutoff the candidate ranks after the N-th best (see cutoff()), and so do its twins
      // (no faster, and the cutoff only falls): whether it fits does not matter.
      if (cutoff() > 0 && objective > cutoff()) {
        cannot_win_.insert(twin_key(e, e.variant));
        if (!may_be_fastest) return;
      }
      bool fits = true;
      for (size_t r = 0; r < program.roles.size(); ++r) {
        const Role& role = program.roles[r];
        const PoolSpec& pool = s_.cluster.pools[layout.rank_pool[r]];
        fits = fits &&
               peak_memory(role, activations_peak(role, timings[r])) <= s_.cluster.device_of(pool).memory;
      }
      // Out of memory: with a plan in the list, the closest miss is never reported.
      if (!fits) {
        space_.reject("out of memory");
        return;
      }
    }
    const Evaluation ev = summarize_timings(program, s_.cluster, s_.training, std::move(timings));
    Report report = make_report(s_.name, program, ev);
    report.goodput = goodput;
    if (!report.metrics.fits) {
      space_.reject("out of memory");
      const double ratio = report.metrics.peak_memory_gib / report.metrics.memory_capacity_gib;
      if (!closest_ || ratio < closest_ratio_) closest_ = report, closest_ratio_ = ratio;
      return;
    }
    if (may_be_fastest) fastest_ = Candidate{plan, report, objective};
    cannot_win_.insert(twin_key(e, e.variant));
    Candidate cand{plan, std::move(report), 0};
    cand.objective = objective_value(s_, plan, cand.report);
    best_.push_back(std::move(cand));
    std::stable_sort(best_.begin(), best_.end(), [](auto& x, auto& y) { return ranking(x) < ranking(y); });
    if (static_cast<int>(best_.size()) > o_.top) best_.pop_back();
  }

  using TwinKey = std::tuple<size_t, int, bool, bool, int, int>;
  static TwinKey twin_key(const Entry& e, const Variant& v) {
    return {e.layout, v.zero, v.offload, v.topk, v.order, e.partition};
  }

  // A candidate whose simpler twin on the same partition was evaluated and fits cannot beat it (nor
  // can it enter the top list when that twin's time was past the cutoff): with
  // offload its Program has the twin's tasks plus copies the step waits for (list scheduling only gets
  // later when tasks are added), a tie that the simpler plan wins. The twin's bound is never above this
  // one's, so it came first.
  bool dominated(const Entry& e) {
    if (o_.exhaustive) return false;
    const Variant& v = e.variant;
    const bool by_offload = v.offload && cannot_win_.count(twin_key(e, {v.zero, false, v.topk, v.order}));
    if (!by_offload) return false;
    ++result_.dominated;
    return true;
  }

  // Ties (the same tie class) go to the simpler plan: no compression, no offload, ZeRO-1 before 0, 2
  // and 3 (HSDP after plain ZeRO 3), the default rank order.
  static std::tuple<double, double, double> ranking(const Candidate& c) {
    const Plan& p = c.plan;
    const double zero_cost[] = {0.5, 0, 1, 2};
    const double complexity = (p.compression.kind == CompressionKind::TopK ? 4 : 0) +
                              (p.offload_optimizer ? 3 : 0) + zero_cost[p.zero] +
                              (p.dp_replicate > 1 ? 0.25 : 0) + (p.order == Plan().order ? 0 : 0.5);
    return {tie_class(c.objective), complexity, c.objective};
  }

  const ScenarioSpec& s_;
  const SearchOptions o_;
  SearchResult result_;  // before space_, which counts rejections into it
  const search::SearchContext ctx_;
  search::LayerCosts costs_;
  search::SearchSpace space_;
  search::Bounds bounds_;
  search::PassGraphBounds graphs_;
  search::Partitioner partitioner_;
  std::deque<ParallelLayout> layouts_;  // a deque: a layout is large, and never moved once made
  std::vector<Entry> queue_;
  std::vector<Candidate> best_;
  // Candidates evaluated that fit, or whose time is past the cutoff: their twins cannot win.
  std::set<TwinKey> cannot_win_;
  std::optional<Report> closest_;
  double closest_ratio_ = 0;
  const bool failures_;               // objective_counts_failures
  JobShape cluster_job_;              // the job's shape on the cluster, its replicas aside (under failures)
  std::optional<Candidate> fastest_;  // per iteration, among those evaluated that fit (under failures)
};

}  // namespace

SearchResult search_plans(const ScenarioSpec& scenario, const SearchOptions& options) {
  // The partitioner's layer costs do not depend on where a stage begins, which decides the layers
  // that block recompute picks.
  if (scenario.plan.recompute_layers) {
    const auto it = scenario.locations.find("plan.recompute_layers");
    throw InputError(it != scenario.locations.end() ? it->second : scenario.document.location,
                     "plan.recompute_layers (each stage's first layers, Megatron-LM's block recompute) is "
                     "for a given plan; the optimizer does not search it: give plan.tp, plan.pp and "
                     "plan.micro_batch, or search with plan.recompute_every");
  }
  if (scenario.plan.overlap_ep.value_or(false) && !scenario.model.moe) {
    const auto it = scenario.locations.find("plan.overlap.ep");
    throw InputError(it != scenario.locations.end() ? it->second : scenario.document.location,
                     "plan.overlap.ep (combined 1F1B) overlaps the EP all-to-alls of a mixture-of-experts "
                     "model, and " +
                         scenario.model.name + " has no moe: leave overlap.ep out");
  }
  // ZeRO 3 asked, or its reshard or HSDP (which fix it): the search has no plan to give.
  const PlanRequest& req = scenario.plan;
  if (req.overlap_ep.value_or(false) && (req.zero == 3 || req.reshard || req.dp_replicate.value_or(1) > 1)) {
    const auto it = scenario.locations.find("plan.overlap.ep");
    throw InputError(it != scenario.locations.end() ? it->second : scenario.document.location,
                     "plan.overlap.ep (combined 1F1B) runs with ZeRO 0-2, and the plan asks ZeRO 3 (zero 3, "
                     "reshard or dp_replicate): leave one of them out");
  }
  return Search(scenario, options).run();
}

}  // namespace paratwin
