// What one bandit instance has learned and is waiting for: its config, its policy, its pending
// decisions and its counters. Pure: no lock, no clock, no storage. The caller
// (server/instance/instance.h) serializes access, supplies the time and makes each change durable.
//
// Every change validates before it changes anything (on error nothing has changed) and then
// describes itself as a journal record: replaying that record through the same method
// reproduces the change exactly, which is how recovery works.
#pragma once

#include <cstdint>
#include <limits>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bandit/v1/service.pb.h"
#include "bandit/v1/storage.pb.h"
#include "core/features/feature_space.h"
#include "core/policy.h"
#include "server/instance/calls.h"
#include "server/instance/instance_limits.h"
#include "server/instance/learning_modes.h"
#include "server/instance/decision_log/decision_log.h"
#include "server/instance/pending_table.h"
#include "server/instance/shadows.h"

namespace bandit::server {

// Fills the defaults of an instance config (pending capacity, reward wait, expiry action, seed
// from the name) and checks it against `limits`: sizes anywhere in the policy config, ranges of
// everything outside it. instance_config.cc.
absl::Status NormalizeConfig(const std::string& name, const InstanceLimits& limits,
                             bandit::v1::InstanceConfig* c);
// An automatic optimization's settings (`field` names them in errors): a frequency of 1 minute
// to 365 days, a start time, the decision log on (FAILED_PRECONDITION). instance_config.cc.
absl::Status CheckAutoOptimization(const bandit::v1::AutoOptimization& a,
                                   const bandit::v1::DecisionLogConfig& log,
                                   absl::string_view field);
// `current` (an instance's normalized config) with `policy` in its place, normalized as a
// created instance's would be (the feature space from the policy's arguments, which may differ
// from `current`'s: InstanceState::ReplacePolicy). FAILED_PRECONDITION when one of the two has a
// feature space and the other none. instance_config.cc.
absl::StatusOr<bandit::v1::InstanceConfig> ConfigWithPolicy(
    const std::string& name, const InstanceLimits& limits,
    const bandit::v1::InstanceConfig& current, const bandit::v1::PolicyConfig& policy);
// Integer (and repeated message) fields reachable from PolicyConfig that instance_config.cc
// does not classify as a size or not a size; must be empty (a test checks it).
std::vector<std::string> UnclassifiedPolicyConfigFields();

class InstanceState {
 public:
  // Validates the name and config, fills defaults, creates the policy. `uid` is the event-id
  // prefix (makes event ids unique across instances and restarts).
  static absl::StatusOr<std::unique_ptr<InstanceState>> Create(
      const std::string& name, const bandit::v1::InstanceConfig* config,
      const InstanceLimits& limits, uint64_t uid);
  // Rebuilds the state exactly as it was when `snap` was taken (recovery, import).
  static absl::StatusOr<std::unique_ptr<InstanceState>> FromSnapshot(
      const bandit::v1::InstanceSnapshot& snap, const InstanceLimits& limits);
  // The same, consuming `snap`: each pending decision's record is freed once the decision is
  // held, and the log's once the log is (recovery of an instance near the memory budget holds
  // its snapshot and its state side by side only a record at a time).
  static absl::StatusOr<std::unique_ptr<InstanceState>> FromSnapshot(
      bandit::v1::InstanceSnapshot&& snap, const InstanceLimits& limits);
  // The complete state, except where it stands in the journal (the durable side adds that).
  // With `log`, the decision log is not decoded into snap->decision_log but shared as it is
  // held (cheap under the instance's lock; encoded or decoded later, outside it). With
  // `pending`, the pending decisions are encoded into it (InstanceSnapshot.pending's bytes)
  // instead of copied into snap->pending as messages.
  void Save(bandit::v1::InstanceSnapshot* snap,
            std::unique_ptr<DecisionLog::Frozen>* log = nullptr,
            EncodedFields* pending = nullptr) const;
  // The most a Save with `pending` and `log` holds beside the live state: the policy's and
  // shadows' state as messages, the config, and the pending decisions encoded.
  int64_t SaveTransientBytes() const;

  // A Select's vectors (server/instance/calls.h), as tests and replay name them.
  using SelectInputs = server::SelectInputs;
  // The served policy's multi-slot featurization state (what ParseSelect needs).
  Policy::SlotIndex SlotIndexState() const { return policy_->slot_index(); }
  // Whether named inputs reach the served policy as sparse vectors: the instance has a feature
  // space and its policy takes sparse input (the diagonal-covariance forms). Changes only when
  // the served policy does (PromoteShadow); SelectContextFor densifies sparse inputs parsed for
  // a policy since replaced.
  bool TakesSparseInputs() const { return feature_space_ != nullptr && policy_->TakesSparse(); }
  // The inputs of a Select journaled as its decision log entry (JournalRecord.logged_select:
  // a LoggedDecision without its outcome), for replay: its candidates, checked like a request's; and the
  // event id it produced. DATA_LOSS when the entry cannot be a Select's.
  static absl::Status LoggedSelectInputs(absl::string_view entry, const InstanceLimits& limits,
                                         SelectInputs* in, std::string* event_id);
  // Checks the call's inputs against the policy's context kind; changes nothing in the
  // instance. For an arm set, resolves the call's excluded arms and slots into its inputs (by
  // the arm ids).
  absl::StatusOr<SelectContext> SelectContextFor(SelectCall& call) const;
  // For a served policy that splits its Select (Policy::PreparesSelect) and a one-slot call
  // over candidates: its read-only share, into `call.inputs.prepared`. Reads the state only, so
  // concurrent Selects run it under the instance's shared lock.
  void PrepareSelect(SelectCall& call) const;
  bool PreparesSelect() const { return policy_->PreparesSelect(); }
  // Decides and records the pending decision. `replay_event_id` is set on replay: the decision
  // must reproduce the journaled event id. `rec` receives the record that replays it: the
  // decision alone (a read-only policy), or with the decision log on a per-thread copy of the
  // log entry (see Instance::Commit, which hands it back); otherwise only the event id, and the
  // caller journals the request the call was translated from (SelectCall::request).
  absl::Status Select(const SelectContext& ctx, const SelectCall& call, int64_t now,
                      bandit::v1::Decision* out, bandit::v1::JournalRecord* rec,
                      const std::string* replay_event_id);
  // Activates a decision made with defer_activation (ApplyChange, live and on replay): from now
  // on it is learned from; rewards it received before are learned now (EARLIEST) or with the
  // others when its wait ends (SUM). NOT_FOUND for an unknown event, FAILED_PRECONDITION for
  // one no longer pending, INVALID_ARGUMENT for one already active.
  absl::Status Activate(absl::string_view event_id, int64_t now);
  // Replay of a DecidedSelect record (a Select of a read-only policy, journaled by outcome).
  absl::Status ReplayDecided(const bandit::v1::DecidedSelect& rec);

  // Whether an Update's target can take it now: the status Update would return before changing
  // anything (unknown event or slot, a finished one, a target that keeps no embedding). Changes
  // nothing.
  absl::Status CheckTarget(const UpdateCall& call) const;
  // Joins the reward to its decision (or takes logged data) and learns at `now` (the time the
  // decision log records for the outcome); the call's embedding is moved into what the policy
  // learns. The caller journals the request the call was translated from (UpdateCall::request).
  absl::Status Update(UpdateCall& call, int64_t now, bandit::v1::UpdateResponse* out);
  // Applies the expiry action to every decision whose wait has passed at `now`; returns how many
  // (and, when any, sets `rec` to the expiry record).
  int64_t ExpireDue(int64_t now, bandit::v1::JournalRecord* rec);

  // The changes other than decisions and rewards, each applied by its one definition
  // (server/instance/instance_operations.h: ApplyChange, for the live path and replay alike).
  absl::Status Reset();
  // The server's limits on an AddArms or RemoveArms it is asked for (arms per request,
  // INVALID_ARGUMENT; arms an instance holds, RESOURCE_EXHAUSTED); changes nothing. Not checked
  // on replay: what the server once accepted is applied whatever its limits are now.
  absl::Status AdmitArms(const ArmSpecs& arms) const;
  absl::Status AdmitArmRemoval(const ArmIds& arm_ids) const;
  // All-or-nothing: either every arm is added/removed or none is.
  absl::Status AddArms(const ArmSpecs& arms);
  absl::Status RemoveArms(const ArmIds& arm_ids);
  // A new configuration, keeping what was learned (Policy::Reconfigure): validated once, by
  // the policy's factory; on error nothing changed. The config changes below go through it.
  absl::Status ApplyConfig(bandit::v1::InstanceConfig next);
  // The settings that may change live (ConfigureInstance): each field set replaces the
  // config's, all validated before anything changes. Decisions already pending keep their
  // deadline, their reward aggregation and the learning mode they were made under.
  absl::Status Configure(const LiveSettings& settings);
  // Mixture instances (FD, KD): replaces the reference distribution; learned state is kept.
  absl::Status SetMixtureReference(const MixtureReference& reference);
  // Shadow policies (server/instance/shadows.h). AddShadow validates against the served policy and
  // config; PromoteShadow makes the shadow the served policy with what it learned (the policy
  // served until then is dropped) and the decisions still pending are then learned by it as
  // logged data. On error nothing changed. RESOURCE_EXHAUSTED when the instance already has
  // `max_shadows` shadows. AddShadow completes `config` (seed, arms) so that the record
  // journaled replays into the same shadow.
  absl::Status AddShadow(const std::string& shadow, bandit::v1::ShadowConfig* config,
                         int64_t max_shadows);
  absl::Status RemoveShadow(const std::string& shadow);
  absl::Status PromoteShadow(const std::string& shadow);
  // SetLearningPolicy's apply: the policy config and its learned state become the served
  // policy (the config's seed kept); decisions still pending are learned by it as logged data.
  // FAILED_PRECONDITION when the policy's feature space is not the instance's (decisions made
  // were hashed into it); INVALID_ARGUMENT for a config or state the policy refuses. On error
  // nothing changed.
  absl::Status ReplacePolicy(const bandit::v1::ReplacePolicy& r);
  // Offline evaluations of the decision log (evaluation.proto; the jobs run in the service
  // layer): one created pending (ALREADY_EXISTS for an id the instance holds;
  // RESOURCE_EXHAUSTED past kMaxEvaluations, finished ones counting), one's job finished
  // (replaces the pending one with its id; nothing when it was deleted meanwhile), one deleted
  // (NOT_FOUND for an unknown id).
  static constexpr int kMaxEvaluations = 64;
  absl::Status CreateEvaluation(const bandit::v1::Evaluation& e);
  absl::Status FinishEvaluation(const bandit::v1::FinishEvaluation& f);
  absl::Status DeleteEvaluation(const std::string& id);
  const std::vector<bandit::v1::Evaluation>& evaluations() const { return evaluations_; }
  // The shadows with their running estimates (for metrics scrapes: reads only).
  void DescribeShadows(bandit::v1::Instance* out) const { shadows_.Describe(out); }
  // Most reference values (embeddings x dimension, or mean + covariance) an instance keeps.
  static constexpr int64_t kMaxReferenceValues = int64_t{1} << 22;

  void Describe(bandit::v1::Instance* out) const;
  // Counters and policy summary only (cheap; for metrics scrapes).
  bandit::v1::InstanceStats Stats(std::vector<std::pair<std::string, double>>* summary) const;

  const std::string& name() const { return name_; }
  uint64_t uid() const { return uid_; }
  // The decision log (empty and disabled unless config.decision_log.enabled).
  const DecisionLog& decision_log() const { return log_; }
  const bandit::v1::InstanceConfig& config() const { return config_; }
  // The served policy's weights over its features (empty when it has none).
  Vector PolicyWeights() const { return policy_->Weights(); }
  // The served policy's weight of each coordinate of its vector (explain): its CoordinateWeight,
  // or its Weights() where those are the vector's (2^bits entries); 0 where it has none.
  std::function<double(uint32_t)> PolicyCoordinateWeights() const;
  // The instance's feature space (null without one): its policy's (ReplacePolicy may change it).
  const std::shared_ptr<const features::FeatureSpace>& feature_space() const {
    return feature_space_;
  }

  // What the instance holds in memory, by kind, for the node's memory budget
  // (server/instance/memory_budget.h). Policy and shadows: their StateBytes(); pending: the pending
  // table's Bytes(); log: the decision log's MemoryBytes(); overhead: kInstanceOverheadBytes and
  // the config as held. With `refresh` every figure is recounted; without it the policy's and
  // the shadows' are recounted only where they can change in a round at constant cost (a
  // policy over candidates or a point input, whose StateBytes() reads sizes; an arm-set
  // policy's state changes size only with its arms, which `refresh` callers change).
  struct Memory {
    int64_t policy = 0, pending = 0, log = 0, shadows = 0, overhead = 0;
    int64_t total() const { return policy + pending + log + shadows + overhead; }
  };
  Memory MemoryBytes(bool refresh);
  // Memory of an instance outside the figures above: the Instance and InstanceState objects,
  // its counters, the registry's entry, its empty tables (docs/memory.md has the measurement).
  static constexpr int64_t kInstanceOverheadBytes = 4096;
  // The containers of an arm set of `arms` arms that StateBytes() (which counts the ids'
  // characters and the features) leaves out, in the served policy and in each arm-set shadow:
  // an id string each, and the id -> slot hash table at up to 16/7 slots per arm (its load
  // factor after a doubling). Counted in the overhead.
  static int64_t ArmContainerBytes(int64_t arms);
  // The footprint an instance of `name` and `config` declares before anything is built: its
  // normalized config's policy footprint (core/footprint.h) plus the overhead. The errors of
  // Create for a config that does not normalize or names no served policy.
  static absl::StatusOr<int64_t> DeclaredBytes(const std::string& name,
                                               const bandit::v1::InstanceConfig* config,
                                               const InstanceLimits& limits);
  // The same for an instance restored from `snap` (import): its config's, its shadows'
  // policies', and its pending decisions and decision log as they will be held.
  static absl::StatusOr<int64_t> DeclaredBytes(const bandit::v1::InstanceSnapshot& snap,
                                               const InstanceLimits& limits);
  // The most one more decision over `in` may add: its pending entry (the chosen candidate's
  // features in each slot, ids, memo) and, with a decision log, its entry (every candidate).
  int64_t NewDecisionBytes(const SelectInputs& in) const;
  // The memory the change `rec` (a JournalRecord of ApplyChange) may need beyond what the
  // instance holds, from configs only: AddArms the arms' share of every policy's footprint,
  // AddShadow the shadow's policy, Reset and SetMixtureReference a fresh policy (built before
  // the old one is dropped); 0 for the changes that only free.
  int64_t ChangeBytes(const bandit::v1::JournalRecord& rec) const;

  // Deterministic default seed of an instance: FNV-1a of its name.
  static uint64_t SeedFromName(const std::string& name);

 private:
  // FromSnapshot's one body; `consumed` (the same message as `snap`, or null) is emptied as
  // it is read.
  static absl::StatusOr<std::unique_ptr<InstanceState>> Restore(
      const bandit::v1::InstanceSnapshot& snap, const InstanceLimits& limits,
      bandit::v1::InstanceSnapshot* consumed);
  InstanceState(std::string name, bandit::v1::InstanceConfig config, std::unique_ptr<Policy> policy,
                const InstanceLimits& limits, uint64_t uid);

  // A multi-slot Select (Select with in.slots): the slots filled in order, each by the policy
  // over the actions still available to it.
  absl::Status SelectSlots(const SelectContext& ctx, const SelectCall& call, int64_t now,
                           bandit::v1::Decision* out, bandit::v1::JournalRecord* rec,
                           const std::string* replay_event_id);
  // Per slot position statistics (InstanceStats.slot_positions); nothing for position -1 (a
  // single decision).
  void CountSlot(int position, int64_t decisions, int64_t updates, double reward);
  // The ids of the arms at `offered` (slots, in arm order); every arm's when it is empty.
  std::vector<std::string> OfferedArmIds(const std::vector<int>& offered) const;
  // Decision `d` over the arm set as a decision among the arms at `offered`: its arm as a
  // position among them and its vectors restricted to them (what the log and shadows see).
  static Decision AmongOffered(const Decision& d, const std::vector<int>& offered);
  // The checks every new decision passes before the policy is asked: room in the pending table
  // and a free, well-formed caller-chosen event id.
  // `live`: a request (not a journal's replay), which may not reuse a finished decision's id.
  absl::Status CheckNewDecision(const SelectCall& call, bool live) const;
  // Learns `reward` for `target` (a pending decision or one of its slots) as the served policy
  // and the shadows do for a joined reward, and counts it; on error nothing changed.
  absl::Status LearnPending(const PendingDecision& target, double reward);
  // Whether a decision's rewards are added up until its wait ends (the aggregation it was made
  // under).
  bool SumsRewards(const PendingDecision& event) const;
  // What every Select leaves behind: the pending decision and the round counters.
  void RecordDecision(PendingDecision p, double estimated_gap);
  // Logs a decision just made; returns how many old ones retention dropped.
  int64_t AppendToLog(const Decision& d, const SelectContext& ctx, const SelectCall& call,
                      const std::string& event_id, uint64_t seq, int64_t now);
  // Whether the log entry of a Select over `ctx` can stand in for its request in the journal: a
  // policy over candidates, all of one length (the entry holds them flat). The caller checks
  // that the request did not ask for scores (the entry does not say).
  bool LogEntryHoldsTheCandidates(const SelectContext& ctx) const;
  // What the served policy learns for a pending decision's reward (or expiry default).
  Observation PendingObservation(const PendingDecision& p) const;
  // Sparse vectors of this instance's feature space as dense ones (`out` resized to match):
  // for shadows that score dense vectors, and for a dense policy promoted over sparse inputs.
  void DensifyAll(std::span<const SparseVector> xs, std::vector<Vector>* out) const;
  // The weight space of the feature space (2^bits), 0 without one.
  int64_t FeatureDimension() const {
    return feature_space_ != nullptr ? feature_space_->dimension() : 0;
  }
  // A stored pending decision's sparse choice (with its slots'): lengths equal, indices within
  // 2^bits, values finite, and only on an instance with a feature space. Before FromRecord.
  absl::Status CheckSparseChoice(const bandit::v1::PendingDecisionRecord& r) const;
  // After the served decision `d`: each shadow's view of the context (ShadowSet::Score).
  void ScoreShadows(const Decision& d, const SelectContext& ctx, const SelectInputs& in,
                    PendingDecision* p);
  // The answer to a reward or activation for an event that is not pending: FAILED_PRECONDITION
  // when it finished (rewarded, expired), NOT_FOUND when it was never this instance's.
  absl::Status NotPendingError(absl::string_view event_id) const;
  // The part of `event` a reward with `slot_id` is for: a slot (null if it has none of that id)
  // or, for a single decision, the event itself.
  static PendingDecision* TargetOf(PendingDecision* event, absl::string_view slot_id);
  // Whether rewards for `event` are kept rather than learned at once (awaiting activation, or
  // SUM aggregation).
  bool KeepsRewards(const PendingDecision& event) const;
  // `target` (of `event`) was learned: marks it done and logs its outcome; takes the event from
  // the pending table once every slot is done (after which both pointers are invalid).
  void FinishTarget(PendingDecision* event, PendingDecision* target,
                    bandit::v1::DecisionOutcome outcome, double reward, int64_t now);
  absl::StatusOr<Observation> ObservationFor(const UpdateCall& call,
                                             const PendingDecision** pending) const;
  void SyncConfigArms();
  void RollBack(const bandit::v1::PolicyConfig& config, const bandit::v1::PolicyState& state);

  const std::string name_;
  const InstanceLimits limits_;
  const uint64_t uid_;
  bandit::v1::InstanceConfig config_;  // arms kept current
  std::unique_ptr<Policy> policy_;
  std::vector<bandit::v1::Evaluation> evaluations_;  // oldest first
  std::shared_ptr<const features::FeatureSpace> feature_space_;
  PendingTable pending_;
  DecisionLog log_;
  ShadowSet shadows_;
  ApprenticeEstimates apprentice_;  // APPRENTICE mode's (learning_modes.h)
  uint64_t next_seq_ = 1;  // of event ids
  bandit::v1::InstanceStats stats_;
  Memory memory_;  // the last MemoryBytes()
};

}  // namespace bandit::server
