// Named inputs of an instance with a feature space (InstanceConfig.feature_space): a JSON context
// and actions with ids, turned into the hashed vectors its contextual policy decides over
// (core/features, Vowpal Wabbit's featurization). Used by the Select and Update paths alike,
// live and on replay, so a journaled named request replays to the same vectors.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "bandit/v1/service.pb.h"
#include "core/features/feature_space.h"
#include "core/policy.h"
#include "server/instance/calls.h"

namespace bandit::server {

// The featurization rules this server applies (FeatureSpaceConfig.version).
inline constexpr int32_t kFeaturizationVersion = 1;

// Whether a policy config keeps only vectors of its dimension: a diagonal or sketched form
// (LinUCB, GLB-OMD with covariance COVARIANCE_DIAGONAL or COVARIANCE_SKETCHED) or Vowpal Wabbit's
// learner (vw). Its state is O(dimension) and it takes sparse vectors, so the full-matrix bound
// on the dimension does not apply to it, `max_diagonal_feature_dim` does.
bool KeepsOnlyVectors(const bandit::v1::PolicyConfig& policy);

// Checks an instance config's feature space and fills its defaults: the version, and the
// policy's `dimension` (2^bits) when left 0. A vw policy's arguments state the feature space
// (-b, -q, --interactions, --cubic, --noconstant, --hash_seed, --ignore): it is set from them
// when the config has none, and one that disagrees is refused. INVALID_ARGUMENT when the policy has no dimension
// (it does not decide over candidate vectors), states another one, or 2^bits exceeds
// `max_feature_dim` (`max_diagonal_feature_dim` for a diagonal-covariance policy); or when the
// config was written by a newer featurization.
absl::Status NormalizeFeatureSpace(int64_t max_feature_dim, int64_t max_diagonal_feature_dim,
                                   bandit::v1::InstanceConfig* c);
// A vw policy's feature space from its arguments: set where the config has none; one that is
// set must agree (INVALID_ARGUMENT naming the field otherwise).
absl::Status FeatureSpaceFromVwArguments(bandit::v1::InstanceConfig* c);

// The feature space of a normalized config, or null without one.
absl::StatusOr<std::shared_ptr<const features::FeatureSpace>> FeatureSpaceOf(
    const bandit::v1::InstanceConfig& c);

// Whether a Select carries named inputs.
bool HasNamedInputs(const bandit::v1::SelectRequest& req);

// A named Select's candidates: one vector per action not excluded, in request order, dense
// (2^bits long) into `candidates`, or with `sparse` set as sparse vectors into `sparse`
// (`candidates` then left empty); `action_of[k]` is candidate k's position in req.actions.
// Every action is parsed and checked (ids present and unique, excluded ids known, at least one
// action left). With `audited_context` and `audited_actions` (for SelectRequest.explain) the
// documents are parsed with Vowpal Wabbit's audit names and kept there, the context and every
// action in request order.
absl::Status FeaturizeSelect(const features::FeatureSpace& space,
                             const features::InputLimits& limits, int64_t max_actions,
                             const bandit::v1::SelectRequest& req, std::vector<Vector>* candidates,
                             std::vector<int>* action_of,
                             std::vector<SparseVector>* sparse = nullptr,
                             features::ParsedFeatures* audited_context = nullptr,
                             std::vector<features::ParsedFeatures>* audited_actions = nullptr);

// Checks a named Select's actions (ids present and unique, excluded ids known); `ids` (optional)
// receives each action's id, `excluded` whether the request excludes it.
absl::Status CheckNamedActions(const bandit::v1::SelectRequest& req, int64_t max_actions,
                               std::vector<std::string>* ids, std::vector<bool>* excluded);

// A multi-slot named Select's vectors (`slots` checked, with each slot's allowed actions): for
// each slot and each action it may choose, the action with the context merged in, the slot's
// features and index added as Vowpal Wabbit's conditional contextual bandits do
// (FeatureSpace::ForSlots, SlotContexts), so an exported log trains the same in VW's
// ccb_explore_adf. The index is added as `slot_index` says (Policy::slot_index; per decision:
// when it has several slots or a featured first slot, which `multi_slot` receives). With
// `sparse` (a policy that takes sparse input) each slot's vectors are its sparse_candidates,
// never densified.
absl::Status FeaturizeSlots(const features::FeatureSpace& space,
                            const features::InputLimits& limits,
                            const bandit::v1::SelectRequest& req,
                            std::vector<SelectInputs::Slot>* slots,
                            bool sparse = false,
                            Policy::SlotIndex slot_index = Policy::SlotIndex::kPerDecision,
                            bool* multi_slot = nullptr);

// A direct Update's vector: the context merged into the action, as at Select.
absl::StatusOr<Vector> FeaturizeDirect(const features::FeatureSpace& space,
                                       const features::InputLimits& limits,
                                       const UpdateCall::Direct& direct);
// The same as a sparse vector (for a policy that takes sparse input).
absl::StatusOr<SparseVector> FeaturizeDirectSparse(const features::FeatureSpace& space,
                                                   const features::InputLimits& limits,
                                                   const UpdateCall::Direct& direct);

// The dense form of a sparse vector of the given dimension (repeated indices add up).
Vector Densify(const SparseVector& x, int64_t dimension);

// Fills a named decision: action_id, arm_index as the position in call.actions and, when scores
// were asked for, the ranking of every action (Personalizer's shape). `out` holds the policy's
// decision over the candidates (call.inputs.action_of).
void WriteNamedDecision(const SelectCall& call, bandit::v1::Decision* out);

// Fills out->explanation for SelectRequest.explain: the chosen action's features with the
// context merged in, interactions included (VW's audit names, from the documents as the call's
// translation parsed them), and the policy's weight at each index (`weight_of`,
// InstanceState::PolicyCoordinateWeights).
void ExplainChoice(const features::FeatureSpace& space, const SelectCall& call,
                   const std::function<double(uint32_t)>& weight_of, bandit::v1::Decision* out);

}  // namespace bandit::server
