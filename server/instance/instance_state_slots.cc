#include "server/instance/instance_state.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/arms.h"
#include "core/id_index.h"
#include "core/common/sparse.h"
#include "core/registry.h"
#include "server/instance/instance_state_internal.h"
#include "server/instance/named_inputs.h"

namespace bandit::server {

absl::Status InstanceState::SelectSlots(const SelectContext& ctx, const SelectCall& call,
                                        int64_t now, bandit::v1::Decision* out,
                                        bandit::v1::JournalRecord* rec,
                                        const std::string* replay_event_id) {
  const SelectInputs& in = call.inputs;
  const bool named = !call.actions.empty();
  // Over the instance's own arm set, each slot's policy call gets a mask of the arms it may
  // choose (SelectContext::allowed_arms) instead of candidate vectors.
  const bool arm_set = policy_->context_kind() == ContextKind::kNone;
  const std::vector<std::string> arm_ids =
      arm_set ? policy_->ArmIds() : std::vector<std::string>();
  const int n = static_cast<int>(in.slots[0].allowed.size());
  auto id_of = [&](int i) {
    return named ? std::string(call.actions[static_cast<size_t>(i)].id)
           : arm_set ? arm_ids[i]
                     : absl::StrCat(i);
  };
  // APPRENTICE and LOGGING_ONLY serve each slot's baseline action, as Personalizer does (its
  // multi-slot requests name one per slot). CheckSlots has made sure that a baseline is one of
  // the actions, not excluded for its slot and no other slot's, so no slot's baseline can be
  // taken by an earlier slot (which serves its own baseline).
  const bandit::v1::LearningMode mode = ModeOf(config_);
  if (mode != bandit::v1::ONLINE) {
    for (size_t k = 0; k < in.slots.size(); ++k)
      if (in.slots[k].baseline < 0)
        return absl::InvalidArgumentError(absl::StrCat(
            "slots[", k, "].baseline_action is empty, expected the action to serve for slot '",
            call.slots[k].id, "': instance '", name_, "' is in ",
            bandit::v1::LearningMode_Name(mode), " mode, which serves each slot's baseline"));
  }
  PendingDecision event;
  event.seq = next_seq_;
  event.event_id =
      call.event_id.empty() ? FormatEventId(uid_, event.seq) : std::string(call.event_id);
  if (replay_event_id && event.event_id != *replay_event_id)
    return absl::DataLossError(absl::StrCat("replay of instance '", name_, "' produced event '",
                                            event.event_id, "' where the journal has '",
                                            *replay_event_id, "'"));
  event.expires_at_ms = now + config_.pending().reward_wait_ms();
  event.awaiting_activation = call.defer_activation;
  event.learning_mode = mode;
  event.slots.reserve(in.slots.size());
  // The log keeps each slot's probability vector where the policy has one (the shadows ask for
  // it as in a single Select; asking changes no decision).
  SelectContext policy_ctx = ctx;
  policy_ctx.want_scores = ctx.want_scores || log_.enabled() || !shadows_.empty();
  // APPRENTICE: the policy decides each slot for its probability of the slot's baseline, which
  // needs its whole distribution (as in a single Select).
  if (mode == bandit::v1::APPRENTICE) {
    policy_ctx.want_scores = ScoreRequest::kScores;
  }
  std::vector<char> taken(n, 0);
  // Reused per thread: assigning a vector of the same length keeps its storage.
  thread_local std::vector<Vector> offered;
  // Named actions for a policy that takes sparse input: the slot's vectors stay sparse.
  const bool sparse = in.is_sparse;
  thread_local std::vector<SparseVector> offered_sparse;
  thread_local std::vector<Vector> offered_dense;  // for shadows that score dense vectors
  struct GiveBackLarge {  // as SelectInputs' scratch: beyond 2^20 doubles, freed after the call
    ~GiveBackLarge() {
      for (std::vector<Vector>* scratch : {&offered, &offered_dense}) {
        int64_t total = 0;
        for (const Vector& v : *scratch) total += v.size();
        if (total > (int64_t{1} << 20)) std::vector<Vector>().swap(*scratch);
      }
    }
  } give_back_large;
  std::vector<int> position;  // offered[j] is action position[j]
  std::vector<char> mask;     // arm set: the arms at `position`
  std::vector<std::string> offered_ids;  // arm set: their ids (for the log)
  double gap_sum = 0;
  bool any_gap = false;
  for (size_t k = 0; k < in.slots.size(); ++k) {
    const SelectInputs::Slot& slot = in.slots[k];
    const std::vector<Vector>& source = slot.candidates.empty() ? *in.candidates : slot.candidates;
    position.clear();
    for (int i = 0; i < n; ++i)
      if (slot.allowed[i] && !taken[i]) position.push_back(i);
    const int offered_count = static_cast<int>(position.size());
    std::span<const Vector> offered_now;
    if (arm_set) {
      mask.assign(n, 0);
      for (int i : position) mask[i] = 1;
      policy_ctx.allowed_arms = mask;
    } else if (sparse) {
      if (offered_sparse.size() < position.size()) offered_sparse.resize(position.size());
      for (size_t j = 0; j < position.size(); ++j)
        offered_sparse[j] = slot.sparse_candidates[position[j]];
      policy_ctx.sparse_candidates =
          std::span<const SparseVector>(offered_sparse.data(), position.size());
      if (shadows_.NeedsDense()) {
        // Within kMaxDenseDimension shadows score dense vectors (AddShadow admits them when
        // 2^bits is within --max_feature_dim); beyond it, the sparse ones.
        DensifyAll(policy_ctx.sparse_candidates, &offered_dense);
        offered_now = offered_dense;
      }
    } else {
      if (offered.size() < position.size()) offered.resize(position.size());
      for (size_t j = 0; j < position.size(); ++j) offered[j] = source[position[j]];
      offered_now = std::span<const Vector>(offered.data(), position.size());
      policy_ctx.candidates = offered_now;
    }
    // CheckSlots left every slot more actions than the slots before it can take.
    // LOGGING_ONLY: the policy is not asked (its state, random engine included, does not
    // change).
    absl::StatusOr<Decision> d = Decision();
    if (mode != bandit::v1::LOGGING_ONLY) d = policy_->Select(policy_ctx);
    if (!d.ok()) {
      // The first slot fails before anything changed; a later one sees vectors of the same
      // shapes, so its failure is a defect, reported as such (the earlier slots' draws stand).
      if (k == 0) return d.status();
      return absl::InternalError(absl::StrCat("slot ", k, " of a multi-slot Select failed after ",
                                              "the slots before it succeeded: ",
                                              d.status().message()));
    }
    if (arm_set && mode != bandit::v1::LOGGING_ONLY)
      *d = AmongOffered(*d, position);  // the arm as a position among the offered
    PendingDecision p;
    if (mode != bandit::v1::ONLINE)
      *d = SlotBaselineDecision(position, slot.baseline,
                                mode == bandit::v1::APPRENTICE ? &*d : nullptr, &p);
    const int chosen = position[d->arm];
    taken[chosen] = 1;
    p.learning_mode = mode;
    if (!arm_set) p.offered = offered_count;
    // The policy did not make the served decision: it learns the baseline's reward as logged
    // data.
    p.learn_direct = mode == bandit::v1::APPRENTICE;
    p.slot_id = std::string(call.slots[k].id);
    p.slot_index = static_cast<int>(k);
    if (arm_set && (log_.enabled() || !shadows_.empty())) {
      offered_ids.clear();
      for (int i : position) offered_ids.push_back(arm_ids[i]);
    }
    if (!shadows_.empty()) {
      // Each shadow chooses among the actions this slot was offered, as the served policy did:
      // its probabilities are conditional on the served choices of the slots before it.
      ope::LoggedContext logged;
      if (arm_set) {
        logged.arm_ids = &offered_ids;
      } else {
        logged.actions = offered_now;
        if (sparse) logged.sparse_actions = policy_ctx.sparse_candidates;
      }
      logged.num_actions = offered_count;
      p.shadow_scores.reserve(shadows_.size());
      shadows_.Score(logged, d->arm, d->propensity, &p.shadow_scores);
    }
    CountSlot(p.slot_index, /*decisions=*/1, /*updates=*/0, 0.0);
    p.seq = next_seq_++;
    p.arm = chosen;
    p.arm_id = id_of(chosen);
    if (sparse) {
      const SparseVector& chosen_vector = offered_sparse[d->arm];
      p.sparse_index = chosen_vector.index;
      p.sparse_value = chosen_vector.value;
      if (chosen_vector.size() == 0) {  // kept as one zero term, as a single decision's
        p.sparse_index = {0};
        p.sparse_value = {0.0};
      }
    } else if (!arm_set) {
      p.features = offered[d->arm];
    }
    p.memo = std::move(d->memo);
    if (std::isfinite(d->estimated_gap)) {
      gap_sum += d->estimated_gap;
      any_gap = true;
    }
    auto* s = out->add_slots();
    s->set_slot_id(p.slot_id);
    s->set_arm_index(chosen);
    s->set_action_id(p.arm_id);
    s->set_propensity(d->propensity);
    if (call.want_scores) {
      const bool probabilities = d->score_kind == bandit::v1::PROBABILITY &&
                                 d->scores.size() == static_cast<Eigen::Index>(offered_count);
      for (int j = 0; j < offered_count; ++j) {
        auto* r = s->add_ranking();
        r->set_id(id_of(position[j]));
        r->set_probability(probabilities ? d->scores[static_cast<Eigen::Index>(j)]
                                         : (j == d->arm ? 1.0 : 0.0));
      }
      // The chosen action first, then by probability (Personalizer's ranking).
      std::stable_sort(s->mutable_ranking()->begin(), s->mutable_ranking()->end(),
                       [&](const bandit::v1::RankedAction& a, const bandit::v1::RankedAction& b) {
                         if ((a.id() == p.arm_id) != (b.id() == p.arm_id))
                           return a.id() == p.arm_id;
                         return a.probability() > b.probability();
                       });
    }
    if (log_.enabled()) {
      DecisionLog::Context e;
      e.event_seq = p.seq;
      e.event_id = event.event_id;
      e.decided_at_ms = now;
      e.policy = policy_->name();
      e.num_actions = offered_count;
      e.chosen_index = d->arm;
      e.chosen_arm_id = p.arm_id;
      LogDistribution(*d, offered_count, &e);
      if (!arm_set) {
        e.num_candidates = offered_count;
        e.candidate_dim = sparse               ? static_cast<int>(feature_space_->dimension())
                          : offered_now.empty() ? 0
                                                : static_cast<int>(offered_now[0].size());
      }
      if (arm_set) {
        e.arm_ids = offered_ids;
      } else if (named) {
        e.named = &call;
        e.named_actions = position;
      } else {
        e.candidates = offered_now;
      }
      e.slot = &call.slots[k];
      e.slot_index = static_cast<int>(k);
      e.slot_actions = position;
      e.baseline_index = slot.baseline;
      const int64_t dropped = log_.Append(e, now);
      stats_.set_decision_log_evicted(SaturatingAdd(stats_.decision_log_evicted(), dropped));
    }
    event.slots.push_back(std::move(p));
  }
  // A learner that keeps VW's multi-slot flag (--ccb_explore_adf) featurizes every later
  // decision with its slots' index once one had several slots or a featured first slot.
  if (in.multi_slot_decision && mode != bandit::v1::LOGGING_ONLY) policy_->SawMultiSlotDecision();
  // The decision's own fields describe its first slot.
  const bandit::v1::SlotDecision& first = out->slots(0);
  out->set_event_id(event.event_id);
  out->set_arm_index(first.arm_index());
  out->set_action_id(first.action_id());
  if (!named) out->set_arm_id(first.action_id());
  out->set_propensity(first.propensity());
  out->set_expires_at_ms(event.expires_at_ms);
  // Replayed from the request, which the caller journals with this event id.
  rec->set_event_id(event.event_id);
  RecordDecision(std::move(event), any_gap ? gap_sum : std::numeric_limits<double>::quiet_NaN());
  return absl::OkStatus();
}

std::vector<std::string> InstanceState::OfferedArmIds(const std::vector<int>& offered) const {
  std::vector<std::string> ids = policy_->ArmIds();
  if (offered.empty()) return ids;
  std::vector<std::string> out;
  out.reserve(offered.size());
  for (int slot : offered) out.push_back(std::move(ids[static_cast<size_t>(slot)]));
  return out;
}

Decision InstanceState::AmongOffered(const Decision& d, const std::vector<int>& offered) {
  Decision out = d;
  const auto n = static_cast<Eigen::Index>(offered.size());
  out.arm = static_cast<int>(std::find(offered.begin(), offered.end(), d.arm) - offered.begin());
  auto restrict = [&](const Vector& v) {
    Vector r(n);
    for (Eigen::Index j = 0; j < n; ++j) r[j] = v[offered[static_cast<size_t>(j)]];
    return r;
  };
  if (d.scores.size() > 0) out.scores = restrict(d.scores);
  if (const ArgmaxPosteriors* posteriors = d.argmax_posteriors()) {
    out.argmax_posteriors()->first = restrict(posteriors->first);
    out.argmax_posteriors()->second = restrict(posteriors->second);
  }
  return out;
}

void InstanceState::CountSlot(int position, int64_t decisions, int64_t updates, double reward) {
  if (position < 0) return;  // a single decision
  position = std::min(position, kLastSlotPosition);
  auto& positions = *stats_.mutable_slot_positions();
  while (positions.size() <= position) {
    const int next = positions.size();
    positions.Add()->set_position(next);
  }
  bandit::v1::SlotPositionStats& s = positions[position];
  s.set_decisions(SaturatingAdd(s.decisions(), decisions));
  s.set_updates(SaturatingAdd(s.updates(), updates));
  s.set_reward_sum(s.reward_sum() + reward);
}

}  // namespace bandit::server
