// Several jobs on one cluster: the alone and together simulations, each in a child process, and the
// report assembled from them.
#include "sim/jobs.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>

#include "plan/spec/limits.hpp"
#include "plan/util/child_process.hpp"
#include "sim/interpreter.hpp"

namespace paratwin::sim {
namespace {

// A job whose iterations are this many times shorter than the slowest job's runs at most this many
// times the iterations, so that a tiny job beside a huge one stays a small simulation.
constexpr int kMostIterationsPerSlowest = 50;

struct PreparedJob {
  Program program;
  const TrainingSpec* training;
  std::unique_ptr<RankLayout> layout;
};

std::vector<PreparedJob> prepare(const JobsScenario& s, const std::vector<Plan>& plans) {
  std::vector<PreparedJob> out;
  for (size_t j = 0; j < s.jobs.size(); ++j) {
    const ScenarioSpec& job = s.jobs[j].scenario;
    out.push_back({lower(plans[j], job.model, job.cluster, job.training), &job.training,
                   std::make_unique<RankLayout>(plans[j], s.cluster, s.jobs[j].placement.first_node)});
  }
  return out;
}

nlohmann::json to_json(const JobsInterpretation& in) {
  nlohmann::json jobs = nlohmann::json::array(), links = nlohmann::json::array();
  for (const Interpretation& j : in.jobs)
    jobs.push_back({{"ends", j.iteration_end_s}, {"activities", j.activities}});
  for (const LinkBytes& l : in.links)
    links.push_back({{"link", l.link}, {"capacity", l.capacity_Bps}, {"bytes", l.bytes}});
  return {{"jobs", jobs}, {"links", links}};
}

// Simulates the jobs `which` (indices into `prepared`) together, each for its iterations, in a child.
JobsInterpretation run_in_child(const std::vector<PreparedJob>& prepared, const std::vector<size_t>& which,
                                const std::vector<int>& iterations, const ClusterSpec& cluster) {
  const auto [text, status] = run_forked([&]() -> std::pair<std::string, int> {
    try {
      std::vector<JobProgram> jobs;
      for (size_t k = 0; k < which.size(); ++k) {
        const PreparedJob& p = prepared[which[k]];
        jobs.push_back({&p.program, p.training, p.layout.get(), iterations[k]});
      }
      return {to_json(interpret_jobs(jobs, cluster)).dump(), 0};
    } catch (const std::exception& e) {
      return {nlohmann::json{{"error", e.what()}}.dump(), 1};
    }
  });
  const nlohmann::json j = nlohmann::json::parse(text.empty() ? "{}" : text, nullptr, false);
  if (j.is_object() && j.contains("error"))
    throw std::runtime_error("simulation failed: " + j["error"].get<std::string>());
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !j.is_object() || !j.contains("jobs"))
    throw std::runtime_error("the simulation process ended abnormally (status " + std::to_string(status) +
                             ")");
  JobsInterpretation in;
  for (const auto& job : j["jobs"]) {
    Interpretation i;
    i.iteration_end_s = job.at("ends").get<std::vector<double>>();
    i.activities = job.at("activities").get<long long>();
    in.jobs.push_back(std::move(i));
  }
  for (const auto& l : j["links"])
    in.links.push_back({l.at("link").get<std::string>(), l.at("capacity").get<double>(),
                        l.at("bytes").get<std::vector<double>>()});
  return in;
}

double mean_iteration_s(const Interpretation& in) {
  return in.iteration_end_s.empty() ? 0 : in.iteration_end_s.back() / double(in.iteration_end_s.size());
}

// The runs' work before any is done, as simulate() estimates it (about two activities per task).
void check_size(const JobsScenario& s, const std::vector<PreparedJob>& prepared,
                const std::vector<int>& iterations) {
  std::int64_t activities = 0;
  for (size_t j = 0; j < prepared.size(); ++j) {
    const Program& p = prepared[j].program;
    activities += 2 * std::int64_t(p.task_count()) / std::max(1, p.plan.pp) * p.world * iterations[j];
  }
  if (activities > limit_value(kSimActivitiesLimit))
    throw InputError(Location{s.file.empty() ? "<scenario>" : s.file},
                     "the jobs' simulation would run about " + std::to_string(activities) +
                         " activities (every rank of every job is simulated); fewer --iterations, fewer "
                         "micro-batches per step or smaller jobs bring it under" +
                         limit_note(kSimActivitiesLimit));
}

}  // namespace

JobsSimulation simulate_jobs(const JobsScenario& s, const std::vector<Plan>& plans,
                             const JobsSimulateOptions& options) {
  const std::vector<PreparedJob> prepared = prepare(s, plans);
  const int n = std::max(1, options.iterations);
  check_size(s, prepared, std::vector<int>(prepared.size(), n));
  JobsSimulation out;
  // Alone: each job on its own nodes of the same platform, nothing else running.
  for (size_t j = 0; j < prepared.size(); ++j) {
    const JobsInterpretation alone = run_in_child(prepared, {j}, {n}, s.cluster);
    JobOutcome o;
    o.name = s.jobs[j].name;
    o.alone_s = mean_iteration_s(alone.jobs.front());
    o.tokens_per_iteration = prepared[j].program.tokens_per_iteration;
    o.gpus = prepared[j].program.world;
    out.activities += alone.jobs.front().activities;
    out.jobs.push_back(o);
  }
  // Together: a faster job runs more iterations, so that it competes for the whole of the slowest one's.
  double slowest = 0;
  for (const JobOutcome& o : out.jobs) slowest = std::max(slowest, o.alone_s);
  std::vector<size_t> all;
  std::vector<int> iterations;
  for (size_t j = 0; j < out.jobs.size(); ++j) {
    all.push_back(j);
    const double ratio = out.jobs[j].alone_s > 0 ? slowest / out.jobs[j].alone_s : 1.0;
    iterations.push_back(std::clamp(int(std::lround(n * ratio)), n, n * kMostIterationsPerSlowest));
  }
  check_size(s, prepared, iterations);
  const JobsInterpretation together = run_in_child(prepared, all, iterations, s.cluster);
  for (size_t j = 0; j < out.jobs.size(); ++j) {
    out.jobs[j].together_s = mean_iteration_s(together.jobs[j]);
    out.jobs[j].iterations_together = iterations[j];
    out.activities += together.jobs[j].activities;
  }
  for (LinkBytes l : together.links) {
    for (size_t j = 0; j < l.bytes.size(); ++j) l.bytes[j] /= iterations[j];  // per iteration of each job
    if (std::count_if(l.bytes.begin(), l.bytes.end(), [](double b) { return b > 0; }) > 1)
      out.shared_links.push_back(l);
  }

  nlohmann::json jobs = nlohmann::json::array(), links = nlohmann::json::array();
  for (size_t j = 0; j < out.jobs.size(); ++j) {
    const JobOutcome& o = out.jobs[j];
    jobs.push_back(
        {{"name", o.name},
         {"gpus", o.gpus},
         {"plan", {{"dp", plans[j].dp}, {"tp", plans[j].tp}, {"pp", plans[j].pp}, {"cp", plans[j].cp}}},
         {"iteration_time_alone_s", o.alone_s},
         {"iteration_time_together_s", o.together_s},
         {"slowdown", o.slowdown()},
         {"tokens_per_s_together", o.together_s > 0 ? o.tokens_per_iteration / o.together_s : 0.0},
         {"iterations_together", o.iterations_together}});
  }
  for (const LinkBytes& l : out.shared_links) {
    nlohmann::json by_job = nlohmann::json::object();
    for (size_t j = 0; j < l.bytes.size(); ++j)
      if (l.bytes[j] > 0) by_job[out.jobs[j].name] = l.bytes[j];
    links.push_back({{"link", l.link}, {"capacity_GBps", l.capacity_Bps / 1e9}, {"bytes", by_job}});
  }
  out.json = {{"scenario", s.name},
              {"evaluator", "simulation"},
              {"jobs", jobs},
              {"shared_links", links},
              {"simulation", {{"iterations", n}, {"activities", out.activities}, {"folded", false}}}};
  return out;
}

std::string to_text(const JobsSimulation& sim) {
  char buf[256];
  std::string out = "  job                  alone        together     slowdown\n";
  for (const JobOutcome& o : sim.jobs) {
    std::snprintf(buf, sizeof buf, "  %-20s %-12s %-12s %+.2f%%\n", o.name.c_str(),
                  to_string(Seconds(o.alone_s)).c_str(), to_string(Seconds(o.together_s)).c_str(),
                  100 * (o.slowdown() - 1));
    out += buf;
  }
  if (sim.shared_links.empty()) {
    out += "  no link carries more than one job's traffic\n";
    return out;
  }
  out += "  links where jobs meet (each job's bytes per iteration, both directions):\n";
  for (const LinkBytes& l : sim.shared_links) {
    std::snprintf(buf, sizeof buf, "    %-24s %8.1f GB/s:", l.link.c_str(), l.capacity_Bps / 1e9);
    out += buf;
    for (size_t j = 0; j < l.bytes.size(); ++j)
      if (l.bytes[j] > 0) {
        std::snprintf(buf, sizeof buf, "  %s %.2f GB", sim.jobs[j].name.c_str(), l.bytes[j] / 1e9);
        out += buf;
      }
    out += "\n";
  }
  return out;
}

}  // namespace paratwin::sim
