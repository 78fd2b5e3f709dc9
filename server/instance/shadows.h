// Shadow policies of one instance: named challenger configs that see every Select context,
// compute their own choice distribution (never served), learn from each joined reward, and
// estimate what they would have earned from the served policy's logged propensities, the same
// progressive off-policy evaluation bandit-ope runs over an exported log (core/ope/).
//
// At a Select each shadow gives pi(.|x_t) over the decision's actions (core/ope/target.h) and
// the direct model its predictions q(x_t, .); the pending decision keeps pi(a_t|x_t),
// sum_a pi(a|x_t) q(x_t, a), q(x_t, a_t) and the served propensity mu(a_t|x_t) (ShadowScore).
// When the reward r_t arrives (or the expiry default the served policy learns), the estimators
// add the event and the shadow and its direct model learn (x_t, a_t, r_t). Pure like
// InstanceState: no lock, no clock, no storage; InstanceState owns one and journals its changes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bandit/v1/service.pb.h"
#include "bandit/v1/storage.pb.h"
#include "core/ope/estimators.h"
#include "core/ope/sparse_direct_model.h"
#include "core/ope/target.h"
#include "core/policy.h"
#include "server/instance/pending_table.h"

namespace bandit::server {

struct Shadow {
  std::string name;
  uint32_t id = 0;                  // ShadowScore::shadow_id; never reused within an instance
  bandit::v1::ShadowConfig config;  // normalized
  std::unique_ptr<Policy> policy;
  ope::Estimators estimators;
  // Multi-slot decisions: one per slot position, index = position (kLastSlotPosition and later
  // in the last); empty until a slot's reward arrives.
  std::vector<ope::Estimators> slot_estimators;
  ope::DirectModel model;
  // Set on an instance whose named features hash into more than kMaxDenseDimension
  // coordinates: the shadow scores and learns the sparse vectors (its policy takes them) and
  // this diagonal ridge is its direct model, in place of `model` (the choice bandit-ope makes
  // for such a log).
  std::unique_ptr<ope::SparseDirectModel> sparse_model;
  int64_t unscored = 0;
  int64_t errors = 0;
  int64_t exact_distribution = 0;
  int64_t sampled_distribution = 0;
};

class ShadowSet {
 public:
  // The weight space beyond which the shadows of a named instance score sparse vectors: 0 when
  // they score dense ones (no feature space, or 2^bits within kMaxDenseDimension).
  static int64_t SparseDimension(const bandit::v1::InstanceConfig& instance_config);

  // Checks an AddShadow request against the instance (the served policy and its normalized
  // config) and `max_shadows`, fills the config's defaults (seed, arms, ridge_lambda) and builds
  // the shadow. Changes nothing: Insert adds what this returns.
  //   INVALID_ARGUMENT: a malformed name, a missing or invalid config, a policy of another
  //     context kind, feature dimension or arm set than the instance's, a policy that takes
  //     only dense vectors on an instance whose shadows score sparse ones.
  //   ALREADY_EXISTS: the name is taken. RESOURCE_EXHAUSTED: max_shadows reached.
  absl::StatusOr<Shadow> Prepare(
      const std::string& instance, const Policy& served,
      const bandit::v1::InstanceConfig& instance_config, const std::string& name,
      const bandit::v1::ShadowConfig& config,
      const std::function<absl::Status(bandit::v1::InstanceConfig*)>& normalize,
      int64_t max_shadows) const;
  void Insert(Shadow shadow);
  // NOT_FOUND naming the instance's shadows when there is no such shadow.
  absl::StatusOr<Shadow> Take(const std::string& instance, const std::string& name);
  absl::Status CheckExists(const std::string& instance, const std::string& name) const;

  bool empty() const { return shadows_.empty(); }
  // Some shadow scores dense candidate vectors (Score then needs LoggedContext::actions).
  bool NeedsDense() const {
    for (const Shadow& s : shadows_)
      if (s.sparse_model == nullptr) return true;
    return false;
  }
  // Every shadow's Select only reads its state (Policy::SelectReadsOnly): a Select's scores
  // then let replay rebuild it without running the shadows.
  bool AllSelectReadsOnly() const {
    for (const Shadow& s : shadows_)
      if (!s.policy->SelectReadsOnly()) return false;
    return true;
  }
  size_t size() const { return shadows_.size(); }
  const std::vector<Shadow>& shadows() const { return shadows_; }

  // After the served decision: each shadow's view of this context, appended to `out`.
  // `served` is the served decision (action index and propensity); decisions without a usable
  // propensity are not scored. Candidates: `ctx` holds the sparse vectors for the shadows with
  // a sparse model, the dense ones (actions) for the others.
  void Score(const ope::LoggedContext& ctx, int served_action, double served_propensity,
             std::vector<ShadowScore>* out);
  // The reward of a decision the served policy learned: every shadow that scored it adds the
  // event to its estimates (and, for a slot of a multi-slot decision, to its slot position's),
  // then it and its direct model learn (x_t, a_t, r_t). `sample` is
  // the Update's generated sample (mixture policies). A sparse choice (the pending decision's
  // sparse_index/value) is densified to `dimension` for the shadows that take dense vectors.
  void Learn(const PendingDecision& p, int64_t dimension, double reward,
             const std::optional<GeneratedSample>& sample);
  // Arm-set instances: the instance's arm changes, on every shadow (policy and config). All or
  // nothing: on error every shadow is as before.
  absl::Status AddArms(const google::protobuf::RepeatedPtrField<bandit::v1::ArmSpec>& arms);
  absl::Status RemoveArms(const google::protobuf::RepeatedPtrField<std::string>& arm_ids);
  // Every shadow restarts: a fresh policy from its config, empty estimates.
  absl::Status Reset();

  void Save(bandit::v1::InstanceSnapshot* snap) const;
  // The snapshot's shadows, each with the direct model SparseDimension(snap.config()) calls for.
  absl::Status Restore(const bandit::v1::InstanceSnapshot& snap);
  void Describe(bandit::v1::Instance* out) const;
  int64_t StateBytes() const;
  uint32_t next_id() const { return next_id_; }

 private:
  template <typename Change>
  absl::Status ChangeArms(Change&& change);
  // What one shadow holds: its policy's state, its direct model, its slot positions' estimators.
  static int64_t Bytes(const Shadow& s);

  std::vector<Shadow> shadows_;
  uint32_t next_id_ = 1;
};

// Estimate <- the estimator's interval.
void ToEstimate(const ope::Interval& in, bandit::v1::Estimate* out);

}  // namespace bandit::server
