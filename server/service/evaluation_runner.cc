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
#include "server/service/offline_experimentation.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ctime>
#include <set>

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

int64_t EvaluationJobBytes(const v1::Evaluation& e, const v1::InstanceConfig& online) {
  int64_t bytes = 2 * DecisionService::kDecisionLogChunkBytes;
  const auto learner_bytes = [](const std::string& arguments) -> int64_t {
    v1::PolicyConfig policy;
    policy.mutable_vw()->set_arguments(arguments);
    auto options = vw::ParseVwArguments(arguments);
    if (!options.ok()) return 0;
    return vw::Footprint(policy) +
           ope::SparseDirectModel::MaxStateBytes(int64_t{1} << options->space.bits);
  };
  for (const auto& p : e.policies()) bytes += learner_bytes(p.arguments());
  // The online settings' copy (feature importance, the search's start), and a search stage's
  // settings at once (each at the base's size: -b is not searched).
  const bool online_vw = online.policy().has_vw();
  if (!online_vw && !e.offline_experimentation()) return bytes;
  const int64_t base = learner_bytes(online_vw ? online.policy().vw().arguments()
                                               : kExperimentationBaseArguments);
  bytes += base;
  if (e.offline_experimentation()) bytes += kMaxSettingsPerStage * base;
  return bytes;
}

namespace {

// One learning setting fed along a pass over the log, and why it stopped, if it did.
struct Fed {
  std::unique_ptr<ope::Evaluator> evaluator;
  std::string error;
};

absl::StatusOr<std::unique_ptr<ope::Evaluator>> SettingEvaluator(const std::string& name,
                                                                 const std::string& arguments,
                                                                 int64_t seed, int64_t window_ms,
                                                                 bool importance) {
  v1::InstanceConfig config;
  config.mutable_policy()->mutable_vw()->set_arguments(arguments);
  config.set_seed(seed == 0 ? 1 : seed);
  if (auto s = FeatureSpaceFromVwArguments(&config); !s.ok())
    return absl::InvalidArgumentError(absl::StrCat("policy '", name, "': ", s.message()));
  ope::EvaluateOptions options;
  options.window_ms = window_ms;
  // The vw learner takes sparse vectors at any size; so does the direct model then (a diagonal
  // one: the summaries are IPS's, and a dense ridge over 2^b coordinates would cost O(4^b) per
  // event).
  options.max_dense_dimension = 1;
  options.held_out = &HeldOut;
  if (importance) options.importance_of = 0;
  auto evaluator = ope::Evaluator::Create({{name, config}}, options);
  if (!evaluator.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("policy '", name, "': ", evaluator.status().message()));
  return evaluator;
}

// Whether the entry can be evaluated at all: a logged probability, a finite reward, actions.
bool Evaluable(const v1::LoggedDecision& d) {
  return d.has_propensity() && d.propensity() > 0 && d.propensity() <= 1 &&
         std::isfinite(d.reward()) && d.num_actions() > 0;
}

// Reads the span once, from its start: every evaluable entry to `each`, and every decision (a
// multi-slot one's entries together) to each setting that has not failed.
absl::Status ReadPass(const DecisionChunks& next, const std::atomic<bool>& cancelled,
                      std::vector<Fed>& fed,
                      const std::function<void(const v1::LoggedDecision&)>& each,
                      int64_t* unevaluable) {
  ope::DecisionGroups groups([&](std::span<const v1::LoggedDecision> slots, int count) {
    for (Fed& f : fed)
      if (f.error.empty())
        if (auto s = f.evaluator->AddDecision(slots, slots.front().event_id(), count); !s.ok())
          f.error = std::string(s.message());
    return absl::OkStatus();
  });
  bool done = false;
  v1::DecisionLogChunk chunk;
  while (!done) {
    if (cancelled.load()) return absl::CancelledError("the evaluation was deleted");
    if (auto s = next(&chunk, &done); !s.ok()) return s;
    for (auto& d : *chunk.mutable_decisions()) {
      if (!Evaluable(d)) {
        if (unevaluable != nullptr) ++*unevaluable;
        continue;
      }
      each(d);
      // The evaluators see every slot of a decision (its featurization depends on how many it
      // had) and skip those without a reward themselves.
      if (!fed.empty()) (void)groups.Add(std::move(d));
    }
  }
  return groups.Finish();
}

// The namespace letters of a named decision's context and actions.
void AddNamespaces(const features::FeatureSpace& space, const v1::LoggedDecision& d,
                   std::set<char>* context, std::set<char>* actions) {
  features::InputLimits limits;
  limits.max_features = limits.max_json_bytes;
  features::ParsedFeatures parsed;
  const auto letters = [&](const std::string& json, std::set<char>* into) {
    parsed.Clear();
    if (json.empty() || !space.Parse(json, "", limits, false, &parsed).ok()) return;
    for (const auto& g : parsed.groups)
      if (!g.features.empty() && g.letter != ' ' && std::isprint(g.letter))
        into->insert(static_cast<char>(g.letter));
  };
  letters(d.named_context(), context);
  for (const auto& a : d.named_actions()) letters(a.features(), actions);
}

void AddImportance(const ope::CandidateResult& r, v1::Evaluation* e) {
  const double n = static_cast<double>(std::max<int64_t>(1, r.importance_events));
  const auto rows = [&](const std::map<std::string, ope::FeatureWeight>& of, bool namespaces) {
    std::vector<v1::FeatureImportance> out;
    double top = 0;
    for (const auto& [name, w] : of) {
      v1::FeatureImportance row;
      if (namespaces) {
        row.set_namespace_(name);
      } else {
        const size_t caret = name.find('^');
        row.set_namespace_(caret == std::string::npos ? " " : name.substr(0, caret));
        row.set_feature(caret == std::string::npos ? name : name.substr(caret + 1));
      }
      row.set_mean_abs_contribution(w.abs_contribution / n);
      row.set_occurrences(w.occurrences);
      top = std::max(top, row.mean_abs_contribution());
      out.push_back(std::move(row));
    }
    for (auto& row : out) row.set_importance(top > 0 ? 100.0 * row.mean_abs_contribution() / top : 0.0);
    std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
      return a.mean_abs_contribution() > b.mean_abs_contribution();
    });
    // The journal keeps the evaluation: the most important rows only.
    if (out.size() > kMaxImportanceRows) out.resize(kMaxImportanceRows);
    for (auto& row : out) *e->add_feature_importance() = std::move(row);
  };
  rows(r.namespaces, true);
  rows(r.features, false);
}

double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// A result name no custom policy has.
std::string UniqueName(const v1::Evaluation& e, const std::string& want) {
  std::string name = want;
  for (int k = 2;; ++k) {
    bool taken = false;
    for (const auto& p : e.policies()) taken |= p.name() == name;
    if (!taken) return name;
    name = absl::StrCat(want, "-", k);
  }
}

}  // namespace

absl::StatusOr<v1::Evaluation> RunEvaluation(v1::Evaluation e, const v1::InstanceConfig& online,
                                             const OpenDecisionLog& open,
                                             const std::atomic<bool>& cancelled,
                                             const EvaluationLimits& limits) {
  const std::function<double()> cpu = limits.cpu_seconds ? limits.cpu_seconds : &ThreadCpuSeconds;
  e.set_window_ms(EvaluationWindowMs(e.start_ms(), e.end_ms()));
  e.clear_results();
  e.clear_warnings();
  e.clear_error();
  e.clear_optimization();
  e.clear_feature_importance();
  const int64_t seed = online.seed();
  Accumulated logged(e.window_ms()), baseline(e.window_ms()), uniform(e.window_ms());
  ope::Estimators logged_held_out;
  // Each custom policy on its own evaluator (its arguments may hash into another space), then
  // the online settings' copy: Vowpal Wabbit's online arguments (feature importance and the
  // search's start), or Personalizer's default settings when the online policy is another.
  std::vector<Fed> fed;
  for (const auto& p : e.policies()) {
    auto evaluator = SettingEvaluator(p.name(), p.arguments(), seed, e.window_ms(), false);
    if (!evaluator.ok()) return evaluator.status();
    fed.push_back({*std::move(evaluator), ""});
  }
  const bool online_vw = online.policy().has_vw();
  const LearningSetting base{
      "online settings", online_vw ? online.policy().vw().arguments() : kExperimentationBaseArguments};
  bool with_base = online_vw || e.offline_experimentation();
  if (with_base) {
    auto evaluator = SettingEvaluator(base.name, base.arguments, seed, e.window_ms(), online_vw);
    with_base = evaluator.ok();
    if (with_base) fed.push_back({*std::move(evaluator), ""});
  }
  int64_t events = 0, skipped = 0, certain = 0;
  std::set<char> context_letters, action_letters;
  std::unique_ptr<features::FeatureSpace> letters_space;
  if (auto created = features::FeatureSpace::Create({}); created.ok())
    letters_space = std::make_unique<features::FeatureSpace>(*std::move(created));
  constexpr int64_t kNamespaceSample = 1000;  // decisions read for the log's namespaces
  const double main_start = cpu();
  absl::Status read = ReadPass(open(), cancelled, fed, [&](const v1::LoggedDecision& d) {
    if (letters_space && events + skipped < kNamespaceSample && d.named_actions_size() > 0)
      AddNamespaces(*letters_space, d, &context_letters, &action_letters);
    const bool rewarded =
        d.outcome() == v1::OUTCOME_REWARDED || d.outcome() == v1::OUTCOME_EXPIRED_DEFAULT;
    if (!rewarded) {
      ++skipped;
      return;
    }
    ++events;
    const double p = d.propensity(), r = d.reward();
    certain += p == 1.0;
    const int chosen = d.chosen_index();
    int baseline_action = d.baseline_index();
    if (baseline_action < 0) baseline_action = d.slot_actions_size() > 0 ? d.slot_actions(0) : 0;
    const int offered = d.slot_actions_size() > 0 ? d.slot_actions_size() : d.num_actions();
    logged.Add(d.decided_at_ms(), p, p, r);
    if (HeldOut(d.event_id())) logged_held_out.AddTerms(p, p, r, 0, 0);
    baseline.Add(d.decided_at_ms(), chosen == baseline_action ? 1.0 : 0.0, p, r);
    uniform.Add(d.decided_at_ms(), 1.0 / offered, p, r);
  }, &skipped);
  if (!read.ok()) return read;
  const double main_seconds = cpu() - main_start;
  e.set_events(events);
  e.set_skipped(skipped);
  for (int c = 0; c < e.policies_size(); ++c)
    if (!fed[static_cast<size_t>(c)].error.empty()) {
      e.set_status(v1::EVALUATION_FAILED);
      e.set_error(absl::StrCat("policy '", e.policies(c).name(), "': ",
                               fed[static_cast<size_t>(c)].error));
      return e;
    }
  AddResult("Online", OnlineArguments(online), v1::POLICY_SOURCE_ONLINE, logged.total,
            logged.windows, e, &e);
  AddResult("Baseline", "", v1::POLICY_SOURCE_BASELINE, baseline.total, baseline.windows, e, &e);
  AddResult("Random", "", v1::POLICY_SOURCE_RANDOM, uniform.total, uniform.windows, e, &e);
  for (int c = 0; c < e.policies_size(); ++c) {
    const auto& result = fed[static_cast<size_t>(c)].evaluator->results().front();
    const auto& p = e.policies(c);
    AddResult(p.name(), p.arguments(), v1::POLICY_SOURCE_CUSTOM, result.estimators,
              result.windows, e, &e);
  }
  const Fed* base_fed = with_base ? &fed.back() : nullptr;
  const bool base_ran = base_fed != nullptr && base_fed->error.empty();
  if (online_vw && base_ran) {
    AddImportance(base_fed->evaluator->results().front(), &e);
  } else if (events > 0) {
    e.add_warnings(
        online_vw ? absl::StrCat("no feature importance: the online settings could not learn "
                                 "the log (", base_fed ? base_fed->error : "", ")")
                  : "no feature importance: the online policy is not Vowpal Wabbit's learner, "
                    "whose weights are read per feature");
  }
  if (e.offline_experimentation()) {
    if (!base_ran) {
      e.add_warnings(absl::StrCat(
          "no offline experimentation: its settings (Vowpal Wabbit's learner) cannot learn this "
          "log's decisions",
          base_fed && !base_fed->error.empty() ? absl::StrCat(" (", base_fed->error, ")") : ""));
    } else {
      const LogNamespaces ns{std::string(context_letters.begin(), context_letters.end()),
                             std::string(action_letters.begin(), action_letters.end())};
      const SettingsPass pass = [&](const std::vector<LearningSetting>& settings)
          -> absl::StatusOr<std::vector<SettingOutcome>> {
        std::vector<Fed> stage;
        for (const auto& s : settings) {
          auto evaluator = SettingEvaluator(s.name, s.arguments, seed, e.window_ms(), false);
          if (!evaluator.ok()) return evaluator.status();
          stage.push_back({*std::move(evaluator), ""});
        }
        if (auto s = ReadPass(open(), cancelled, stage, [](const v1::LoggedDecision&) {}, nullptr);
            !s.ok())
          return s;
        std::vector<SettingOutcome> out;
        for (auto& f : stage) out.push_back({f.evaluator->results().front(), f.error});
        return out;
      };
      const double per_setting = main_seconds / static_cast<double>(fed.size());
      auto found = SearchSettings(base, base_fed->evaluator->results().front(), per_setting, ns,
                                  pass, limits.cpu_budget_seconds, cpu);
      if (!found.ok()) return found.status();
      v1::Optimization* o = e.mutable_optimization();
      o->set_optimal_policy(UniqueName(e, "Optimized"));
      o->set_arguments(found->best.arguments);
      Summarize(found->best_result.held_out, e.start_ms(), e.end_ms() - e.start_ms(),
                o->mutable_optimal_held_out());
      Summarize(logged_held_out, e.start_ms(), e.end_ms() - e.start_ms(),
                o->mutable_online_held_out());
      for (const auto& [setting, searched] : found->trials) {
        auto* t = o->add_trials();
        t->set_name(setting.name);
        t->set_arguments(setting.arguments);
        Summarize(searched, e.start_ms(), e.end_ms() - e.start_ms(), t->mutable_searched());
      }
      o->set_cpu_seconds(found->cpu_seconds);
      o->set_budget_exhausted(found->budget_exhausted);
      // The winner's held-out 95% interval lies above the online policy's held-out estimate.
      const auto& h = o->optimal_held_out();
      o->set_beats_online(h.events() > 1 && h.average_reward() - h.confidence_interval() >
                                                o->online_held_out().average_reward());
      AddResult(o->optimal_policy(), found->best.arguments,
                v1::POLICY_SOURCE_OFFLINE_EXPERIMENTATION, found->best_result.estimators,
                found->best_result.windows, e, &e);
      if (found->budget_exhausted)
        e.add_warnings(absl::StrCat("the search stopped at its CPU budget (",
                                    limits.cpu_budget_seconds, " s): ", o->trials_size(),
                                    " settings tried"));
    }
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

EvaluationRunner::EvaluationRunner(DecisionService* service, int threads,
                                   EvaluationLimits limits)
    : service_(service), limits_(std::move(limits)) {
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
  // Serving first: at nice 19 a job's thread weighs 15 against a serving thread's 1024 in the
  // kernel's fair share, so it takes the CPU serving leaves and about 1.5 % of a core serving
  // wants (SCHED_IDLE would starve it outright on a saturated node, and never finish).
  if (limits_.low_priority &&
      setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19) != 0)
    BANDIT_LOG_WARN("evaluation threads run at normal priority: nice 19 was refused");
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

void EvaluationRunner::ApplyOptimization(const std::string& instance, v1::Evaluation* e) {
  e->set_status(v1::EVALUATION_ONLINE_POLICY_RETAINED);
  if (!e->has_optimization() || !e->optimization().beats_online()) return;
  const v1::Optimization& o = e->optimization();
  v1::GetInstanceRequest which;
  which.set_name(instance);
  v1::Instance before;
  if (!service_->GetInstance(which, &before).ok()) return;
  v1::SetLearningPolicyRequest req;
  req.set_name(instance);
  req.set_arguments(o.arguments());
  req.set_train_on_log(true);
  v1::Instance after;
  if (absl::Status s = service_->SetLearningPolicy(req, &after); !s.ok()) {
    e->add_warnings(absl::StrCat("the optimal policy beat the online policy but could not be "
                                 "applied: ", s.message()));
    return;
  }
  e->set_status(v1::EVALUATION_OPTIMAL_POLICY_APPLIED);
  e->set_replaced_arguments(OnlineArguments(before.config()));
  BANDIT_LOG_INFO("automatic optimization of instance '", instance, "' (evaluation '", e->id(),
                  "'): learning policy now '", o.arguments(), "' (held-out estimate ",
                  o.optimal_held_out().average_reward(), " +- ",
                  o.optimal_held_out().confidence_interval(), " against the online policy's ",
                  o.online_held_out().average_reward(), "), replacing '",
                  e->replaced_arguments(), "'");
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
  const OpenDecisionLog open = [this, read] {
    auto cursor = std::make_shared<DecisionService::DecisionLogCursor>();
    return DecisionChunks([this, read, cursor](v1::DecisionLogChunk* chunk, bool* done) {
      return service_->ReadDecisionLog(read, cursor.get(), chunk, done);
    });
  };
  // Held inside the node's memory budget; a job that does not fit fails, saying so.
  const int64_t bytes = EvaluationJobBytes(pending, instance.config());
  absl::StatusOr<v1::Evaluation> outcome = absl::UnknownError("not run");
  if (absl::Status room = service_->memory()->Reserve(
          bytes, MemoryKind::kEvaluation, MemoryOp::kEvaluation,
          absl::StrCat("evaluation '", job.id, "' of instance '", job.instance, "'"));
      !room.ok()) {
    outcome = room;
  } else {
    outcome = RunEvaluation(pending, instance.config(), open, *job.cancelled, limits_);
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
  if (finished.type() == v1::EVALUATION_TYPE_AUTO && finished.status() == v1::EVALUATION_COMPLETED)
    ApplyOptimization(job.instance, &finished);
  finished.set_restarted(job.restarted);
  finished.set_finished_at_ms(service_->clock()->NowMs());
  if (auto s = service_->FinishEvaluation(job.instance, std::move(finished)); !s.ok())
    BANDIT_LOG_WARN("evaluation '", job.id, "' of instance '", job.instance,
                    "' finished but could not be recorded: ", s.message());
}

}  // namespace bandit::server
