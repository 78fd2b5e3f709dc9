#include "server/instance/instance_state.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/arms.h"
#include "core/common/sparse.h"
#include "core/registry.h"
#include "core/validate.h"
#include "server/instance/instance_state_internal.h"
#include "server/instance/named_inputs.h"


namespace bandit::server {
namespace {

std::string SlotList(const PendingDecision& event) {
  std::string out;
  for (const PendingDecision& s : event.slots) absl::StrAppend(&out, out.empty() ? "" : ", ", s.slot_id);
  return out;
}
}  // namespace

void InstanceState::RecordDecision(PendingDecision p, double estimated_gap) {
  pending_.Insert(std::move(p));
  stats_.set_rounds(SaturatingAdd(stats_.rounds(), 1));
  if (std::isfinite(estimated_gap))
    stats_.set_estimated_regret(stats_.estimated_regret() + estimated_gap);
}

absl::Status InstanceState::CheckSparseChoice(const bandit::v1::PendingDecisionRecord& r) const {
  for (const auto& slot : r.slots())
    if (auto s = CheckSparseChoice(slot); !s.ok()) return s;
  if (r.sparse_index_size() == 0 && r.sparse_value_size() == 0) return absl::OkStatus();
  if (feature_space_ == nullptr || r.features_size() > 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "pending decision '", r.event_id(),
        "' has a sparse choice, expected one only on an instance with a feature_space and no "
        "dense features"));
  SparseVector x{{r.sparse_index().begin(), r.sparse_index().end()},
                 {r.sparse_value().begin(), r.sparse_value().end()}};
  return CheckSparse(absl::StrCat("pending decision '", r.event_id(), "' sparse choice"), x,
                     feature_space_->dimension());
}

void InstanceState::DensifyAll(std::span<const SparseVector> xs, std::vector<Vector>* out) const {
  out->resize(xs.size());
  for (size_t j = 0; j < xs.size(); ++j) (*out)[j] = Densify(xs[j], feature_space_->dimension());
}

Observation InstanceState::PendingObservation(const PendingDecision& p) const {
  Observation obs;
  obs.arm = p.arm;
  obs.arm_id = p.arm_id;
  if (!p.sparse_index.empty()) {
    SparseVector x{p.sparse_index, p.sparse_value};
    if (policy_->TakesSparse())
      obs.sparse_features = std::move(x);
    else  // a policy promoted since: admitted for dense vectors of this dimension
      obs.features = Densify(x, feature_space_->dimension());
  } else {
    obs.features = p.features;
  }
  if (!p.learn_direct) {
    obs.memo = p.memo;
    return obs;
  }
  // Made by the policy served before a PromoteShadow: logged data for this one.
  obs.direct = true;
  obs.offered = p.offered;
  if (policy_->context_kind() == ContextKind::kNone) {
    const auto ids = policy_->ArmIds();
    auto it = std::find(ids.begin(), ids.end(), p.arm_id);
    if (it != ids.end()) obs.arm = static_cast<int>(it - ids.begin());
  }
  return obs;
}

absl::Status InstanceState::NotPendingError(absl::string_view event_id) const {
  switch (pending_.FateOf(event_id)) {
    case EventFate::kRewarded:
      return absl::FailedPreconditionError(
          absl::StrCat("event '", event_id, "' was already rewarded; a reward is applied once"));
    case EventFate::kExpired:
    case EventFate::kDropped:
      return absl::FailedPreconditionError(
          absl::StrCat("event '", event_id, "' expired after ", config_.pending().reward_wait_ms(),
                       " ms; late rewards are not learned"));
    case EventFate::kUnknown:
      break;
  }
  // The fate memory is bounded and not part of a snapshot, but every id this instance issued
  // (its uid, a number below next_seq_) that is not pending has finished: a copy loaded from a
  // snapshot taken after the reward (a retry whose first answer was lost in a hand-off or a
  // crash) must not call it unknown.
  uint64_t uid = 0, seq = 0;
  if (ParseEventId(event_id, &uid, &seq) && uid == uid_ && seq >= 1 && seq < next_seq_)
    return absl::FailedPreconditionError(absl::StrCat(
        "event '", event_id,
        "' is no longer pending: it was already rewarded or it expired (a reward is applied "
        "once; late rewards are not learned)"));
  return absl::NotFoundError(absl::StrCat("event '", event_id, "' is unknown to instance '", name_,
                                          "', expected an event_id returned by Select"));
}

PendingDecision* InstanceState::TargetOf(PendingDecision* event, absl::string_view slot_id) {
  if (event->slots.empty()) return event;
  for (PendingDecision& s : event->slots)
    if (s.slot_id == slot_id) return &s;
  return nullptr;
}

bool InstanceState::KeepsRewards(const PendingDecision& event) const {
  return event.awaiting_activation || SumsRewards(event);
}

absl::StatusOr<Observation> InstanceState::ObservationFor(const UpdateCall& call,
                                                          const PendingDecision** pending) const {
  Observation obs;
  obs.reward = call.reward;
  *pending = nullptr;
  if (call.target == UpdateCall::Target::kEvent) {
    const absl::string_view event_id = call.event_id;
    const absl::string_view slot_id = call.slot_id;
    const PendingDecision* p = pending_.Find(event_id);
    if (p == nullptr) return NotPendingError(event_id);
    const PendingDecision* target = p;
    if (!p->slots.empty()) {
      if (slot_id.empty())
        return absl::InvalidArgumentError(absl::StrCat(
            "slot_id is empty, expected one of the slots of multi-slot event '", event_id,
            "': ", SlotList(*p)));
      target = TargetOf(const_cast<PendingDecision*>(p), slot_id);
      if (target == nullptr)
        return absl::InvalidArgumentError(absl::StrCat("slot_id '", slot_id,
                                                       "' is not a slot of event '", event_id,
                                                       "', expected one of: ", SlotList(*p)));
      if (target->done)
        return absl::FailedPreconditionError(
            absl::StrCat("slot '", slot_id, "' of event '", event_id,
                         "' was already rewarded; a reward is applied once"));
    } else if (!slot_id.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("slot_id is '", slot_id, "', but event '",
                                                     event_id,
                                                     "' is a single decision (it has no slots)"));
    }
    if (KeepsRewards(*p)) {
      if (!SumsRewards(*p) && target->rewards > 0)
        return absl::FailedPreconditionError(absl::StrCat(
            "event '", event_id, "' already has a reward, kept until it is activated; a "
            "reward is applied once"));
      if (call.embedding.size() > 0 || call.fidelity.has_value())
        return absl::InvalidArgumentError(absl::StrCat(
            "embedding or fidelity is set for event '", event_id,
            "', whose reward is kept (deferred activation or SUM aggregation), expected a reward "
            "alone"));
    }
    *pending = target;
    Observation joined = PendingObservation(*target);
    joined.reward = call.reward;
    return joined;
  }
  if (call.target != UpdateCall::Target::kDirect)
    return absl::InvalidArgumentError(
        "target is not set, expected event_id (from Select) or direct (logged data)");
  const UpdateCall::Direct& direct = call.direct;
  obs.direct = true;
  switch (policy_->context_kind()) {
    case ContextKind::kNone: {
      if (direct.arm_id.empty())
        return absl::InvalidArgumentError(
            "direct.arm_id is empty, expected the arm that was played");
      obs.arm_id = std::string(direct.arm_id);
      const auto ids = policy_->ArmIds();
      auto it = std::find(ids.begin(), ids.end(), direct.arm_id);
      if (it == ids.end())
        return absl::NotFoundError(absl::StrCat("direct.arm_id '", direct.arm_id,
                                                "' is not an arm of instance '", name_, "'"));
      obs.arm = static_cast<int>(it - ids.begin());
      break;
    }
    case ContextKind::kCandidates: {
      if (direct.named() || feature_space_) {
        if (!feature_space_)
          return absl::InvalidArgumentError(
              "direct.context/action is set, expected direct.features: the instance has no "
              "feature_space");
        if (policy_->TakesSparse()) {
          auto v = FeaturizeDirectSparse(*feature_space_, limits_.named, direct);
          if (!v.ok()) return v.status();
          obs.sparse_features = *std::move(v);
          break;
        }
        auto v = FeaturizeDirect(*feature_space_, limits_.named, direct);
        if (!v.ok()) return v.status();
        obs.features = *std::move(v);
        break;
      }
      if (direct.features.empty())
        return absl::InvalidArgumentError(
            "direct.features is empty, expected the played arm's feature vector");
      auto v = ToVector("direct.features", direct.features, limits_.max_vector_size);
      if (!v.ok()) return v.status();
      obs.features = *std::move(v);
      break;
    }
    case ContextKind::kPoint: {
      if (direct.x.empty())
        return absl::InvalidArgumentError("direct.x is empty, expected the input vector");
      auto v = ToVector("direct.x", direct.x, limits_.max_vector_size);
      if (!v.ok()) return v.status();
      obs.features = *std::move(v);
      break;
    }
  }
  return obs;
}

absl::Status InstanceState::CheckTarget(const UpdateCall& call) const {
  const PendingDecision* pending = nullptr;
  return ObservationFor(call, &pending).status();
}

absl::Status InstanceState::Update(UpdateCall& call, int64_t now,
                                   bandit::v1::UpdateResponse* out) {
  if (call.target == UpdateCall::Target::kDirect &&
      ModeOf(config_) == bandit::v1::LOGGING_ONLY)
    return absl::FailedPreconditionError(absl::StrCat(
        "instance '", name_, "' is in LOGGING_ONLY mode and learns nothing, expected rewards of "
        "its decisions only (set the learning mode to ONLINE or APPRENTICE to learn logged data)"));
  const PendingDecision* pending = nullptr;
  auto obs = ObservationFor(call, &pending);
  if (!obs.ok()) {
    if (obs.status().code() == absl::StatusCode::kNotFound ||
        obs.status().code() == absl::StatusCode::kFailedPrecondition)
      stats_.set_rejected_rewards(SaturatingAdd(stats_.rejected_rewards(), 1));
    return obs.status();
  }
  // The caller journals the request.
  auto journal = [&] {
    out->set_updates(stats_.updates());
    return absl::OkStatus();
  };
  PendingDecision* event = nullptr;
  PendingDecision* target = nullptr;
  if (pending != nullptr) {
    event = pending_.FindMutable(call.event_id);
    target = TargetOf(event, call.slot_id);
    if (KeepsRewards(*event)) {
      // Learned when activated (EARLIEST) or when the wait ends (SUM).
      target->reward_sum += call.reward;
      ++target->rewards;
      return journal();
    }
  }
  // A request with neither field carries no sample: a mixture then refuses the update for its
  // missing embedding, any other policy never reads one.
  if (call.embedding.size() > 0 || call.fidelity.has_value()) {
    obs->sample.emplace();
    obs->sample->embedding = std::move(call.embedding);
    obs->sample->fidelity = call.fidelity;
  }
  // A decision made in LOGGING_ONLY mode is not learned by the policy (its reward still counts).
  if (target == nullptr || target->learning_mode != bandit::v1::LOGGING_ONLY)
    if (auto s = policy_->Update(*obs); !s.ok())
      return s;  // pending kept: a fixed reward may follow
  if (target != nullptr && !shadows_.empty())
    shadows_.Learn(*target, FeatureDimension(), call.reward, obs->sample);
  if (target != nullptr) {
    apprentice_.Count(*target, call.reward);
    CountSlot(target->slot_index, 0, 1, call.reward);
    FinishTarget(event, target, bandit::v1::OUTCOME_REWARDED, call.reward, now);
  }
  stats_.set_updates(SaturatingAdd(stats_.updates(), 1));
  stats_.set_reward_sum(stats_.reward_sum() + call.reward);
  if (call.best_expected_reward.has_value()) {
    const double chosen = call.expected_reward.value_or(call.reward);
    stats_.set_pseudo_regret(stats_.pseudo_regret() + *call.best_expected_reward - chosen);
  }
  return journal();
}

void InstanceState::FinishTarget(PendingDecision* event, PendingDecision* target,
                                 bandit::v1::DecisionOutcome outcome, double reward, int64_t now) {
  target->done = true;
  target->rewards = 0;
  target->reward_sum = 0;
  if (log_.enabled()) log_.SetOutcome(target->seq, outcome, reward, now);
  for (const PendingDecision& s : event->slots)
    if (!s.done) return;  // the event waits for its other slots
  const std::string id = event->event_id;  // Take moves the entry (and its id) out
  pending_.Take(id, EventFate::kRewarded);  // `event` and `target` are gone
}

absl::Status InstanceState::LearnPending(const PendingDecision& target, double reward) {
  Observation obs = PendingObservation(target);
  obs.reward = reward;
  if (target.learning_mode != bandit::v1::LOGGING_ONLY)
    if (auto s = policy_->Update(obs); !s.ok()) return s;
  // The shadows learn what the served policy learned (as bandit-ope does with the expiry
  // defaults of a log).
  if (!shadows_.empty())
    shadows_.Learn(target, FeatureDimension(), reward, std::nullopt);
  apprentice_.Count(target, reward);
  CountSlot(target.slot_index, 0, 1, reward);
  stats_.set_updates(SaturatingAdd(stats_.updates(), 1));
  stats_.set_reward_sum(stats_.reward_sum() + reward);
  return absl::OkStatus();
}

absl::Status InstanceState::Activate(absl::string_view event_id, int64_t now) {
  if (event_id.empty())
    return absl::InvalidArgumentError("event_id is empty, expected the event id of a decision");
  PendingDecision* event = pending_.FindMutable(event_id);
  if (event == nullptr) return NotPendingError(event_id);
  if (!event->awaiting_activation)
    return absl::InvalidArgumentError(absl::StrCat(
        "event '", event_id, "' is already active: it was activated before, or made "
        "without defer_activation"));
  event->awaiting_activation = false;
  stats_.set_activated(SaturatingAdd(stats_.activated(), 1));
  if (SumsRewards(*event)) return absl::OkStatus();
  // EARLIEST: the reward each slot kept is its first, learned now. One the policy cannot learn
  // is dropped (as Update would have refused it), and the slot waits for another.
  std::vector<PendingDecision*> kept;
  if (event->slots.empty()) {
    if (event->rewards > 0) kept.push_back(event);
  } else {
    for (PendingDecision& s : event->slots)
      if (!s.done && s.rewards > 0) kept.push_back(&s);
  }
  for (size_t i = 0; i < kept.size(); ++i) {
    PendingDecision* target = kept[i];
    const double reward = target->reward_sum;
    if (!LearnPending(*target, reward).ok()) {
      target->rewards = 0;
      target->reward_sum = 0;
      continue;
    }
    // The last target may finish the event (and free it): nothing is read after.
    FinishTarget(event, target, bandit::v1::OUTCOME_REWARDED, reward, now);
    if (pending_.Find(event_id) == nullptr) break;
  }
  return absl::OkStatus();
}

int64_t InstanceState::ExpireDue(int64_t now, bandit::v1::JournalRecord* rec) {
  auto due = pending_.TakeExpired(now);
  if (due.empty()) return 0;
  for (auto& e : due) {
    if (e.awaiting_activation) {
      // Never activated: nothing is learned, not even the rewards it kept.
      stats_.set_not_activated(SaturatingAdd(stats_.not_activated(), 1));
      pending_.RecordFate(e.event_id, EventFate::kDropped);
      if (log_.enabled()) {
        if (e.slots.empty()) log_.SetOutcome(e.seq, bandit::v1::OUTCOME_NOT_ACTIVATED, 0.0, now);
        for (const PendingDecision& s : e.slots)
          log_.SetOutcome(s.seq, bandit::v1::OUTCOME_NOT_ACTIVATED, 0.0, now);
      }
      continue;
    }
    // Each slot (or the decision) not yet learned: the sum of its rewards (SUM), else the
    // default reward, else nothing.
    EventFate fate = EventFate::kDropped;
    auto finish = [&](const PendingDecision& t) {
      if (t.done) return;
      bandit::v1::DecisionOutcome outcome = bandit::v1::OUTCOME_EXPIRED_DROPPED;
      double reward = 0.0;
      if (t.rewards > 0) {
        if (LearnPending(t, t.reward_sum).ok()) {
          outcome = bandit::v1::OUTCOME_REWARDED;
          reward = t.reward_sum;
          if (fate == EventFate::kDropped) fate = EventFate::kRewarded;
        }
      } else if (config_.pending().on_expiry() == bandit::v1::APPLY_DEFAULT) {
        // A default the policy cannot learn (e.g. outside the link's support) drops the event.
        if (LearnPending(t, config_.pending().default_reward()).ok()) {
          outcome = bandit::v1::OUTCOME_EXPIRED_DEFAULT;
          reward = config_.pending().default_reward();
          fate = EventFate::kExpired;
        }
      }
      if (log_.enabled()) log_.SetOutcome(t.seq, outcome, reward, now);
    };
    if (e.slots.empty()) {
      finish(e);
    } else {
      for (const PendingDecision& s : e.slots) finish(s);
    }
    pending_.RecordFate(e.event_id, fate);
  }
  stats_.set_expired(SaturatingAdd(stats_.expired(), static_cast<int64_t>(due.size())));
  rec->set_expire(true);
  return static_cast<int64_t>(due.size());
}

}  // namespace bandit::server
