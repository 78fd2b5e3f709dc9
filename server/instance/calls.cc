// The translation of Select and Update requests into the calls the instance state takes
// (server/instance/calls.h).
#include "server/instance/calls.h"

#include "absl/strings/str_cat.h"
#include "core/arms.h"
#include "core/id_index.h"
#include "server/instance/instance_state_internal.h"
#include "server/instance/named_inputs.h"

namespace bandit::server {
namespace {

absl::Status CheckOptionalFinite(absl::string_view field, bool has, double value) {
  if (has && !IsInputNumber(value))
    return absl::InvalidArgumentError(absl::StrCat(field, " is ", value, ", ", kInputNumberExpected));
  return absl::OkStatus();
}

}  // namespace

SelectInputs::SelectInputs() {
  // Candidate vectors are reused per thread: a 50-candidate Select otherwise costs 50 heap
  // allocations and frees. Scratch beyond kKeepDoubles is given back after the call.
  thread_local std::vector<Vector> scratch;
  thread_local std::vector<SparseVector> sparse_scratch;
  candidates = &scratch;
  sparse = &sparse_scratch;
}

SelectInputs::~SelectInputs() {
  constexpr int64_t kKeepDoubles = 1 << 20;
  int64_t total = 0;
  for (const auto& v : *candidates) total += v.size();
  if (total > kKeepDoubles) std::vector<Vector>().swap(*candidates);
  int64_t terms = 0;
  for (const auto& v : *sparse) terms += static_cast<int64_t>(v.size());
  if (terms > kKeepDoubles / 2) std::vector<SparseVector>().swap(*sparse);
}

absl::Status ParseSelect(const bandit::v1::SelectRequest& req, const InstanceLimits& limits,
                         const features::FeatureSpace* space, bool sparse,
                         Policy::SlotIndex slot_index, SelectCall* call) {
  // The request's own fields, once.
  call->request = &req;
  call->event_id = req.event_id();
  call->defer_activation = req.defer_activation();
  call->want_scores = req.return_scores();
  call->explain = req.explain();
  call->named = HasNamedInputs(req);
  call->context = req.context();
  call->actions.resize(static_cast<size_t>(req.actions_size()));
  for (int i = 0; i < req.actions_size(); ++i)
    call->actions[static_cast<size_t>(i)] = {req.actions(i).id(), req.actions(i).features()};
  call->excluded_actions.assign(req.excluded_actions().begin(), req.excluded_actions().end());
  call->slots.resize(static_cast<size_t>(req.slots_size()));
  for (int k = 0; k < req.slots_size(); ++k) {
    const bandit::v1::Slot& slot = req.slots(k);
    SlotRequest& out = call->slots[static_cast<size_t>(k)];
    out.id = slot.id();
    out.features = slot.features();
    out.baseline_action = slot.baseline_action();
    out.excluded_actions.assign(slot.excluded_actions().begin(), slot.excluded_actions().end());
  }
  call->audited_context.Clear();
  call->audited_actions.clear();
  SelectInputs* in = &call->inputs;
  in->action_of.clear();
  in->slot_index = slot_index;
  in->multi_slot_decision = false;
  in->slots.clear();
  in->is_sparse = false;
  // The sparse scratch keeps its vectors for FeaturizeSelect, which refills them in place (their
  // arrays keep their capacity: a Select of 50 actions would otherwise allocate, zero and free
  // 100 arrays); every other form, and a refused request, leaves it empty.
  struct EmptySparseUnlessRefilled {
    SelectInputs* in;
    bool refilled = false;
    ~EmptySparseUnlessRefilled() {
      if (!refilled) in->sparse->clear();
    }
  } empty_sparse{in};
  in->arm_set_slots = false;
  in->allowed_arms.clear();
  in->offered_arms.clear();
  // No actions of the request's own (at most excluded_actions, by arm id): a decision over the
  // instance's arm set, resolved under the lock (SelectContextFor).
  const bool arm_set_form = space == nullptr && req.actions_size() == 0 &&
                            req.context().empty() && req.candidates_size() == 0 &&
                            req.x_size() == 0 && !req.explain();
  if (req.slots_size() > 0) {
    if (req.x_size() > 0)
      return absl::InvalidArgumentError(
          "x is set with slots, expected named actions or candidates to fill the slots with");
    if (req.explain())
      return absl::InvalidArgumentError("explain is set with slots, expected one or the other");
    std::vector<std::string> ids;
    std::vector<bool> excluded;
    if (arm_set_form) {
      in->arm_set_slots = true;
      in->x.resize(0);
      in->candidates->clear();
      return absl::OkStatus();
    }
    if (call->named) {
      if (space == nullptr)
        return absl::InvalidArgumentError(
            "context, actions or excluded_actions is set (named inputs), expected candidates: "
            "the instance has no feature_space");
      if (auto s = CheckNamedActions(req, limits.max_candidates, &ids, &excluded); !s.ok())
        return s;
      if (auto s = CheckSlots(call->slots, ids, excluded, limits.max_candidates, &in->slots); !s.ok())
        return s;
      in->x.resize(0);
      in->candidates->clear();
      in->is_sparse = sparse;
      return FeaturizeSlots(*space, limits.named, req, &in->slots, sparse, slot_index,
                            &in->multi_slot_decision);
    }
    if (space != nullptr && req.candidates_size() > 0)
      return absl::InvalidArgumentError(
          "candidates is set, expected context and actions: the instance has a feature_space");
    if (req.candidates_size() > limits.max_candidates)
      return absl::InvalidArgumentError(absl::StrCat("candidates has ", req.candidates_size(),
                                                     " entries, expected at most ",
                                                     limits.max_candidates));
    for (int i = 0; i < req.candidates_size(); ++i) ids.push_back(absl::StrCat(i));
    excluded.assign(ids.size(), false);
    if (auto s = CheckSlots(call->slots, ids, excluded, limits.max_candidates, &in->slots); !s.ok())
      return s;
    // The candidates once; a slot with features of its own sees each candidate's vector with
    // them appended.
    in->candidates->resize(req.candidates_size());
    for (int i = 0; i < req.candidates_size(); ++i)
      if (auto s = CopyChecked(req.candidates(i).values(), limits.max_vector_size,
                               &(*in->candidates)[i],
                               [i] { return absl::StrCat("candidates[", i, "].values"); });
          !s.ok())
        return s;
    const int extra = req.slots(0).dense_features_size();
    Vector slot_features;
    for (int k = 0; k < req.slots_size(); ++k) {
      const auto& slot = req.slots(k);
      if (slot.dense_features_size() != extra)
        return absl::InvalidArgumentError(absl::StrCat(
            "slots[", k, "].dense_features has ", slot.dense_features_size(),
            " values, expected ", extra, " as slots[0] has (each slot's are appended to every "
            "candidate)"));
      if (auto s = CopyChecked(slot.dense_features(), limits.max_vector_size, &slot_features,
                               [k] { return absl::StrCat("slots[", k, "].dense_features"); });
          !s.ok())
        return s;
      if (extra == 0) continue;
      auto& out = in->slots[k];
      out.candidates.resize(req.candidates_size());
      for (int i = 0; i < req.candidates_size(); ++i) {
        const Vector& base = (*in->candidates)[i];
        if (!out.allowed[i]) continue;
        if (base.size() + extra > limits.max_vector_size)
          return absl::InvalidArgumentError(absl::StrCat(
              "candidates[", i, "] with slots[", k, "].dense_features has ", base.size() + extra,
              " values, expected at most ", limits.max_vector_size));
        Vector& v = out.candidates[i];
        v.resize(base.size() + extra);
        v.head(base.size()) = base;
        v.tail(extra) = slot_features;
      }
    }
    in->x.resize(0);
    return absl::OkStatus();
  }
  if (call->named && !arm_set_form && slot_index != Policy::SlotIndex::kPerDecision)
    return absl::InvalidArgumentError(
        "slots is empty, expected the decision's slots: the instance's learner is Vowpal "
        "Wabbit's --ccb_explore_adf, which decides slots (one slot for a single decision)");
  if (call->named && !arm_set_form) {
    if (space == nullptr)
      return absl::InvalidArgumentError(
          "context, actions, excluded_actions or explain is set (named inputs), expected "
          "candidates: the instance has no feature_space (create it with config.feature_space "
          "to send named features)");
    in->x.resize(0);
    in->is_sparse = sparse;
    absl::Status s = FeaturizeSelect(*space, limits.named, limits.max_candidates, req,
                                     in->candidates, &in->action_of,
                                     sparse ? in->sparse : nullptr,
                                     call->explain ? &call->audited_context : nullptr,
                                     call->explain ? &call->audited_actions : nullptr);
    empty_sparse.refilled = sparse && s.ok();
    return s;
  }
  if (space != nullptr && req.candidates_size() > 0)
    return absl::InvalidArgumentError(
        "candidates is set, expected context and actions: the instance has a feature_space "
        "(named features hashed into 2^bits)");
  if (req.candidates_size() > limits.max_candidates)
    return absl::InvalidArgumentError(absl::StrCat("candidates has ", req.candidates_size(),
                                                   " entries, expected at most ",
                                                   limits.max_candidates));
  in->candidates->resize(req.candidates_size());
  for (int i = 0; i < req.candidates_size(); ++i)
    if (auto s =
            CopyChecked(req.candidates(i).values(), limits.max_vector_size, &(*in->candidates)[i],
                        [i] { return absl::StrCat("candidates[", i, "].values"); });
        !s.ok())
      return s;
  return CopyChecked(req.x(), limits.max_vector_size, &in->x, [] { return "x"; });
}


absl::Status CheckSlots(std::span<const SlotRequest> requested,
                        const std::vector<std::string>& ids, const std::vector<bool>& excluded,
                        int64_t max_candidates, std::vector<SelectInputs::Slot>* slots) {
  // Named as the unknown-id errors name it: a dense candidate has no id but its position.
  constexpr absl::string_view kAmongActions =
      "the actions (a dense candidate's id is its position)";
  const int n = static_cast<int>(ids.size());
  if (static_cast<int>(requested.size()) > n)
    return absl::InvalidArgumentError(absl::StrCat(
        "slots has ", static_cast<int>(requested.size()), " entries, expected at most ", n,
        " (one action per slot, and the request has ", n, " actions)"));
  if (static_cast<int64_t>(requested.size()) * n > max_candidates)
    return absl::InvalidArgumentError(absl::StrCat(
        "slots x actions is ", static_cast<int>(requested.size()), " x ", n, ", expected at most ", max_candidates,
        " (--max_candidates: each slot sees every action)"));
  const IdIndex position = IdIndex::OfDistinct(ids);
  IdIndex slot_of(static_cast<int>(requested.size()));
  std::vector<int> baseline_of(n, -1);
  slots->resize(static_cast<int>(requested.size()));
  for (int k = 0; k < static_cast<int>(requested.size()); ++k) {
    const SlotRequest& slot = requested[static_cast<size_t>(k)];
    const std::string field = absl::StrCat("slots[", k, "]");
    if (auto s = CheckId(field + ".id", slot.id); !s.ok()) return s;
    if (auto s = slot_of.Append(slot.id,
                                [](int i) { return absl::StrCat("slots[", i, "].id"); });
        !s.ok())
      return s;
    auto& out = (*slots)[k];
    out.allowed.assign(n, 1);
    for (int i = 0; i < n; ++i)
      if (excluded[i]) out.allowed[i] = 0;
    for (int j = 0; j < static_cast<int>(slot.excluded_actions.size()); ++j) {
      auto at = position.Position(absl::StrCat(field, ".excluded_actions[", j, "]"),
                                  slot.excluded_actions[static_cast<size_t>(j)], kAmongActions);
      if (!at.ok()) return at.status();
      out.allowed[*at] = 0;
    }
    out.baseline = -1;
    if (!slot.baseline_action.empty()) {
      auto found = position.Position(absl::StrCat(field, ".baseline_action"),
                                     slot.baseline_action, kAmongActions);
      if (!found.ok()) return found.status();
      const int at = *found;
      if (!out.allowed[at])
        return absl::InvalidArgumentError(absl::StrCat(field, ".baseline_action '",
                                                       slot.baseline_action,
                                                       "' is excluded for that slot"));
      if (baseline_of[at] >= 0)
        return absl::InvalidArgumentError(absl::StrCat(
            field, ".baseline_action '", slot.baseline_action, "' is also slots[",
            baseline_of[at], "]'s baseline, expected a different one per slot"));
      baseline_of[at] = k;
      out.baseline = at;
    }
    int allowed = 0;
    for (char a : out.allowed) allowed += a;
    if (allowed <= k)
      return absl::InvalidArgumentError(absl::StrCat(
          field, " may choose among ", allowed, " actions, expected more than ", k,
          " (the ", k, " slots before it each take one, and exclusions leave it ", allowed, ")"));
  }
  return absl::OkStatus();
}


absl::Status ParseUpdate(const bandit::v1::UpdateRequest& req, const InstanceLimits& limits,
                         UpdateCall* call) {
  call->request = &req;
  if (auto s = CheckOptionalFinite("reward", true, req.reward()); !s.ok()) return s;
  if (auto s = CheckOptionalFinite("best_expected_reward", req.has_best_expected_reward(),
                                   req.best_expected_reward());
      !s.ok())
    return s;
  if (auto s =
          CheckOptionalFinite("expected_reward", req.has_expected_reward(), req.expected_reward());
      !s.ok())
    return s;
  if (req.has_fidelity() && !(req.fidelity() >= 0.0 && req.fidelity() <= 1.0))
    return absl::InvalidArgumentError(
        absl::StrCat("fidelity is ", req.fidelity(), ", expected a number in [0, 1]"));
  if (auto s = CopyChecked(req.embedding(), limits.max_vector_size, &call->embedding,
                           [] { return "embedding"; });
      !s.ok())
    return s;
  call->reward = req.reward();
  call->best_expected_reward.reset();
  call->expected_reward.reset();
  call->fidelity.reset();
  if (req.has_best_expected_reward()) call->best_expected_reward = req.best_expected_reward();
  if (req.has_expected_reward()) call->expected_reward = req.expected_reward();
  if (req.has_fidelity()) call->fidelity = req.fidelity();
  call->event_id = {};
  call->slot_id = req.slot_id();
  call->direct = UpdateCall::Direct();
  switch (req.target_case()) {
    case bandit::v1::UpdateRequest::kEventId:
      call->target = UpdateCall::Target::kEvent;
      call->event_id = req.event_id();
      break;
    case bandit::v1::UpdateRequest::kDirect: {
      call->target = UpdateCall::Target::kDirect;
      const bandit::v1::DirectObservation& direct = req.direct();
      call->direct.arm_id = direct.arm_id();
      call->direct.features = std::span<const double>(direct.features().data(),
                                                      static_cast<size_t>(direct.features_size()));
      call->direct.x =
          std::span<const double>(direct.x().data(), static_cast<size_t>(direct.x_size()));
      call->direct.context = direct.context();
      call->direct.has_action = direct.has_action();
      call->direct.action_features = direct.action().features();
      break;
    }
    default:
      call->target = UpdateCall::Target::kNone;
      break;
  }
  return absl::OkStatus();
}

LiveSettings LiveSettingsOf(const bandit::v1::ConfigureInstanceRequest& req) {
  LiveSettings s;
  if (req.has_reward_wait_ms()) s.reward_wait_ms = req.reward_wait_ms();
  if (req.has_on_expiry()) s.on_expiry = req.on_expiry();
  if (req.has_default_reward()) s.default_reward = req.default_reward();
  if (req.has_reward_aggregation()) s.reward_aggregation = req.reward_aggregation();
  if (req.has_epsilon()) s.epsilon = req.epsilon();
  if (req.has_learning_mode()) s.learning_mode = req.learning_mode();
  if (req.has_auto_optimization()) s.auto_optimization = req.auto_optimization();
  return s;
}

MixtureReference MixtureReferenceOf(const bandit::v1::SetMixtureReferenceRequest& req) {
  MixtureReference r;
  r.mean = std::span<const double>(req.mean().data(), static_cast<size_t>(req.mean_size()));
  r.covariance =
      std::span<const double>(req.covariance().data(), static_cast<size_t>(req.covariance_size()));
  r.embeddings.reserve(static_cast<size_t>(req.embeddings_size()));
  for (const auto& e : req.embeddings())
    r.embeddings.emplace_back(e.values().data(), static_cast<size_t>(e.values_size()));
  r.append = req.append();
  return r;
}

}  // namespace bandit::server
