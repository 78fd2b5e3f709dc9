// Offline evaluations of decision logs (DecisionService::CreateEvaluation, evaluation.proto), run
// as jobs on threads of their own (--evaluation_threads) at the lowest priority (nice 19), so
// that an evaluation takes no thread that serves requests and little of a core serving wants. A
// job reads the instance's log in bounded chunks (the export's path: the instance's lock is held
// per chunk, not per job) and evaluates, event by event:
//   Online    the logged decisions themselves (w_t = 1: the mean logged reward);
//   Baseline  each decision's baseline action (the slot's, or the first action offered);
//   Random    uniform choice over the actions offered;
//   Custom    each policy given (VW arguments), learning along the log as it is evaluated
//             (progressive validation, core/ope/evaluator.h: the evaluator bandit-ope runs).
// Every figure comes from core/ope/estimators.h, the shadows' and bandit-ope's estimators. The
// outcome is journaled (DecisionService::FinishEvaluation); a job interrupted by a restart is
// run again from the start (DecisionService::ResumeEvaluations) and says so (`restarted`).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "bandit/v1/service.pb.h"
#include "server/service/decision_service.h"

namespace bandit::server {

// The windows an evaluation's summaries are cut into: the smallest of 5 minutes, 15 minutes, 1
// hour, 6 hours, 1 day and 7 days that cuts [start, end) into at most 64.
int64_t EvaluationWindowMs(int64_t start_ms, int64_t end_ms);
// The window as ISO 8601 (Personalizer's aggregateTimeWindow): "PT5M", "PT1H", "P1D", ...
std::string IsoDuration(int64_t ms);

// The bytes an evaluation's job holds while it runs: each custom policy's learner (its declared
// footprint) and sparse direct model at their largest, the online settings' copy (when `online`
// is Vowpal Wabbit's learner) and, with offline experimentation, a search stage's settings, and
// two chunks of the log. 0 for arguments that do not parse (Create refused them).
int64_t EvaluationJobBytes(const bandit::v1::Evaluation& e,
                           const bandit::v1::InstanceConfig& online);

// One evaluation's figures over the decisions `next` hands out (a chunk per call, *done once
// there are no more). `online` is the instance's config (its policy is the online one).
// `cancelled` is read between chunks: CANCELLED once it is set. The evaluation comes back
// completed (results, events, skipped, warnings) or failed (`error`: a custom policy that could
// not take a logged decision).
// `open` starts a reader at the span's start: the job reads the span once, and once more per
// stage of an offline experimentation's search (offline_experimentation.h).
using DecisionChunks = std::function<absl::Status(bandit::v1::DecisionLogChunk*, bool* done)>;
using OpenDecisionLog = std::function<DecisionChunks()>;
struct EvaluationLimits {
  // The offline experimentation's CPU time (--evaluation_cpu_seconds): the search stops, a stage
  // cut short, once it is spent.
  double cpu_budget_seconds = 600;
  // The job thread's CPU clock in seconds (tests inject one); empty: CLOCK_THREAD_CPUTIME_ID.
  std::function<double()> cpu_seconds;
  // Run the job threads at nice 19 (banditd does; in-process tests run them as their callers).
  bool low_priority = false;
};
// The feature importance rows an evaluation keeps, of each kind (namespaces, features).
inline constexpr size_t kMaxImportanceRows = 200;
absl::StatusOr<bandit::v1::Evaluation> RunEvaluation(bandit::v1::Evaluation pending,
                                                     const bandit::v1::InstanceConfig& online,
                                                     const OpenDecisionLog& open,
                                                     const std::atomic<bool>& cancelled,
                                                     const EvaluationLimits& limits = {});

class EvaluationRunner {
 public:
  EvaluationRunner(DecisionService* service, int threads, EvaluationLimits limits = {});
  ~EvaluationRunner();  // cancels what runs, drops what waits, joins
  EvaluationRunner(const EvaluationRunner&) = delete;
  EvaluationRunner& operator=(const EvaluationRunner&) = delete;

  // What DecisionService::SetEvaluationJobs takes.
  DecisionService::EvaluationJobs Jobs();
  void Start(const std::string& instance, const std::string& id, bool restarted);
  void Cancel(const std::string& instance, const std::string& id);
  // Blocks until no job waits or runs (tests, shutdown).
  void WaitIdle();

 private:
  struct Job {
    std::string instance, id;
    bool restarted = false;
    std::shared_ptr<std::atomic<bool>> cancelled;
  };
  void Loop();
  void Run(const Job& job);
  // An automatic evaluation's outcome: the optimal policy applied (trained on the log) when it
  // beats the online policy, else the online policy retained; the status says which.
  void ApplyOptimization(const std::string& instance, bandit::v1::Evaluation* e);

  DecisionService* const service_;
  const EvaluationLimits limits_;
  absl::Mutex mu_;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  // The jobs waiting or running, by (instance, id): their cancel flags.
  std::map<std::pair<std::string, std::string>, std::shared_ptr<std::atomic<bool>>> jobs_
      ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace bandit::server
