// The learning modes of an instance (InstanceConfig.learning_mode): ONLINE serves the policy's
// decisions; APPRENTICE and LOGGING_ONLY serve a baseline action (the first offered, or each
// slot's baseline_action) with propensity 1, APPRENTICE asking the policy for its own decision
// to estimate its value against the baseline's. What the modes add to an instance: the check of
// a mode against a policy, the baseline's decision, and the apprentice estimates.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "bandit/v1/service.pb.h"
#include "bandit/v1/storage.pb.h"
#include "core/ope/estimators.h"
#include "core/policy.h"
#include "server/instance/calls.h"
#include "server/instance/pending_table.h"

namespace bandit::server {

// Whether `policy` can run in learning mode `mode` (`field` names the setting in the error).
absl::Status CheckLearningMode(int mode, const Policy& policy, absl::string_view field);
// The config's mode, ONLINE when unspecified.
bandit::v1::LearningMode ModeOf(const bandit::v1::InstanceConfig& c);

// The served decision of a Select in APPRENTICE or LOGGING_ONLY mode: the baseline (the first
// action offered to `served`), propensity 1. In APPRENTICE, `policy` is the policy's own
// decision over the same actions: `p` gets its probability of the baseline and whether it chose
// it.
Decision BaselineDecision(const Policy& served, const SelectContext& ctx, const SelectInputs& in,
                          const Decision* policy, PendingDecision* p);
// The served decision of a slot in APPRENTICE or LOGGING_ONLY mode: the slot's baseline (the
// action at `baseline`, one of `offered`), propensity 1, as a position among `offered`. In
// APPRENTICE, `policy` is the policy's own decision among `offered`, as in BaselineDecision.
Decision SlotBaselineDecision(const std::vector<int>& offered, int baseline,
                              const Decision* policy, PendingDecision* p);

// APPRENTICE mode: the policy's value against the baseline's (Instance.apprentice), pooled and,
// for multi-slot decisions, per slot position (positions from kLastSlotPosition on counted in
// the last, as slot_positions). The baseline was served with propensity 1, so each event's
// importance weight is the policy's probability of the baseline (IPS, Horvitz & Thompson 1952,
// and SNIPS, core/ope/estimators.h, with mu(a_t|x_t) = 1).
class ApprenticeEstimates {
 public:
  // A reward (or expiry default) of `target` was learned; counted when `target` was decided in
  // APPRENTICE mode.
  void Count(const PendingDecision& target, double reward);
  // No event counted yet.
  bool empty() const { return pooled_.estimators.events() == 0; }
  void Clear() { *this = ApprenticeEstimates(); }
  void Save(bandit::v1::ApprenticeSnapshot* out) const;
  // From a snapshot; on error, a message that continues "apprentice" (": ...", ".slots[k] ...")
  // and nothing is guaranteed about this object.
  absl::Status Restore(const bandit::v1::ApprenticeSnapshot& in);
  void Describe(bandit::v1::ApprenticeStatus* out) const;

 private:
  struct Figures {
    ope::Estimators estimators;
    int64_t chose_baseline = 0;
    double imitated_reward = 0;
    void Count(const PendingDecision& target, double reward);
    void Save(bandit::v1::ApprenticeSnapshot* out) const;
    absl::Status Restore(const bandit::v1::ApprenticeSnapshot& in);
    void Describe(bandit::v1::ApprenticeStatus* out) const;
  };
  // `write(figures, message)` for the pooled figures into `out`, then for each slot position's
  // into an entry of out->slots with its position: the shape Save and Describe share.
  template <typename Message, typename Write>
  void WriteAll(Message* out, Write write) const;

  Figures pooled_;
  std::vector<Figures> slots_;  // index = slot position
};

}  // namespace bandit::server
