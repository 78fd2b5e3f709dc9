// One named bandit instance: its policy, its pending decisions and its counters, behind one
// mutex. Every method validates before it changes anything; on error nothing has changed.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "bandit/v1/service.pb.h"
#include "bandit/v1/storage.pb.h"
#include "core/policy.h"
#include "server/clock.h"
#include "server/pending_table.h"
#include "server/storage/journal.h"

namespace bandit::server {

// Per-instance limits (banditd flags, see main.cc). Request-shape limits answer INVALID_ARGUMENT
// (the same request will never succeed); limits on what the server holds answer
// RESOURCE_EXHAUSTED (a later request may succeed once something is freed).
struct InstanceLimits {
  int64_t max_candidates = 10'000;     // candidate vectors per Select
  int64_t max_vector_size = 100'000;   // entries of one feature vector / x / embedding
  int64_t max_pending_capacity = 10'000'000;
  int64_t max_arms_per_request = 10'000;
  // The two below default to "no limit" so that recovery (which builds instances with default
  // limits) never refuses what the server once accepted; banditd's flags set real values.
  // Config fields named `dimension` or `random_features` (any policy, found by reflection).
  int64_t max_feature_dim = std::numeric_limits<int32_t>::max();
  // Arms of one instance: config arms / num_arms at create, and the total after AddArms.
  int64_t max_arms = std::numeric_limits<int32_t>::max();
  // Instance name length (core's CheckId also caps ids at 128 characters).
  int64_t max_name_length = 128;
};

// Fills the defaults of an instance config (pending capacity, reward wait, expiry action, seed
// from the name) and checks it against `limits`: sizes anywhere in the policy config, ranges of
// everything outside it. instance_config.cc.
absl::Status NormalizeConfig(const std::string& name, const InstanceLimits& limits,
                             bandit::v1::InstanceConfig* c);

// What one Update did, for metrics.
struct UpdateOutcome {
  double reward = 0.0;
  bool has_pseudo_regret = false;
  double pseudo_regret = 0.0;
};

// What one Select did, for metrics.
struct SelectOutcome {
  double estimated_gap = std::numeric_limits<double>::quiet_NaN();
};

class Instance {
 public:
  // Validates the name and config, fills defaults, creates the policy.
  // `uid` is the event-id prefix (0 = random; replay passes the journaled one).
  static absl::StatusOr<std::shared_ptr<Instance>> Create(const bandit::v1::CreateInstanceRequest& req,
                                                          const Clock* clock,
                                                          const InstanceLimits& limits,
                                                          uint64_t uid = 0);
  // Rebuilds an instance exactly as it was when `snap` was taken (recovery, import).
  static absl::StatusOr<std::shared_ptr<Instance>> FromSnapshot(
      const bandit::v1::InstanceSnapshot& snap, const Clock* clock, const InstanceLimits& limits);

  // Every change is appended to `journal` before the call returns (nullptr = not durable).
  void AttachJournal(Journal* journal) ABSL_LOCKS_EXCLUDED(mu_);
  // The complete state; last_journal_seq says which journal records it contains.
  bandit::v1::InstanceSnapshot Snapshot() ABSL_LOCKS_EXCLUDED(mu_);
  // Replays one journal record (recovery). Fails if the replay diverges from what was recorded.
  absl::Status Apply(const bandit::v1::JournalRecord& rec) ABSL_LOCKS_EXCLUDED(mu_);
  // Journals the deletion and refuses every later call with NOT_FOUND.
  absl::Status MarkDeleted() ABSL_LOCKS_EXCLUDED(mu_);
  // Journaled changes since the last Snapshot() (for snapshot scheduling).
  int64_t changes_since_snapshot() const ABSL_LOCKS_EXCLUDED(mu_);
  // Recovery: the instance's state is exactly what its snapshot file holds.
  void MarkSnapshotted() ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t uid() const { return uid_; }
  uint64_t last_journal_seq() const ABSL_LOCKS_EXCLUDED(mu_);
  bandit::v1::InstanceConfig config() const ABSL_LOCKS_EXCLUDED(mu_);

  const std::string& name() const { return name_; }

  absl::Status Select(const bandit::v1::SelectRequest& req, bandit::v1::Decision* out,
                      SelectOutcome* outcome = nullptr) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Update(const bandit::v1::UpdateRequest& req, bandit::v1::UpdateResponse* out,
                      UpdateOutcome* outcome = nullptr) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Reset() ABSL_LOCKS_EXCLUDED(mu_);
  // All-or-nothing: either every arm is added/removed or none is.
  absl::Status AddArms(const bandit::v1::AddArmsRequest& req) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status RemoveArms(const bandit::v1::RemoveArmsRequest& req) ABSL_LOCKS_EXCLUDED(mu_);
  // Mixture instances (FD, KD): replaces the reference distribution; learned state is kept.
  absl::Status SetMixtureReference(const bandit::v1::SetMixtureReferenceRequest& req)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Most reference values (embeddings x dimension, or mean + covariance) an instance keeps.
  static constexpr int64_t kMaxReferenceValues = int64_t{1} << 22;
  void Describe(bandit::v1::Instance* out) ABSL_LOCKS_EXCLUDED(mu_);
  // Counters and policy summary only (cheap; for metrics scrapes).
  bandit::v1::InstanceStats Stats(std::vector<std::pair<std::string, double>>* summary)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Applies the expiry action to every decision whose wait has passed; returns how many.
  int64_t ExpireDue() ABSL_LOCKS_EXCLUDED(mu_);

  // Deterministic default seed of an instance: FNV-1a of its name.
  static uint64_t SeedFromName(const std::string& name);

 private:
  Instance(std::string name, bandit::v1::InstanceConfig config, std::unique_ptr<Policy> policy,
           const Clock* clock, const InstanceLimits& limits, uint64_t uid);

  // A Select request's vectors, checked and converted (outside the lock).
  struct SelectInputs {
    SelectInputs();
    ~SelectInputs();
    SelectInputs(const SelectInputs&) = delete;
    SelectInputs& operator=(const SelectInputs&) = delete;
    std::vector<Vector>* candidates;  // per-thread scratch, reused across calls
    Vector x;
  };
  absl::Status ParseSelectInputs(const bandit::v1::SelectRequest& req, SelectInputs* in) const;
  // The bodies of the public calls, at an explicit time; `replay_event_id` is set on replay.
  absl::Status SelectLocked(const bandit::v1::SelectRequest& req, const SelectInputs& in,
                            int64_t now, bandit::v1::Decision* out, SelectOutcome* outcome,
                            const std::string* replay_event_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status UpdateLocked(const bandit::v1::UpdateRequest& req, int64_t now,
                            bandit::v1::UpdateResponse* out, UpdateOutcome* outcome)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Replay of a DecidedSelect record (a Select of a read-only policy, journaled by outcome).
  absl::Status ApplyDecidedLocked(const bandit::v1::DecidedSelect& rec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What every Select leaves behind: the pending decision and the round counters.
  void RecordDecisionLocked(PendingDecision p, double estimated_gap)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ResetLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SetMixtureReferenceLocked(const bandit::v1::SetMixtureReferenceRequest& req)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status AddArmsLocked(const bandit::v1::AddArmsRequest& req) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RemoveArmsLocked(const bandit::v1::RemoveArmsRequest& req)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Checks the instance can take a change now (not deleted, storage healthy).
  absl::Status CheckWritable() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends a record of a change already applied; fills instance, uid and time.
  absl::Status Journaled(bandit::v1::JournalRecord rec, int64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t ExpireDueLocked(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string NextEventId() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Observation> ObservationFor(const bandit::v1::UpdateRequest& req,
                                             const PendingDecision** pending) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SyncConfigArms() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RollBack(const bandit::v1::PolicyConfig& config, const bandit::v1::PolicyState& state)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string name_;
  const Clock* const clock_;
  const InstanceLimits limits_;
  const uint64_t uid_;  // makes event ids unique across instances and restarts

  mutable absl::Mutex mu_;
  bandit::v1::InstanceConfig config_ ABSL_GUARDED_BY(mu_);  // arms kept current
  std::unique_ptr<Policy> policy_ ABSL_GUARDED_BY(mu_);
  PendingTable pending_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  bandit::v1::InstanceStats stats_ ABSL_GUARDED_BY(mu_);
  Journal* journal_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool deleted_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t last_journal_seq_ ABSL_GUARDED_BY(mu_) = 0;
  // Starts at 1: a new instance has no snapshot file yet, so the next round must write one.
  int64_t changes_since_snapshot_ ABSL_GUARDED_BY(mu_) = 1;
  bool replaying_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace bandit::server
