// The decisions and rewards as an instance's state takes them. A Select or Update request of the
// API (service.proto) is translated once, where it enters its instance (Instance, for a live
// call and for the journal record that replays it alike: the journal holds the request), into a
// SelectCall or an UpdateCall: its numbers checked, its vectors converted, its named JSON walked
// and hashed. InstanceState reads these, never the request.
//
// A call refers into the request it was made from (string views, spans), which outlives it; its
// `request` is that request, which only the commit path reads (a Select or Update journaled as
// its request borrows it, see Instance::Commit).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "bandit/v1/service.pb.h"
#include "core/features/feature_space.h"
#include "core/policy.h"
#include "server/instance/instance_limits.h"

namespace bandit::server {

// A named action of a Select: its id and its features (a JSON document), as sent.
struct NamedAction {
  absl::string_view id;
  absl::string_view features;
};

// One slot of a multi-slot Select, as asked for (the actions it may choose and its baseline are
// resolved into SelectInputs::Slot).
struct SlotRequest {
  absl::string_view id;
  absl::string_view features;  // JSON, for named actions
  absl::string_view baseline_action;
  std::vector<absl::string_view> excluded_actions;
};

// A Select's vectors, checked and converted (before the instance's lock: the critical section
// is what every concurrent caller of the instance waits for).
struct SelectInputs {
  SelectInputs();
  ~SelectInputs();
  SelectInputs(const SelectInputs&) = delete;
  SelectInputs& operator=(const SelectInputs&) = delete;
  std::vector<Vector>* candidates;  // per-thread scratch, reused across calls
  // Named actions featurized for a policy that takes sparse input (TakesSparseInputs): the
  // candidates as sparse vectors, `candidates` empty. Per-thread scratch too.
  std::vector<SparseVector>* sparse;
  bool is_sparse = false;
  Vector x;
  // Named actions: candidate k is SelectCall::actions[action_of[k]] (excluded actions have none).
  std::vector<int> action_of;
  // A multi-slot Select, per slot in the request's order: what each action (named action or
  // dense candidate, by position) looks like to the policy in that slot.
  struct Slot {
    // Per action (empty where the slot may not choose it); none at all when the slot sees
    // the request's own vectors (*SelectInputs::candidates: dense, no slot features).
    std::vector<Vector> candidates;
    // Named actions for a policy that takes sparse input (SelectInputs::is_sparse): the same
    // per action as sparse vectors, `candidates` empty.
    std::vector<SparseVector> sparse_candidates;
    std::vector<char> allowed;  // per action: not excluded for the request or the slot
    int baseline = -1;          // position of the slot's baseline action
  };
  std::vector<Slot> slots;
  // An instance over its own arm set: slots over its arms (filled by SelectContextFor under
  // the lock, since the arm set is the instance's), and the arms a decision may choose (not
  // in excluded_actions, per slot not taken) with their slots, in arm order.
  bool arm_set_slots = false;
  std::vector<char> allowed_arms;
  std::vector<int> offered_arms;
  // The served policy's read-only share of this Select, computed ahead under the instance's
  // shared lock (PrepareSelect), or null.
  std::unique_ptr<PreparedSelect> prepared;
  // Multi-slot featurization: the policy's slot-index state the slots were featurized for (a
  // Select re-parses under the lock when the policy's changed since), and whether the
  // decision has several slots or a featured first slot (Policy::SawMultiSlotDecision).
  Policy::SlotIndex slot_index = Policy::SlotIndex::kPerDecision;
  bool multi_slot_decision = false;
};

// A Select, translated.
struct SelectCall {
  // The caller's own event id (SelectRequest.event_id; checked by the state), or empty.
  absl::string_view event_id;
  bool defer_activation = false;
  bool want_scores = false;  // return_scores
  bool explain = false;
  // Named inputs (context, actions, excluded_actions or explain set).
  bool named = false;
  absl::string_view context;
  std::vector<NamedAction> actions;
  // By id: the named actions', or (no actions of the request's own) the arm set's.
  std::vector<absl::string_view> excluded_actions;
  std::vector<SlotRequest> slots;
  SelectInputs inputs;
  // With explain (a single named decision): the context and each action as parsed, with Vowpal
  // Wabbit's audit names, so the explanation needs no second parse.
  features::ParsedFeatures audited_context;
  std::vector<features::ParsedFeatures> audited_actions;
  // The request this call was translated from (null for one rebuilt from a decision log entry).
  const bandit::v1::SelectRequest* request = nullptr;
};

// The translation of `req` for an instance with these limits and feature space (null: none):
// named inputs become the candidates (sparse vectors with `sparse`, see
// InstanceState::TakesSparseInputs); without a feature space named inputs are refused, and with
// one dense candidates are. `slot_index`: the served policy's (Policy::slot_index); a policy that
// keeps the state decides named slots only. On error `call` holds nothing to use.
absl::Status ParseSelect(const bandit::v1::SelectRequest& req, const InstanceLimits& limits,
                         const features::FeatureSpace* space, bool sparse,
                         Policy::SlotIndex slot_index, SelectCall* call);

// A multi-slot Select's slots over `ids` (the actions' ids: named ids, or a dense candidate's
// position in decimal): each slot's allowed actions and baseline, checked so that every slot
// can be filled whatever the slots before it choose. `excluded` marks actions excluded for the
// whole request.
absl::Status CheckSlots(std::span<const SlotRequest> requested,
                        const std::vector<std::string>& ids, const std::vector<bool>& excluded,
                        int64_t max_candidates, std::vector<SelectInputs::Slot>* slots);

// An Update, translated: its numbers checked (finite, fidelity in [0, 1]) and its embedding
// converted; what it targets is resolved by the state (the pending decision, or the played
// action of logged data against the served policy's kind of input).
struct UpdateCall {
  double reward = 0;
  std::optional<double> best_expected_reward;
  std::optional<double> expected_reward;
  std::optional<double> fidelity;
  Vector embedding;
  enum class Target { kNone, kEvent, kDirect };
  Target target = Target::kNone;
  // kEvent: the decision (and for a multi-slot one, the slot) rewarded.
  absl::string_view event_id;
  absl::string_view slot_id;
  // kDirect (logged data): the played action as sent, in one of its forms.
  struct Direct {
    absl::string_view arm_id;
    std::span<const double> features;
    std::span<const double> x;
    absl::string_view context;  // JSON
    bool has_action = false;    // a named action, with its features (JSON)
    absl::string_view action_features;
    bool named() const { return has_action || !context.empty(); }
  } direct;
  // The request this call was translated from.
  const bandit::v1::UpdateRequest* request = nullptr;
};

absl::Status ParseUpdate(const bandit::v1::UpdateRequest& req, const InstanceLimits& limits,
                         UpdateCall* call);

// The changes other than decisions and rewards, as the state takes them: each is made from its
// journal record by ApplyChange (server/instance/instance_operations.cc), the one apply of the
// live path and replay. Most are a record's plain fields (an event id, a shadow's name, arm
// specs and ids); these two gather several.

// ConfigureInstance's settings: each one set replaces the config's.
struct LiveSettings {
  std::optional<int64_t> reward_wait_ms;
  std::optional<bandit::v1::ExpiryAction> on_expiry;
  std::optional<double> default_reward;
  std::optional<bandit::v1::RewardAggregation> reward_aggregation;
  std::optional<double> epsilon;
  std::optional<bandit::v1::LearningMode> learning_mode;
  std::optional<bandit::v1::AutoOptimization> auto_optimization;
  bool any() const {
    return reward_wait_ms || on_expiry || default_reward || reward_aggregation || epsilon ||
           learning_mode || auto_optimization;
  }
};
LiveSettings LiveSettingsOf(const bandit::v1::ConfigureInstanceRequest& req);

// SetMixtureReference's reference: a mean and covariance, or embeddings (appended to those held,
// or in their place).
struct MixtureReference {
  std::span<const double> mean;
  std::span<const double> covariance;
  std::vector<std::span<const double>> embeddings;
  bool append = false;
};
MixtureReference MixtureReferenceOf(const bandit::v1::SetMixtureReferenceRequest& req);

// Arms to add (AddArms) and arm ids (RemoveArms), as their records hold them.
using ArmSpecs = google::protobuf::RepeatedPtrField<bandit::v1::ArmSpec>;
using ArmIds = google::protobuf::RepeatedPtrField<std::string>;

}  // namespace bandit::server
