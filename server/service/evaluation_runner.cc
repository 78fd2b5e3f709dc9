#include "server/service/evaluation_runner.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/ope/estimators.h"
#include "core/ope/evaluator.h"
#include "core/ope/sparse_direct_model.h"
#include "core/vw/cb_learner.h"
#include "core/vw/options.h"
#include "server/env/log.h"
#include "server/instance/named_inputs.h"

namespace bandit::server {
namespace {

namespace v1 = bandit::v1;

constexpr int64_t kMinute = 60'000;
constexpr int64_t kMaxWindows = 64;

// One evaluated policy: its estimators over the whole span and per window.
struct Accumulated {
  explicit Accumulated(int64_t window) : window_ms(window) {}
  void Add(int64_t decided_at_ms, double target_logged, double propensity, double reward) {
    total.AddTerms(target_logged, propensity, reward, 0, 0);
    windows.try_emplace(WindowStart(decided_at_ms)).first->second.AddTerms(
        target_logged, propensity, reward, 0, 0);
  }
  int64_t WindowStart(int64_t t) const { return t - (((t % window_ms) + window_ms) % window_ms); }
  int64_t window_ms;
  ope::Estimators total;
  std::map<int64_t, ope::Estimators> windows;
};

void Summarize(const ope::Estimators& e, int64_t start_ms, int64_t window_ms,
               v1::EvaluationSummary* out) {
  const double n = static_cast<double>(e.events());
  out->set_start_ms(start_ms);
  out->set_window_ms(window_ms);
  out->set_events(e.events());
  out->set_ips_numerator(e.ips_numerator());
  out->set_ips_denominator(n);
  out->set_snips_denominator(e.weight_sum());
  out->set_average_reward(n > 0 ? e.ips_numerator() / n : 0.0);
  out->set_sum_of_squares(e.ips_sum_of_squares());
  // The 95% normal interval's half width of the IPS estimate (estimators.h: se over the events).
  out->set_confidence_interval(n > 1 ? 1.96 * e.Ips().se : 0.0);
  out->set_non_zero_probability(n > 0 ? static_cast<double>(e.nonzero()) / n : 0.0);
}

void AddResult(const std::string& name, const std::string& arguments, v1::PolicySource source,
               const ope::Estimators& total, const std::map<int64_t, ope::Estimators>& windows,
               const v1::Evaluation& e, v1::Evaluation* out) {
  auto* r = out->add_results();
  r->set_name(name);
  r->set_arguments(arguments);
  r->set_source(source);
  for (const auto& [start, w] : windows) Summarize(w, start, e.window_ms(), r->add_summary());
  Summarize(total, e.start_ms(), e.end_ms() - e.start_ms(), r->mutable_total());
}

// The instance's policy as its arguments read (vw), or its kind.
std::string OnlineArguments(const v1::InstanceConfig& config) {
  if (config.policy().has_vw()) return config.policy().vw().arguments();
  return std::string(v1::PolicyConfig::descriptor()
                         ->FindFieldByNumber(config.policy().policy_case())
                         ->name());
}

}  // namespace

int64_t EvaluationWindowMs(int64_t start_ms, int64_t end_ms) {
  const int64_t span = std::max<int64_t>(1, end_ms - start_ms);
  for (const int64_t w : {5 * kMinute, 15 * kMinute, 60 * kMinute, 360 * kMinute, 1440 * kMinute})
    if ((span + w - 1) / w <= kMaxWindows) return w;
  return 7 * 1440 * kMinute;
}

std::string IsoDuration(int64_t ms) {
  const int64_t minutes = ms / kMinute;
  if (minutes > 0 && minutes % 1440 == 0) return absl::StrCat("P", minutes / 1440, "D");
  if (minutes > 0 && minutes % 60 == 0) return absl::StrCat("PT", minutes / 60, "H");
  if (minutes > 0 && ms % kMinute == 0) return absl::StrCat("PT", minutes, "M");
  return absl::StrCat("PT", static_cast<double>(ms) / 1000.0, "S");
}

int64_t EvaluationJobBytes(const v1::Evaluation& e) {
  int64_t bytes = 2 * DecisionService::kDecisionLogChunkBytes;
  for (const auto& p : e.policies()) {
    v1::PolicyConfig policy;
    policy.mutable_vw()->set_arguments(p.arguments());
    auto options = vw::ParseVwArguments(p.arguments());
    if (!options.ok()) continue;
    bytes += vw::Footprint(policy) +
             ope::SparseDirectModel::MaxStateBytes(int64_t{1} << options->space.bits);
  }
  return bytes;
}

absl::StatusOr<v1::Evaluation> RunEvaluation(v1::Evaluation e, const v1::InstanceConfig& online,
                                             const DecisionChunks& next,
                                             const std::atomic<bool>& cancelled) {
  e.set_window_ms(EvaluationWindowMs(e.start_ms(), e.end_ms()));
  e.clear_results();
  e.clear_warnings();
  e.clear_error();
  Accumulated logged(e.window_ms()), baseline(e.window_ms()), uniform(e.window_ms());
  // Each custom policy on its own evaluator: its arguments may hash into another space.
  std::vector<std::unique_ptr<ope::Evaluator>> custom;
  for (const auto& p : e.policies()) {
    v1::InstanceConfig config;
    config.mutable_policy()->mutable_vw()->set_arguments(p.arguments());
    config.set_seed(online.seed() == 0 ? 1 : online.seed());
    if (auto s = FeatureSpaceFromVwArguments(&config); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat("policy '", p.name(), "': ", s.message()));
    ope::EvaluateOptions options;
    options.window_ms = e.window_ms();
    // The vw learner takes sparse vectors at any size; so does the direct model then (a
    // diagonal one: the summaries are IPS's, and a dense ridge over 2^b coordinates would cost
    // O(4^b) per event).
    options.max_dense_dimension = 1;
    auto evaluator = ope::Evaluator::Create({{p.name(), config}}, options);
    if (!evaluator.ok())
      return absl::InvalidArgumentError(
          absl::StrCat("policy '", p.name(), "': ", evaluator.status().message()));
    custom.push_back(*std::move(evaluator));
  }
  int64_t events = 0, skipped = 0, certain = 0;
  // A multi-slot decision's entries go to the evaluators together.
  ope::DecisionGroups groups([&](std::span<const v1::LoggedDecision> slots, int count) {
    for (size_t c = 0; c < custom.size(); ++c)
      if (auto s = custom[c]->AddDecision(slots, slots.front().event_id(), count); !s.ok())
        return absl::InvalidArgumentError(absl::StrCat(
            "policy '", e.policies(static_cast<int>(c)).name(), "': ", s.message()));
    return absl::OkStatus();
  });
  std::string failure;
  bool done = false;
  v1::DecisionLogChunk chunk;
  while (!done) {
    if (cancelled.load()) return absl::CancelledError("the evaluation was deleted");
    if (auto s = next(&chunk, &done); !s.ok()) return s;
    for (auto& d : *chunk.mutable_decisions()) {
      if (!d.has_propensity() || !(d.propensity() > 0) || d.propensity() > 1 ||
          !std::isfinite(d.reward()) || d.num_actions() <= 0) {
        ++skipped;
        continue;
      }
      const bool rewarded =
          d.outcome() == v1::OUTCOME_REWARDED || d.outcome() == v1::OUTCOME_EXPIRED_DEFAULT;
      // The evaluators see every slot of a decision (its featurization depends on how many it
      // had) and skip those without a reward themselves.
      if (!custom.empty() && failure.empty())
        if (auto s = groups.Add(d); !s.ok())
          failure = std::string(s.message());
      if (!rewarded) {
        ++skipped;
        continue;
      }
      ++events;
      const double p = d.propensity(), r = d.reward();
      certain += p == 1.0;
      const int chosen = d.chosen_index();
      int baseline_action = d.baseline_index();
      if (baseline_action < 0) baseline_action = d.slot_actions_size() > 0 ? d.slot_actions(0) : 0;
      const int offered = d.slot_actions_size() > 0 ? d.slot_actions_size() : d.num_actions();
      logged.Add(d.decided_at_ms(), p, p, r);
      baseline.Add(d.decided_at_ms(), chosen == baseline_action ? 1.0 : 0.0, p, r);
      uniform.Add(d.decided_at_ms(), 1.0 / offered, p, r);
    }
  }
  if (failure.empty())
    if (auto s = groups.Finish(); !s.ok()) failure = std::string(s.message());
  e.set_events(events);
  e.set_skipped(skipped);
  if (!failure.empty()) {
    e.set_status(v1::EVALUATION_FAILED);
    e.set_error(failure);
    return e;
  }
  AddResult("Online", OnlineArguments(online), v1::POLICY_SOURCE_ONLINE, logged.total,
            logged.windows, e, &e);
  AddResult("Baseline", "", v1::POLICY_SOURCE_BASELINE, baseline.total, baseline.windows, e, &e);
  AddResult("Random", "", v1::POLICY_SOURCE_RANDOM, uniform.total, uniform.windows, e, &e);
  for (size_t c = 0; c < custom.size(); ++c) {
    const auto& result = custom[c]->results().front();
    const auto& p = e.policies(static_cast<int>(c));
    AddResult(p.name(), p.arguments(), v1::POLICY_SOURCE_CUSTOM, result.estimators,
              result.windows, e, &e);
  }
  if (events == 0)
    e.add_warnings(
        "no decision in the span has its reward yet (or a default reward on expiry): every "
        "estimate is empty");
  else if (certain == events)
    e.add_warnings(
        "every decision in the span was logged with probability 1 (the online policy did not "
        "explore): only policies that choose as it chose can be estimated; a policy's "
        "non_zero_probability is the share of the events its estimate sees");
  e.set_status(v1::EVALUATION_COMPLETED);
  return e;
}

EvaluationRunner::EvaluationRunner(DecisionService* service, int threads) : service_(service) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { Loop(); });
}

EvaluationRunner::~EvaluationRunner() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    for (auto& [key, flag] : jobs_) flag->store(true);
    queue_.clear();
  }
  for (auto& t : threads_) t.join();
}

DecisionService::EvaluationJobs EvaluationRunner::Jobs() {
  DecisionService::EvaluationJobs jobs;
  jobs.start = [this](const std::string& instance, const std::string& id, bool restarted) {
    Start(instance, id, restarted);
  };
  jobs.cancel = [this](const std::string& instance, const std::string& id) {
    Cancel(instance, id);
  };
  return jobs;
}

void EvaluationRunner::Start(const std::string& instance, const std::string& id,
                             bool restarted) {
  absl::MutexLock lock(&mu_);
  if (stop_) return;
  auto flag = std::make_shared<std::atomic<bool>>(false);
  if (!jobs_.try_emplace({instance, id}, flag).second) return;  // already waiting or running
  queue_.push_back({instance, id, restarted, std::move(flag)});
}

void EvaluationRunner::Cancel(const std::string& instance, const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find({instance, id});
  if (it == jobs_.end()) return;
  it->second->store(true);
  queue_.erase(std::remove_if(queue_.begin(), queue_.end(),
                              [&](const Job& j) { return j.instance == instance && j.id == id; }),
               queue_.end());
  if (!it->second.unique()) return;  // running: it sees the flag and stops
  jobs_.erase(it);
}

void EvaluationRunner::WaitIdle() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](EvaluationRunner* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(r->mu_) {
        return r->queue_.empty() && r->running_ == 0;
      },
      this));
}

void EvaluationRunner::Loop() {
  while (true) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](EvaluationRunner* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(r->mu_) {
            return r->stop_ || !r->queue_.empty();
          },
          this));
      if (stop_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    Run(job);
    absl::MutexLock lock(&mu_);
    --running_;
    jobs_.erase({job.instance, job.id});
  }
}

void EvaluationRunner::Run(const Job& job) {
  v1::GetEvaluationRequest get;
  get.set_instance(job.instance);
  get.set_id(job.id);
  v1::Evaluation pending;
  if (!service_->GetEvaluation(get, &pending).ok() ||
      pending.status() != v1::EVALUATION_PENDING)
    return;
  v1::GetInstanceRequest which;
  which.set_name(job.instance);
  v1::Instance instance;
  if (!service_->GetInstance(which, &instance).ok()) return;
  v1::ExportDecisionLogRequest read;
  read.set_name(job.instance);
  read.set_since_ms(pending.start_ms());
  read.set_until_ms(pending.end_ms());
  DecisionService::DecisionLogCursor cursor;
  const DecisionChunks next = [&](v1::DecisionLogChunk* chunk, bool* done) {
    return service_->ReadDecisionLog(read, &cursor, chunk, done);
  };
  // Held inside the node's memory budget; a job that does not fit fails, saying so.
  const int64_t bytes = EvaluationJobBytes(pending);
  absl::StatusOr<v1::Evaluation> outcome = absl::UnknownError("not run");
  if (absl::Status room = service_->memory()->Reserve(
          bytes, MemoryKind::kEvaluation, MemoryOp::kEvaluation,
          absl::StrCat("evaluation '", job.id, "' of instance '", job.instance, "'"));
      !room.ok()) {
    outcome = room;
  } else {
    outcome = RunEvaluation(pending, instance.config(), next, *job.cancelled);
    service_->memory()->Charge(-bytes, MemoryKind::kEvaluation);
  }
  if (absl::IsCancelled(outcome.status()) || job.cancelled->load()) return;
  v1::Evaluation finished;
  if (outcome.ok()) {
    finished = *std::move(outcome);
  } else {
    finished = pending;
    finished.set_status(v1::EVALUATION_FAILED);
    finished.set_error(std::string(outcome.status().message()));
  }
  finished.set_restarted(job.restarted);
  finished.set_finished_at_ms(service_->clock()->NowMs());
  if (auto s = service_->FinishEvaluation(job.instance, std::move(finished)); !s.ok())
    BANDIT_LOG_WARN("evaluation '", job.id, "' of instance '", job.instance,
                    "' finished but could not be recorded: ", s.message());
}

}  // namespace bandit::server
