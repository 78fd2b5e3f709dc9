// One named bandit instance as the server serves it: its learned state
// (server/instance/instance_state.h) behind one mutex, and the one path by which a change becomes
// durable (Commit: the change's record is appended to Storage under the instance's lock, so storage
// order = apply order) and by which recovery replays it (Apply). Every method validates before it
// changes anything; on error nothing has changed.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "bandit/v1/service.pb.h"
#include "bandit/v1/storage.pb.h"
#include "google/protobuf/arena.h"
#include "server/env/clock.h"
#include "server/instance/instance_operations.h"
#include "server/instance/instance_state.h"
#include "server/instance/memory_budget.h"
#include "server/storage/storage.h"

namespace bandit::server {

class Instance {
 public:
  // Validates the name and config, fills defaults, creates the policy.
  // `uid` is the event-id prefix (0 = one from RandomUids(); replay passes the journaled one).
  static absl::StatusOr<std::shared_ptr<Instance>> Create(
      const bandit::v1::CreateInstanceRequest& req, const Clock* clock,
      const InstanceLimits& limits, uint64_t uid = 0);
  // Rebuilds an instance exactly as it was when `snap` was taken (recovery, import).
  static absl::StatusOr<std::shared_ptr<Instance>> FromSnapshot(
      const bandit::v1::InstanceSnapshot& snap, const Clock* clock, const InstanceLimits& limits);
  // The same, consuming `snap` as it is read (recovery: InstanceState::FromSnapshot).
  static absl::StatusOr<std::shared_ptr<Instance>> FromSnapshot(
      bandit::v1::InstanceSnapshot&& snap, const Clock* clock, const InstanceLimits& limits);

  // What a journal record does to the node's set of instances: makes one (its create or import
  // record), ends one (its delete record), or changes one (everything else: Apply).
  enum class RecordRole { kCreation, kDeletion, kChange };
  static RecordRole RoleOf(const bandit::v1::JournalRecord& rec);
  // The instance a creation record makes: Create of its config with the record's uid, or
  // FromSnapshot of its import. The one apply of a creation: the live path makes the record
  // first and the instance from it, replay the same from the journal.
  static absl::StatusOr<std::shared_ptr<Instance>> FromCreation(
      const bandit::v1::JournalRecord& rec, const Clock* clock, const InstanceLimits& limits);
  // The footprint a creation record declares, before anything is built
  // (InstanceState::DeclaredBytes of its create or import).
  static absl::StatusOr<int64_t> DeclaredBytes(const bandit::v1::JournalRecord& rec,
                                               const InstanceLimits& limits);
  // Whether an incarnation of the record's instance (its `uid`, its state up to journal record
  // `last_journal_seq`) already holds creation record `rec` (recovery skips it then). A create or
  // a plain import is its own incarnation's beginning, known by its uid; a replacing import may
  // carry the uid of the instance it replaces (an instance's own export put back), so it is
  // known by its place in the journal: held only by a state taken after it.
  static bool HoldsCreation(const bandit::v1::JournalRecord& rec, uint64_t uid,
                            uint64_t last_journal_seq);

  ~Instance();

  // Charges what the instance holds to `budget` (all or nothing) and keeps the charge current
  // from then on: every decision is admitted against the budget before it is made, every
  // change before it is applied (replay is not), and what they added or freed is charged once
  // they are done. RESOURCE_EXHAUSTED (counted as a refusal of `op`) when the instance does not
  // fit; nothing is charged then. Released when the instance is destroyed.
  absl::Status ChargeTo(std::shared_ptr<MemoryBudget> budget, MemoryOp op)
      ABSL_LOCKS_EXCLUDED(mu_);
  // What the instance holds in memory now (InstanceState::MemoryBytes, all recounted).
  InstanceState::Memory MemoryBytes() ABSL_LOCKS_EXCLUDED(mu_);

  // From now on every change is appended to `storage` before the call returns (nullptr = not
  // durable). For an instance storage already holds (recovery).
  void AttachStorage(Storage* storage) ABSL_LOCKS_EXCLUDED(mu_);
  // For a new instance: appends `creation` (its create or import record) through the commit
  // path, then attaches as above. Nothing is attached if the append fails.
  absl::Status AttachNew(Storage* storage, bandit::v1::JournalRecord creation,
                         uint64_t* written_seq) ABSL_LOCKS_EXCLUDED(mu_);

  // The complete state; last_journal_seq says which journal records it contains. Taking a
  // snapshot changes nothing (an export is not a stored snapshot); `changes_covered`, if given,
  // receives the change count the snapshot covers, for MarkSnapshotted once it is stored.
  bandit::v1::InstanceSnapshot Snapshot(int64_t* changes_covered = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The same for storage: `state` without its pending decisions and decision log; `pending`
  // the pending decisions encoded (under the lock, straight from the table), then `log`'s
  // entries as held (shared, not copied, under the lock). encoded() is what Storage::
  // WriteSnapshot stores after `state`.
  struct StorableSnapshot {
    bandit::v1::InstanceSnapshot state;
    std::unique_ptr<EncodedFields> pending = std::make_unique<EncodedFields>();
    std::unique_ptr<DecisionLog::Frozen> log;
    const EncodedSnapshotFields* encoded() const { return pending.get(); }
  };
  StorableSnapshot SnapshotForStorage(int64_t* changes_covered = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The most SnapshotForStorage holds beside the instance (InstanceState::SaveTransientBytes),
  // for the memory budget to admit before a snapshot is taken.
  int64_t SnapshotTransientBytes() const ABSL_LOCKS_EXCLUDED(mu_);
  // Replays one journal record (recovery). Fails if the replay diverges from what was recorded.
  absl::Status Apply(const bandit::v1::JournalRecord& rec) ABSL_LOCKS_EXCLUDED(mu_);
  // Journals the deletion and refuses every later call with NOT_FOUND.
  absl::Status MarkDeleted(uint64_t* written_seq = nullptr) ABSL_LOCKS_EXCLUDED(mu_);
  // `next` (built from `creation`, a replacing import's record, and not yet visible) takes this
  // instance's place: under this instance's lock, so no record of this copy can follow it,
  // `creation` is journaled as `next`'s first record (AttachNew; nothing when `storage` is
  // null) and this copy then refuses every later call (UNAVAILABLE: retry, the name now serves
  // `next`). If this copy cannot take a change (deleted, released, storage failing) or the
  // append fails, nothing changed.
  absl::Status ReplaceWith(Instance& next, Storage* storage, bandit::v1::JournalRecord creation,
                           uint64_t* written_seq) ABSL_LOCKS_EXCLUDED(mu_);
  // This copy stops changing for good (cluster mode: the instance moved to another node, or
  // this node let it go): a call still holding it is refused UNAVAILABLE, so nothing is ever
  // written through a copy that a later load of the same instance would not contain. Waits for
  // a change in progress.
  void MarkReleased() ABSL_LOCKS_EXCLUDED(mu_);
  // Journaled changes since the last Snapshot() (for snapshot scheduling).
  int64_t changes_since_snapshot() const ABSL_LOCKS_EXCLUDED(mu_);
  // A snapshot covering `changes_covered` changes is stored (recovery: the stored snapshot
  // holds the whole state, all of them). Changes made since that snapshot was taken still count.
  void MarkSnapshotted(int64_t changes_covered = std::numeric_limits<int64_t>::max())
      ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the change count calls for a snapshot: at least `every_changes` changes and, for an
  // instance with a decision log, a log that took in kLogGrowthPerSnapshot times the bytes the
  // last stored snapshot held. A snapshot rewrites the whole log (up to its max_bytes), while the
  // journal only carries each decision once: without the second condition, rewriting a full
  // 64 MiB log every 10 000 changes cost more CPU and disk than journaling it (measured when this
  // condition was added; its commit has the figures). The interval round still snapshots every changed instance.
  bool SnapshotDue(int64_t every_changes) const ABSL_LOCKS_EXCLUDED(mu_);
  static constexpr int64_t kLogGrowthPerSnapshot = 4;
  uint64_t uid() const { return uid_; }
  uint64_t last_journal_seq() const ABSL_LOCKS_EXCLUDED(mu_);
  bandit::v1::InstanceConfig config() const ABSL_LOCKS_EXCLUDED(mu_);
  const std::string& name() const { return name_; }
  // Which policy the instance serves (Reset and arm changes keep it; PromoteShadow changes it).
  bandit::v1::PolicyConfig::PolicyCase policy_case() const {
    return policy_case_.load(std::memory_order_relaxed);
  }

  // The changes. `written_seq` (optional) is raised to the sequence number of the newest record
  // the call appended: the caller acknowledges once Storage::WhenDurable says it is durable.
  absl::Status Select(const bandit::v1::SelectRequest& req, bandit::v1::Decision* out,
                      uint64_t* written_seq = nullptr) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Update(const bandit::v1::UpdateRequest& req, bandit::v1::UpdateResponse* out,
                      uint64_t* written_seq = nullptr) ABSL_LOCKS_EXCLUDED(mu_);
  // The batch forms: items in the given order under one lock and one clock reading, and the
  // records of all of them appended to storage in one step (Storage::AppendAll). statuses[i]
  // is item i's outcome, exactly as the single call would have returned it; a failed item
  // changes nothing and does not stop the others. If the final append fails, every item that
  // had succeeded gets the storage's status instead (as the single call would).
  void SelectBatch(absl::Span<const bandit::v1::SelectRequest* const> reqs,
                   absl::Span<bandit::v1::Decision* const> outs, absl::Span<absl::Status> statuses,
                   uint64_t* written_seq = nullptr) ABSL_LOCKS_EXCLUDED(mu_);
  // With `all_or_none` (UpdateBatchRequest.all_or_none) every item is checked first, under the
  // same lock: the first refused as INVALID_ARGUMENT is every item's status, nothing applied.
  void UpdateBatch(absl::Span<const bandit::v1::UpdateRequest* const> reqs,
                   absl::Span<bandit::v1::UpdateResponse* const> outs,
                   absl::Span<absl::Status> statuses, uint64_t* written_seq = nullptr,
                   bool all_or_none = false) ABSL_LOCKS_EXCLUDED(mu_);
  // A change other than a decision or a reward (server/instance/instance_operations.h): `rec` holds
  // the change's record, made from the request by the service layer; it is applied under the
  // lock, admitted against `admission` (the server's current limits), then journaled.
  absl::Status Change(bandit::v1::JournalRecord rec, const Admission& admission,
                      uint64_t* written_seq = nullptr) ABSL_LOCKS_EXCLUDED(mu_);
  // The offline evaluations it holds, oldest first (copies); with `id`, that one only (none when
  // unknown).
  std::vector<bandit::v1::Evaluation> Evaluations(const std::string& id = "") const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The shadows and their running estimates only: reads, changes nothing (metrics scrapes).
  void DescribeShadows(bandit::v1::Instance* out) const ABSL_LOCKS_EXCLUDED(mu_);
  // Expires what is due first (journaled, not waited for), then describes.
  void Describe(bandit::v1::Instance* out) ABSL_LOCKS_EXCLUDED(mu_);
  // Counters and policy summary only: reads, changes nothing (for metrics scrapes).
  bandit::v1::InstanceStats Stats(std::vector<std::pair<std::string, double>>* summary) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Applies the expiry action to every decision whose wait has passed; returns how many.
  int64_t ExpireDue() ABSL_LOCKS_EXCLUDED(mu_);
  // Copies the decision log's next run after `after_seq` with since_ms <= decided_at_ms <
  // until_ms (0 = unbounded) into `out`: at most `max_events` decisions and, past the first,
  // about `max_bytes`. Sets *more when the log may hold further matches. Reads only (expiry
  // is applied first, journaled, so outcomes are current). FAILED_PRECONDITION when the
  // instance keeps no log.
  absl::Status ReadDecisionLog(uint64_t after_seq, int64_t since_ms, int64_t until_ms,
                               int64_t max_events, int64_t max_bytes,
                               bandit::v1::DecisionLogChunk* out, bool* more)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Snapshot and SnapshotForStorage's one body: the state (InstanceState::Save, with `log` and
  // `pending` as there), where it stands in the journal, and the counts MarkSnapshotted takes.
  void SaveLocked(bandit::v1::InstanceSnapshot* snap, std::unique_ptr<DecisionLog::Frozen>* log,
                  EncodedFields* pending, int64_t* changes_covered)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Instance(std::unique_ptr<InstanceState> state, const Clock* clock, const InstanceLimits& limits);

  // The one translation of a Select request into the state's call (ParseSelect), with this
  // instance's limits, feature space and served policy's input form as last seen (unlocked:
  // `space`, the feature space loaded before it) or as they are now (locked).
  absl::Status ParseSelectLocked(const bandit::v1::SelectRequest& req, SelectCall* call)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ParseSelectUnlocked(const bandit::v1::SelectRequest& req,
                                   const features::FeatureSpace* space, SelectCall* call) const;
  // The bodies of the public calls, at an explicit time; `replay_event_id` is set on replay.
  absl::Status SelectLocked(SelectCall& call, int64_t now, bandit::v1::Decision* out,
                            uint64_t* written_seq, const std::string* replay_event_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status UpdateLocked(const bandit::v1::UpdateRequest& req, int64_t now,
                            bandit::v1::UpdateResponse* out, uint64_t* written_seq)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t ExpireDueLocked(int64_t now, uint64_t* written_seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // UpdateBatch's all_or_none check: the first item refused as INVALID_ARGUMENT (checked
  // against the state as it is, and against the items before it), else OK.
  absl::Status CheckAllLocked(absl::Span<const bandit::v1::UpdateRequest* const> reqs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `change` (which fills the change's record) and commits its record.
  template <typename Mutation>
  absl::Status ChangeLocked(int64_t now, uint64_t* written_seq, Mutation&& change)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Charges the budget (if any) with what the state holds now minus what was charged.
  void RechargeLocked(bool refresh) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Checks the instance can take a change now (not deleted, storage healthy).
  absl::Status CheckWritable() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The commit path, the one place a change becomes durable: appends the record of a change
  // already applied to the state (filling instance, uid and time) and counts it for snapshot
  // scheduling. On replay it only counts.
  absl::Status Commit(bandit::v1::JournalRecord* rec, int64_t now, uint64_t* written_seq)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Batches: while `held_` is set, Commit fills the record and keeps it there instead of
  // appending; AppendHeld then appends them all in one step and clears `held_`.
  absl::Status AppendHeld(uint64_t* written_seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The record a Select or Update fills: on the batch's arena while a batch holds its records
  // (its messages, strings and repeated fields then cost no heap allocation each), else `local`.
  bandit::v1::JournalRecord* RecordFor(bandit::v1::JournalRecord* local)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs one batch of `n` items: `item(i)` for each under one lock, their records held on one
  // arena and appended together (AppendHeld); an append failure becomes every OK item's status.
  template <typename Item>
  void RunHeld(size_t n, absl::Span<absl::Status> statuses, uint64_t* written_seq, Item&& item)
      ABSL_LOCKS_EXCLUDED(mu_);

  const std::string name_;
  const uint64_t uid_;  // makes event ids unique across instances and restarts
  std::atomic<bandit::v1::PolicyConfig::PolicyCase> policy_case_;
  const Clock* const clock_;
  const InstanceLimits limits_;
  // The state's feature space, read before the lock. A ReplacePolicy with arguments of another
  // feature space changes it: a Select featurized with the one before is featurized again under
  // the lock.
  std::atomic<std::shared_ptr<const features::FeatureSpace>> feature_space_;
  // Whether named Selects are featurized to sparse vectors for the served policy
  // (InstanceState::TakesSparseInputs), read before the lock; PromoteShadow may change it.
  std::atomic<bool> sparse_inputs_;

  mutable absl::Mutex mu_;
  // Whether the served policy splits its Select (Policy::PreparesSelect), as last seen under the
  // lock: a hint for taking the shared side first (a stale value only costs a recomputation).
  std::atomic<bool> prepares_select_{true};
  // The served policy's multi-slot featurization state (Policy::slot_index) as last seen under
  // the lock: what a Select featurizes its slots for before the lock; a stale value is caught
  // under the lock, where the request is featurized again.
  std::atomic<Policy::SlotIndex> slot_index_{Policy::SlotIndex::kPerDecision};
  const std::unique_ptr<InstanceState> state_ ABSL_PT_GUARDED_BY(mu_);
  Storage* storage_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool deleted_ ABSL_GUARDED_BY(mu_) = false;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  bool replaced_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t last_journal_seq_ ABSL_GUARDED_BY(mu_) = 0;
  // Starts at 1: a new instance has no stored snapshot yet, so the next round must write one.
  int64_t changes_since_snapshot_ ABSL_GUARDED_BY(mu_) = 1;
  // The decision log's appended_bytes() and bytes() when the last stored snapshot was taken
  // (SnapshotDue), and when the last Snapshot() was taken (stored or not).
  int64_t log_appended_at_snapshot_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t log_bytes_at_snapshot_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t log_appended_taken_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t log_bytes_taken_ ABSL_GUARDED_BY(mu_) = 0;
  bool replaying_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<MemoryBudget> budget_ ABSL_GUARDED_BY(mu_);
  InstanceState::Memory charged_ ABSL_GUARDED_BY(mu_);
  std::vector<bandit::v1::JournalRecord*>* held_ ABSL_GUARDED_BY(mu_) = nullptr;
  google::protobuf::Arena* held_arena_ ABSL_GUARDED_BY(mu_) = nullptr;  // owns what held_ points to
};

}  // namespace bandit::server
