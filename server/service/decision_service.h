// The service's request logic, free of gRPC: validate, find the instance, call it. The gRPC
// layer (grpc_service.h) is a thin adapter over this class, and in-process tests use it directly.
//
// Every call that changes state takes an optional `written_seq`: it is raised to the sequence
// number of the newest record the call appended to storage. A caller that acknowledges to a
// client does so once WhenDurable(written_seq) answers.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bandit/v1/service.pb.h"
#include "core/classic/argmax_probability.h"
#include "server/env/clock.h"
#include "server/instance/instance_registry.h"
#include "server/instance/memory_budget.h"
#include "server/storage/storage.h"

namespace bandit::server {

// Words the evaluation refusals carry, which Personalizer's API turns into its error codes
// (DuplicateCustomPolicyNames, InvalidPolicyConfiguration, NoLogsExistInDateRange,
// EvaluationNotFound).
inline constexpr char kDistinctPolicyNames[] = "expected distinct names";
inline constexpr char kPolicyArgumentsRefused[] = "arguments refused: ";
inline constexpr char kNoDecisionLogged[] = "logged no decision";
inline constexpr char kNoSuchEvaluation[] = "has no evaluation";

struct ServiceLimits {
  InstanceLimits instance;
  int64_t max_instances = 100'000;
  int64_t max_batch_items = 1'000;
  int max_page_size = 1'000;
  // The server's gRPC message limit (--max_message_bytes): ExportInstance refuses, with the
  // way out, a snapshot that would not fit in its response.
  int64_t max_message_bytes = 16 << 20;
  // The node's memory budget (--max_memory_bytes, server/instance/memory_budget.h); 0 = no limit.
  int64_t max_memory_bytes = 0;
};

class DecisionService {
 public:
  // `uids` gives new instances their uid (event-id prefix).
  explicit DecisionService(const Clock* clock = SystemClock::Get(), ServiceLimits limits = {},
                           UidSource* uids = RandomUids());

  absl::Status CreateInstance(const bandit::v1::CreateInstanceRequest& req,
                              bandit::v1::Instance* out, uint64_t* written_seq = nullptr);
  absl::Status GetInstance(const bandit::v1::GetInstanceRequest& req, bandit::v1::Instance* out);
  absl::Status ListInstances(const bandit::v1::ListInstancesRequest& req,
                             bandit::v1::ListInstancesResponse* out);
  absl::Status DeleteInstance(const bandit::v1::DeleteInstanceRequest& req,
                              bandit::v1::DeleteInstanceResponse* out = nullptr,
                              uint64_t* written_seq = nullptr);
  absl::Status ResetInstance(const bandit::v1::ResetInstanceRequest& req, bandit::v1::Instance* out,
                             uint64_t* written_seq = nullptr);
  absl::Status AddArms(const bandit::v1::AddArmsRequest& req, bandit::v1::Instance* out,
                       uint64_t* written_seq = nullptr);
  absl::Status RemoveArms(const bandit::v1::RemoveArmsRequest& req, bandit::v1::Instance* out,
                          uint64_t* written_seq = nullptr);
  absl::Status SetMixtureReference(const bandit::v1::SetMixtureReferenceRequest& req,
                                   bandit::v1::Instance* out, uint64_t* written_seq = nullptr);
  // The policy becomes VW's learner of `arguments` (InstanceState::ReplacePolicy), trained on
  // the decision log first with train_on_log: the training runs on the caller's thread, outside
  // the instance's lock (decisions rewarded meanwhile are not in it), and the trained state is
  // journaled with the change. INVALID_ARGUMENT for arguments the learner refuses;
  // FAILED_PRECONDITION for another feature space, or train_on_log without a decision log.
  absl::Status SetLearningPolicy(const bandit::v1::SetLearningPolicyRequest& req,
                                 bandit::v1::Instance* out, uint64_t* written_seq = nullptr);
  // The live settings (InstanceState::Configure), keeping what was learned.
  absl::Status ConfigureInstance(const bandit::v1::ConfigureInstanceRequest& req,
                                 bandit::v1::Instance* out, uint64_t* written_seq = nullptr);
  absl::Status AddShadow(const bandit::v1::AddShadowRequest& req, bandit::v1::Instance* out,
                         uint64_t* written_seq = nullptr);
  absl::Status RemoveShadow(const bandit::v1::RemoveShadowRequest& req, bandit::v1::Instance* out,
                            uint64_t* written_seq = nullptr);
  absl::Status PromoteShadow(const bandit::v1::PromoteShadowRequest& req, bandit::v1::Instance* out,
                             uint64_t* written_seq = nullptr);
  absl::Status Select(const bandit::v1::SelectRequest& req, bandit::v1::Decision* out,
                      uint64_t* written_seq = nullptr);
  // Activates a decision made with defer_activation (InstanceState::Activate).
  absl::Status Activate(const bandit::v1::ActivateRequest& req, bandit::v1::ActivateResponse* out,
                        uint64_t* written_seq = nullptr);
  absl::Status Update(const bandit::v1::UpdateRequest& req, bandit::v1::UpdateResponse* out,
                      uint64_t* written_seq = nullptr);
  absl::Status SelectBatch(const bandit::v1::SelectBatchRequest& req,
                           bandit::v1::SelectBatchResponse* out, uint64_t* written_seq = nullptr);
  absl::Status UpdateBatch(const bandit::v1::UpdateBatchRequest& req,
                           bandit::v1::UpdateBatchResponse* out, uint64_t* written_seq = nullptr);
  // Offline evaluations of an instance's decision log (evaluation.proto). Create validates the
  // request (INVALID_ARGUMENT: no name, an end not after the start, duplicate or malformed
  // policy names, arguments the vw learner refuses; FAILED_PRECONDITION: no decision log, or no
  // decision logged in the span), journals the evaluation pending and hands it to the job
  // runner (SetEvaluationJobs). Get and List read; NOT_FOUND for an unknown id. Delete journals
  // the deletion and cancels its job.
  absl::Status CreateEvaluation(const bandit::v1::CreateEvaluationRequest& req,
                                bandit::v1::Evaluation* out, uint64_t* written_seq = nullptr);
  absl::Status GetEvaluation(const bandit::v1::GetEvaluationRequest& req,
                             bandit::v1::Evaluation* out);
  absl::Status ListEvaluations(const bandit::v1::ListEvaluationsRequest& req,
                               bandit::v1::ListEvaluationsResponse* out);
  absl::Status DeleteEvaluation(const bandit::v1::DeleteEvaluationRequest& req,
                                bandit::v1::DeleteEvaluationResponse* out,
                                uint64_t* written_seq = nullptr);
  // The job's outcome, journaled (the runner calls it): replaces the pending evaluation with
  // the same id; nothing when it was deleted meanwhile.
  absl::Status FinishEvaluation(const std::string& instance, bandit::v1::Evaluation done,
                                uint64_t* written_seq = nullptr);
  // Who runs the jobs: `start` is called with (instance, evaluation id, restarted) for each
  // evaluation created; `cancel` with (instance, id) for each deleted.
  struct EvaluationJobs {
    std::function<void(const std::string&, const std::string&, bool)> start;
    std::function<void(const std::string&, const std::string&)> cancel;
  };
  void SetEvaluationJobs(EvaluationJobs jobs);
  // Hands every evaluation still pending (journaled before a restart, or on the node an instance
  // was taken over from) to the runner again, as restarted: of every instance, or of `name`.
  // Returns how many.
  int64_t ResumeEvaluations(const std::string& name = "");
  // Creates the automatic evaluations that are due (config.auto_optimization: every frequency
  // from the start time, over the last frequency's decisions, with offline experimentation;
  // EVALUATION_TYPE_AUTO). At the instance's evaluation limit the oldest finished automatic one
  // makes room. A span without decisions is tried again a frequency later. Returns how many
  // were created. The server's sweeper calls it.
  int64_t StartDueAutoOptimizations();
  absl::Status ExportInstance(const bandit::v1::ExportInstanceRequest& req,
                              bandit::v1::ExportInstanceResponse* out);
  // ImportInstance's snapshot of a VW model file (vw_model): a new vw instance with its state.
  absl::StatusOr<bandit::v1::InstanceSnapshot> SnapshotOfVwModel(
      const bandit::v1::ImportInstanceRequest& req);
  // A new instance from a snapshot or a VW model file; with `replace`, it takes the place of an
  // existing instance of that name in one journal record (an existing one is touched only
  // after the new one is built and charged; a refused import leaves it as it was).
  absl::Status ImportInstance(const bandit::v1::ImportInstanceRequest& req,
                              bandit::v1::Instance* out, uint64_t* written_seq = nullptr);
  // One chunk of ExportDecisionLog's stream. `cursor` starts zeroed; each call fills `out` with
  // the decisions after it (at most kDecisionLogChunkEvents, about kDecisionLogChunkBytes) and
  // advances it; *done once nothing is left. The first call validates the request. The stream
  // holds one chunk at a time, so an export of any length runs in bounded memory.
  // Thompson sampling entries hold their posteriors: their probabilities are computed here,
  // outside the instance's lock, by one ArgmaxProbabilities per stream (consecutive decisions
  // differ in an arm or two).
  struct DecisionLogCursor {
    uint64_t after_seq = 0;
    int64_t sent = 0;
    ArgmaxProbabilities probabilities;
  };
  static constexpr int64_t kDecisionLogChunkEvents = 512;
  static constexpr int64_t kDecisionLogChunkBytes = int64_t{1} << 20;
  absl::Status ReadDecisionLog(const bandit::v1::ExportDecisionLogRequest& req,
                               DecisionLogCursor* cursor, bandit::v1::DecisionLogChunk* out,
                               bool* done);

  // Snapshot I/O runs off the caller's thread (on the snapshot runner's); `done` gets the
  // outcome. FAILED_PRECONDITION when the server keeps no durable state.
  void SnapshotInstances(const bandit::v1::SnapshotInstancesRequest& req,
                         bandit::v1::SnapshotInstancesResponse* out,
                         std::function<void(absl::Status)> done);

  // Takes snapshots: `name` (empty = a full round); `done` gets how many were written. Set by
  // whoever keeps the durable state (Persistence).
  using SnapshotRunner = std::function<void(const std::string& name,
                                            std::function<void(absl::StatusOr<int64_t>)> done)>;
  void SetSnapshotRunner(SnapshotRunner runner);

  // Durability: once attached, every change is appended to `storage`; deleted names are handed
  // to `on_deleted` (the snapshot store forgets them at its next round).
  void AttachStorage(Storage* storage, std::function<void(const std::string&)> on_deleted);
  // done(status) once record `written_seq` is as durable as the storage's mode promises
  // (inline when nothing was written, there is no storage, or the mode does not wait).
  void WhenDurable(uint64_t written_seq, std::function<void(absl::Status)> done) const;
  // False when WhenDurable would answer OK at once (the caller may skip it).
  bool MustWaitForDurability(uint64_t written_seq) const {
    return written_seq != 0 && WaitsForDurability();
  }
  // True when a write is answered only once its records are durable (--durability=always).
  bool WaitsForDurability() const {
    return storage_ != nullptr && storage_->mode() == Durability::kAlways;
  }

  // Applies expiry on every instance (a background sweeper calls this; requests also expire
  // lazily on the instance they touch). Returns how many decisions expired.
  int64_t ExpireAll();

  InstanceRegistry& registry() { return registry_; }
  // The node's memory budget: every instance this service holds is charged to it.
  const std::shared_ptr<MemoryBudget>& memory() const { return memory_; }
  const Clock* clock() const { return clock_; }

 private:
  // ALREADY_EXISTS if `name` is taken (or the refusal status of a name refused at recovery).
  absl::Status CheckNameFree(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lifecycle_mu_);
  // Journals `rec` (the create or import of `inst`), then makes the instance visible.
  absl::Status Register(std::shared_ptr<Instance> inst, bandit::v1::JournalRecord rec,
                        MemoryOp op, bandit::v1::Instance* out, uint64_t* written_seq)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(lifecycle_mu_);
  // `inst` (built from `rec`, a replacing import) takes the place of `existing`: charged,
  // journaled as one record under `existing`'s lock (Instance::ReplaceWith), then swapped in
  // the registry.
  absl::Status Replace(const std::shared_ptr<Instance>& existing, std::shared_ptr<Instance> inst,
                       bandit::v1::JournalRecord rec, bandit::v1::Instance* out,
                       uint64_t* written_seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lifecycle_mu_);
  // Looks the instance up, applies and journals `change` (a change's record,
  // server/instance/instance_operations.h), describes the result.
  // The job runner's callbacks as set now (copied: a call runs them outside the lock).
  EvaluationJobs CurrentEvaluationJobs() ABSL_LOCKS_EXCLUDED(lifecycle_mu_);
  // CreateEvaluation of a caller's (MANUAL) or of the automatic optimization (AUTO).
  absl::Status CreateEvaluationOfType(const bandit::v1::CreateEvaluationRequest& req,
                                      bandit::v1::EvaluationType type, bandit::v1::Evaluation* out,
                                      uint64_t* written_seq);
  absl::Status ChangeAndDescribe(const std::string& name, bandit::v1::JournalRecord change,
                                 bandit::v1::Instance* out, uint64_t* written_seq);

  const Clock* clock_;
  UidSource* const uids_;
  const ServiceLimits limits_;
  // Before registry_: instances share it and release their charge when destroyed.
  const std::shared_ptr<MemoryBudget> memory_;
  InstanceRegistry registry_;
  // Serializes create/delete/import so the journal's order of lifecycle records matches the
  // registry's (these calls are rare; Select/Update never take it).
  absl::Mutex lifecycle_mu_;
  Storage* storage_ = nullptr;
  SnapshotRunner snapshot_runner_;
  EvaluationJobs evaluation_jobs_;
  // When each instance's automatic optimization last found no decision to evaluate (not
  // journaled: after a restart it is tried again at once).
  absl::Mutex auto_mu_;
  std::map<std::string, int64_t> auto_empty_at_ ABSL_GUARDED_BY(auto_mu_);
  std::function<void(const std::string&)> on_deleted_;
};

}  // namespace bandit::server
