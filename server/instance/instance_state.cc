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
namespace {

// 2: shadows; 1 (before shadows) still loads.
constexpr uint32_t kSnapshotFormatVersion = 2;

// A caller-chosen event id (SelectRequest.event_id): safe in a URL path (Personalizer's reward
// route carries it), at most Personalizer's 256 characters, and never of the form the server
// makes ids in, so a server-made id can never collide with it and replay can tell them apart.
absl::Status CheckCallerEventId(const std::string& id) {
  constexpr size_t kMaxLength = 256;
  if (id.size() > kMaxLength)
    return absl::InvalidArgumentError(absl::StrCat("event_id has ", id.size(),
                                                   " characters, expected at most ", kMaxLength));
  for (size_t i = 0; i < id.size(); ++i) {
    const char c = id[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == ':' || c == '~' || c == '-';
    if (!ok)
      return absl::InvalidArgumentError(absl::StrCat(
          "event_id has character ", absl::CEscape(id.substr(i, 1)), " at position ", i,
          ", expected letters, digits and . _ : ~ -"));
  }
  uint64_t uid = 0, seq = 0;
  if (ParseEventId(id, &uid, &seq))
    return absl::InvalidArgumentError(absl::StrCat(
        "event_id '", id, "' has the form of a server-made id (16 hex digits, '-', hex digits), ",
        "expected an id of the caller's own (e.g. a UUID) or none"));
  return absl::OkStatus();
}

void WriteDecision(const Decision& d, const std::string& event_id, int64_t expires_at_ms,
                   bool with_scores, bandit::v1::Decision* out) {
  out->set_event_id(event_id);
  out->set_arm_index(d.arm);
  out->set_arm_id(d.arm_id);
  out->set_propensity(d.propensity);
  if (with_scores && d.scores.size() > 0) {
    out->mutable_scores()->Assign(d.scores.data(), d.scores.data() + d.scores.size());
    out->set_score_kind(d.score_kind);
  }
  if (auto f = d.prediction()) out->set_prediction(*f);
  for (const auto& [k, v] : d.diagnostics) (*out->mutable_diagnostics())[k] = v;
  out->set_expires_at_ms(expires_at_ms);
}

}  // namespace

namespace instance_state_internal {

// What the decision log keeps of decision `d` over `num_actions` actions: its propensity, and
// its probability vector, the posteriors that vector is a function of, or (a deterministic
// choice) the one-hot vector.
void LogDistribution(const Decision& d, int num_actions, DecisionLog::Context* e) {
  if (std::isfinite(d.propensity)) e->propensity = d.propensity;
  if (d.score_kind == bandit::v1::PROBABILITY && d.scores.size() == num_actions &&
      num_actions > 0) {
    e->probabilities = std::span<const double>(d.scores.data(), d.scores.size());
  } else if (const ArgmaxPosteriors* posteriors = d.argmax_posteriors();
             posteriors != nullptr && posteriors->first.size() == num_actions && num_actions > 0) {
    e->posteriors = posteriors;
  } else if (d.propensity == 1.0 && num_actions > 0 && d.arm >= 0 && d.arm < num_actions) {
    // A deterministic choice: every other action had probability 0.
    e->one_hot_actions = num_actions;
  }
}

// Counters restored from a snapshot may hold any value (a fuzzed one held INT64_MAX): they stop
// at the top instead of overflowing.
int64_t SaturatingAdd(int64_t a, int64_t b) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  return b > 0 && a > kMax - b ? kMax : a + b;
}

}  // namespace instance_state_internal

uint64_t InstanceState::SeedFromName(const std::string& name) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h == 0 ? 1 : h;
}

absl::StatusOr<std::unique_ptr<InstanceState>> InstanceState::Create(
    const std::string& name, const InstanceConfig* requested, const InstanceLimits& limits,
    uint64_t uid) {
  if (auto s = CheckId("name", name); !s.ok()) return s;
  if (static_cast<int64_t>(name.size()) > limits.max_name_length)
    return absl::InvalidArgumentError(absl::StrCat("name has ", name.size(),
                                                   " characters, expected at most ",
                                                   limits.max_name_length, " (--max_name_length)"));
  if (requested == nullptr)
    return absl::InvalidArgumentError(
        "config is missing, expected an InstanceConfig with a policy");
  InstanceConfig config = *requested;
  if (auto s = NormalizeConfig(name, limits, &config); !s.ok()) return s;
  auto space = FeatureSpaceOf(config);
  if (!space.ok()) return space.status();
  auto policy = CreatePolicy(config.policy(), config.seed());
  if (!policy.ok() && *space)
    return absl::Status(policy.status().code(),
                        absl::StrCat(policy.status().message(), " (the dimension is ",
                                     "2^feature_space.bits = ", (*space)->dimension(),
                                     ": use fewer bits)"));
  if (!policy.ok()) return policy.status();
  if (*space && (*policy)->context_kind() != ContextKind::kCandidates)
    return absl::InvalidArgumentError(absl::StrCat(
        "config.feature_space is set, expected a policy over candidate vectors; '",
        (*policy)->name(), "' is not (BKB and GP-UCB take candidates with a dimension and no arms)"));
  if (auto s = CheckLearningMode(config.learning_mode(), **policy, "config.learning_mode");
      !s.ok())
    return absl::InvalidArgumentError(s.message());
  std::unique_ptr<InstanceState> state(
      new InstanceState(name, std::move(config), *std::move(policy), limits, uid));
  state->feature_space_ = *std::move(space);
  state->SyncConfigArms();
  return state;
}

absl::StatusOr<std::unique_ptr<InstanceState>> InstanceState::FromSnapshot(
    const bandit::v1::InstanceSnapshot& snap, const InstanceLimits& limits) {
  return Restore(snap, limits, nullptr);
}

absl::StatusOr<std::unique_ptr<InstanceState>> InstanceState::FromSnapshot(
    bandit::v1::InstanceSnapshot&& snap, const InstanceLimits& limits) {
  return Restore(snap, limits, &snap);
}

absl::StatusOr<std::unique_ptr<InstanceState>> InstanceState::Restore(
    const bandit::v1::InstanceSnapshot& snap, const InstanceLimits& limits,
    bandit::v1::InstanceSnapshot* consumed) {
  if (snap.format_version() > kSnapshotFormatVersion)
    return absl::InvalidArgumentError(absl::StrCat(
        "snapshot of instance '", snap.name(), "' has format_version ", snap.format_version(),
        ", expected at most ", kSnapshotFormatVersion, " (written by a newer server?)"));
  auto created = Create(snap.name(), &snap.config(), limits, snap.uid() == 0 ? 1 : snap.uid());
  if (!created.ok()) return created.status();
  InstanceState& in = **created;
  if (auto s = in.policy_->Restore(snap.policy()); !s.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("snapshot of instance '", snap.name(), "': ", s.message()));
  {
    // Policies' Restore does not re-validate arm ids (core ArmSet::Restore); a state with
    // duplicate or malformed ids would make a config the next Create refuses (found by fuzzing).
    const std::vector<std::string> ids = in.policy_->ArmIds();
    absl::flat_hash_set<std::string> seen;
    for (const auto& id : ids) {
      if (auto s = CheckId("snapshot arm id", id); !s.ok()) return s;
      if (!seen.insert(id).second)
        return absl::InvalidArgumentError(
            absl::StrCat("snapshot of instance '", snap.name(), "' repeats arm id '", id, "'"));
    }
    // The config lists every arm with its spec (SyncConfigArms). When the arms carry features,
    // an arm of the state that the config does not list would be listed without them, and the
    // instance's next snapshot would not restore (found by fuzzing).
    const auto& arms = in.config_.policy().arms();
    if (std::any_of(arms.begin(), arms.end(), [](const auto& a) { return a.features_size(); })) {
      absl::flat_hash_set<std::string> listed;
      for (const auto& a : arms) listed.insert(a.id());
      for (const auto& id : ids)
        if (!listed.contains(id))
          return absl::InvalidArgumentError(absl::StrCat(
              "snapshot of instance '", snap.name(), "' has arm '", id,
              "' in its policy state but not in config.policy.arms, expected every arm listed "
              "with its features"));
    }
  }
  // Pending decisions go back in expiry order. A live instance can hold them out of order (the
  // wall clock stepped back, or an imported instance came from a server whose clock was ahead),
  // and its own snapshot must still restore, so sort instead of refusing (found by fuzzing).
  std::vector<const bandit::v1::PendingDecisionRecord*> pending;
  pending.reserve(snap.pending_size());
  for (const auto& p : snap.pending()) pending.push_back(&p);
  std::stable_sort(pending.begin(), pending.end(), [](const auto* a, const auto* b) {
    return a->expires_at_ms() < b->expires_at_ms();
  });
  for (const auto* p : pending) {
    if (auto s = in.CheckSparseChoice(*p); !s.ok())
      return absl::InvalidArgumentError(
          absl::StrCat("snapshot of instance '", snap.name(), "': ", s.message()));
    in.pending_.Insert(FromRecord(*p));
    // `p` is an element of `consumed`: emptied in place (its arrays freed), the order of the
    // pointers above unchanged.
    if (consumed != nullptr)
      bandit::v1::PendingDecisionRecord().Swap(const_cast<bandit::v1::PendingDecisionRecord*>(p));
  }
  // Swapped out, not cleared: a cleared repeated field keeps its elements' memory for reuse.
  if (consumed != nullptr)
    google::protobuf::RepeatedPtrField<bandit::v1::PendingDecisionRecord>().Swap(
        consumed->mutable_pending());
  if (auto s = in.log_.Restore(snap.decision_log()); !s.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("snapshot of instance '", snap.name(), "': ", s.message()));
  if (consumed != nullptr)
    google::protobuf::RepeatedPtrField<bandit::v1::LoggedDecision>().Swap(
        consumed->mutable_decision_log());
  // Format 1 has no shadows: the instance restores without any.
  if (auto s = in.shadows_.Restore(snap); !s.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("snapshot of instance '", snap.name(), "': ", s.message()));
  if (snap.has_apprentice())
    if (auto s = in.apprentice_.Restore(snap.apprentice()); !s.ok())
      return absl::InvalidArgumentError(
          absl::StrCat("snapshot of instance '", snap.name(), "' apprentice", s.message()));
  for (const auto& e : snap.evaluations())
    if (auto s = in.CreateEvaluation(e); !s.ok())
      return absl::InvalidArgumentError(
          absl::StrCat("snapshot of instance '", snap.name(), "': ", s.message()));
  in.stats_ = snap.stats();
  in.next_seq_ = std::max<uint64_t>(1, snap.next_event_seq());
  in.SyncConfigArms();
  return created;
}

void InstanceState::Save(bandit::v1::InstanceSnapshot* snap,
                         std::unique_ptr<DecisionLog::Frozen>* log,
                         EncodedFields* pending) const {
  snap->set_format_version(kSnapshotFormatVersion);
  snap->set_name(name_);
  *snap->mutable_config() = config_;
  policy_->Save(snap->mutable_policy());
  if (pending != nullptr) {
    bandit::v1::PendingDecisionRecord record;  // one, reused: its arrays keep their capacity
    for (const PendingDecision* p : pending_.InOrder()) {
      record.Clear();
      ToRecord(*p, &record);
      pending->Add(bandit::v1::InstanceSnapshot::kPendingFieldNumber, record);
    }
  } else {
    for (const PendingDecision* p : pending_.InOrder()) ToRecord(*p, snap->add_pending());
  }
  *snap->mutable_stats() = stats_;
  snap->set_uid(uid_);
  snap->set_next_event_seq(next_seq_);
  if (log != nullptr)
    *log = log_.Freeze();
  else
    log_.Save(snap->mutable_decision_log());
  shadows_.Save(snap);
  for (const auto& e : evaluations_) *snap->add_evaluations() = e;
  if (!apprentice_.empty()) apprentice_.Save(snap->mutable_apprentice());
}

InstanceState::InstanceState(std::string name, InstanceConfig config,
                             std::unique_ptr<Policy> policy, const InstanceLimits& limits,
                             uint64_t uid)
    : name_(std::move(name)),
      limits_(limits),
      uid_(uid),
      config_(std::move(config)),
      policy_(std::move(policy)),
      pending_(config_.pending().capacity()),
      log_(config_.decision_log()) {}

void InstanceState::SyncConfigArms() {
  // The config always lists the current arm set (so Reset and snapshots keep runtime changes).
  const std::vector<std::string> ids = policy_->ArmIds();
  if (ids.empty() && config_.policy().arms_size() == 0) return;
  SetConfigArms(ids, config_.mutable_policy());
}

absl::Status InstanceState::LoggedSelectInputs(absl::string_view entry,
                                               const InstanceLimits& limits, SelectInputs* in,
                                               std::string* event_id) {
  bandit::v1::LoggedDecision d;
  if (!d.ParseFromArray(entry.data(), static_cast<int>(entry.size())))
    return absl::DataLossError("a logged_select record does not parse as a LoggedDecision");
  const int64_t n = d.num_candidates(), dim = d.candidate_dim();
  if (n < 1 || dim < 0 || n * dim != d.candidates_size() || d.x_size() > 0 ||
      d.event_id().empty())
    return absl::DataLossError(absl::StrCat(
        "a logged_select record holds ", n, " candidates of dimension ", dim, " in ",
        d.candidates_size(), " values, x of ", d.x_size(), " values and event id '", d.event_id(),
        "', expected at least one candidate, num_candidates x candidate_dim values, no x and an "
        "event id"));
  if (n > limits.max_candidates)
    return absl::InvalidArgumentError(absl::StrCat(
        "candidates has ", n, " entries, expected at most ", limits.max_candidates));
  in->candidates->resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const absl::Span<const double> values(d.candidates().data() + i * dim,
                                          static_cast<size_t>(dim));
    if (auto s = CopyChecked(values, limits.max_vector_size, &(*in->candidates)[i],
                             [i] { return absl::StrCat("candidates[", i, "].values"); });
        !s.ok())
      return s;
  }
  in->x.resize(0);
  *event_id = std::move(*d.mutable_event_id());
  return absl::OkStatus();
}

absl::StatusOr<SelectContext> InstanceState::SelectContextFor(SelectCall& call) const {
  SelectInputs& in = call.inputs;
  const std::vector<Vector>& candidates = *in.candidates;
  const Vector* x = &in.x;
  SelectContext ctx;
  ctx.want_scores = call.want_scores;
  const bool arm_set = policy_->context_kind() == ContextKind::kNone;
  if (!arm_set && (in.arm_set_slots || (!call.excluded_actions.empty() && call.actions.empty() &&
                                        feature_space_ == nullptr)))
    return absl::InvalidArgumentError(absl::StrCat(
        in.arm_set_slots ? "slots" : "excluded_actions",
        " is set without actions, expected named actions or candidates: instance '", name_,
        "' runs '", policy_->name(), "', which decides over the request's actions, not an arm set"));
  if (arm_set && (in.arm_set_slots || !call.excluded_actions.empty())) {
    // The request's ids are the arm set's.
    const std::vector<std::string> ids = policy_->ArmIds();
    const IdIndex slot_of = IdIndex::OfDistinct(ids);
    std::vector<bool> excluded(ids.size(), false);
    for (size_t j = 0; j < call.excluded_actions.size(); ++j) {
      auto slot = slot_of.Position(absl::StrCat("excluded_actions[", j, "]"),
                                   call.excluded_actions[j], "the instance's arms");
      if (!slot.ok()) return slot.status();
      excluded[*slot] = true;
    }
    if (in.arm_set_slots) {
      if (auto s = CheckSlots(call.slots, ids, excluded, limits_.max_candidates, &in.slots);
          !s.ok())
        return s;
      return ctx;  // each slot's mask is made as the slots are filled (SelectSlots)
    }
    in.allowed_arms.assign(ids.size(), 1);
    in.offered_arms.clear();
    for (size_t i = 0; i < ids.size(); ++i) {
      in.allowed_arms[i] = !excluded[i];
      if (!excluded[i]) in.offered_arms.push_back(static_cast<int>(i));
    }
    if (in.offered_arms.empty())
      return absl::InvalidArgumentError(
          "excluded_actions excludes every arm, expected at least one arm to choose from");
    ctx.allowed_arms = in.allowed_arms;
    return ctx;
  }
  if (!in.slots.empty()) {
    // The slots' vectors are chosen per slot (SelectSlots).
    if (policy_->context_kind() != ContextKind::kCandidates)
      return absl::InvalidArgumentError(absl::StrCat(
          "slots is set, expected a policy over candidates: instance '", name_, "' runs '",
          policy_->name(), "', which does not decide over the request's actions"));
    if (in.is_sparse && !policy_->TakesSparse()) {
      // Parsed for a policy that took sparse input and has since been replaced (PromoteShadow):
      // the new one's dimension was admitted for dense vectors.
      for (SelectInputs::Slot& slot : in.slots) {
        slot.candidates.assign(slot.sparse_candidates.size(), Vector());
        for (size_t i = 0; i < slot.sparse_candidates.size(); ++i)
          if (slot.allowed[i])
            slot.candidates[i] = Densify(slot.sparse_candidates[i], feature_space_->dimension());
        slot.sparse_candidates.clear();
      }
      in.is_sparse = false;
    }
    return ctx;
  }
  switch (policy_->context_kind()) {
    case ContextKind::kNone:
      if (!candidates.empty() || x->size() > 0)
        return absl::InvalidArgumentError(
            absl::StrCat("instance '", name_, "' runs policy '", policy_->name(),
                         "' over its own arm set, expected no candidates and no x"));
      break;
    case ContextKind::kCandidates:
      if (in.is_sparse) {
        if (policy_->TakesSparse()) {
          ctx.sparse_candidates = *in.sparse;
          break;
        }
        // Parsed for a policy that took sparse input and has since been replaced
        // (PromoteShadow): the new one's dimension was admitted for dense vectors.
        DensifyAll(*in.sparse, in.candidates);
      }
      if (candidates.empty())
        return absl::InvalidArgumentError(absl::StrCat(
            "candidates is empty, expected at least one candidate feature vector for policy '",
            policy_->name(), "'"));
      if (x->size() > 0)
        return absl::InvalidArgumentError("x is set, expected candidates only for this policy");
      ctx.candidates = candidates;
      break;
    case ContextKind::kPoint:
      if (x->size() == 0)
        return absl::InvalidArgumentError(absl::StrCat(
            "x is empty, expected the input vector for policy '", policy_->name(), "'"));
      if (!candidates.empty())
        return absl::InvalidArgumentError("candidates is set, expected x only for this policy");
      ctx.point = x;
      break;
  }
  return ctx;
}

std::function<double(uint32_t)> InstanceState::PolicyCoordinateWeights() const {
  const Policy* policy = policy_.get();
  if (policy->CoordinateWeight(0).has_value())
    return [policy](uint32_t i) { return policy->CoordinateWeight(i).value_or(0.0); };
  Vector w = policy->Weights();
  if (feature_space_ == nullptr || w.size() != feature_space_->dimension()) w.resize(0);
  return [w = std::move(w)](uint32_t i) { return i < w.size() ? w[i] : 0.0; };
}

void InstanceState::PrepareSelect(SelectCall& call) const {
  SelectInputs& in = call.inputs;
  in.prepared.reset();
  if (!policy_->PreparesSelect() || in.arm_set_slots || !in.slots.empty() ||
      policy_->context_kind() != ContextKind::kCandidates || ModeOf(config_) == bandit::v1::LOGGING_ONLY)
    return;
  auto ctx = SelectContextFor(call);
  if (!ctx.ok()) return;
  in.prepared = policy_->PrepareSelect(*ctx);
}

absl::Status InstanceState::Select(const SelectContext& ctx, const SelectCall& call, int64_t now,
                                   bandit::v1::Decision* out, bandit::v1::JournalRecord* rec,
                                   const std::string* replay_event_id) {
  if (auto s = CheckNewDecision(call, /*live=*/replay_event_id == nullptr); !s.ok()) return s;
  const bandit::v1::LearningMode mode = ModeOf(config_);
  const SelectInputs& in = call.inputs;
  if (!in.slots.empty()) return SelectSlots(ctx, call, now, out, rec, replay_event_id);
  const std::vector<Vector>& candidates = *in.candidates;
  const Vector* x = &in.x;
  // The log keeps the probability vector where the policy has one; asking for it changes no
  // decision (the scores are computed from the same draws), only what Select reports.
  SelectContext policy_ctx = ctx;
  // Shadows score against the served policy's actions (a point policy's count is its
  // distribution's length).
  // Unless the caller asked for the scores, the log takes a Thompson decision's posteriors
  // (its vector is computed from them at export) and shadows of an arm-set policy need only
  // the arm count.
  if (ctx.want_scores)
    policy_ctx.want_scores = ScoreRequest::kScores;
  else if (log_.enabled() || !shadows_.empty())
    policy_ctx.want_scores = ScoreRequest::kScoresOrPosteriors;
  else
    policy_ctx.want_scores = ScoreRequest::kNone;
  // APPRENTICE: the policy decides, for its probability of the baseline, which needs its whole
  // distribution. LOGGING_ONLY: the policy is not asked (its state, random engine included,
  // does not change).
  if (mode == bandit::v1::APPRENTICE) {
    policy_ctx.want_scores = ScoreRequest::kScores;
  }
  PendingDecision p;
  absl::StatusOr<Decision> d = Decision();
  if (mode != bandit::v1::LOGGING_ONLY) {
    d = policy_->Select(policy_ctx);
    if (!d.ok()) return d.status();
  }
  if (mode != bandit::v1::ONLINE)
    d = BaselineDecision(*policy_, ctx, in, mode == bandit::v1::APPRENTICE ? &*d : nullptr, &p);

  p.seq = next_seq_++;
  p.event_id = call.event_id.empty() ? FormatEventId(uid_, p.seq) : std::string(call.event_id);
  if (replay_event_id && p.event_id != *replay_event_id)
    return absl::DataLossError(absl::StrCat("replay of instance '", name_, "' produced event '",
                                            p.event_id, "' where the journal has '",
                                            *replay_event_id, "'"));
  p.arm = d->arm;
  p.arm_id = d->arm_id;
  if (policy_->context_kind() == ContextKind::kCandidates) {
    if (!ctx.sparse_candidates.empty()) {
      const SparseVector& chosen = ctx.sparse_candidates[d->arm];
      p.sparse_index = chosen.index;
      p.sparse_value = chosen.value;
      if (chosen.size() == 0) {
        // A vector with no terms is kept as one zero term (the same dense vector), so that a
        // sparse choice is never mistaken for a dense one.
        p.sparse_index = {0};
        p.sparse_value = {0.0};
      }
    } else {
      p.features = candidates[d->arm];
    }
  }
  if (policy_->context_kind() == ContextKind::kPoint) p.features = *x;
  if (policy_->context_kind() == ContextKind::kCandidates)
    p.offered = static_cast<int>(ctx.sparse_candidates.empty() ? ctx.candidates.size()
                                                               : ctx.sparse_candidates.size());
  p.memo = std::move(d->memo);
  p.expires_at_ms = now + config_.pending().reward_wait_ms();
  p.awaiting_activation = call.defer_activation;
  p.learning_mode = mode;
  // The policy did not make the served decision: it learns the baseline's reward as logged data.
  p.learn_direct = mode == bandit::v1::APPRENTICE;
  // Over an arm set with excluded arms, the log and the shadows see the decision among the
  // arms it could choose (the caller sees the arm set's own indices).
  Decision among_offered;
  if (!in.offered_arms.empty()) among_offered = AmongOffered(*d, in.offered_arms);
  const Decision& seen = in.offered_arms.empty() ? *d : among_offered;
  if (!shadows_.empty()) ScoreShadows(seen, ctx, in, &p);
  WriteDecision(*d, p.event_id, p.expires_at_ms, ctx.want_scores, out);
  if (log_.enabled()) {
    const int64_t dropped = AppendToLog(seen, ctx, call, p.event_id, p.seq, now);
    stats_.set_decision_log_evicted(SaturatingAdd(stats_.decision_log_evicted(), dropped));
  }
  // With the decision log on, the request is journaled even for a read-only policy: replay
  // re-executes it (a read-only policy decides deterministically) and so rebuilds the log
  // entry, context included.
  // With shadows the decision alone suffices too when every shadow only read its state and
  // scored the decision (the record carries the scores); otherwise replay re-runs the shadows
  // from the request (a shadow may draw from its engine, or count an error).
  const bool shadows_decided = shadows_.empty() || (shadows_.AllSelectReadsOnly() &&
                                                    p.shadow_scores.size() == shadows_.size());
  if (policy_->SelectReadsOnly() && !log_.enabled() && shadows_decided) {
    // Nothing in the policy changed: the decision alone lets replay rebuild this Select.
    ToRecord(p, rec->mutable_decided()->mutable_decision());
    rec->mutable_decided()->set_estimated_gap(d->estimated_gap);
  } else if (log_.enabled() && !ctx.want_scores && !call.named && !call.defer_activation &&
             LogEntryHoldsTheCandidates(ctx)) {
    // The log entry just appended holds the candidates (flat, with their count and length) and
    // the event id: journaled instead of the request, it is one copy of bytes already encoded,
    // where the request's encoding walks a submessage per candidate (measured when this form was
    // added; its commit has the figures). Replay rebuilds the request from it, with
    // return_scores unset (a request that set it is journaled itself: what a Select computes may
    // depend on it).
    const absl::string_view entry = log_.last_entry();
    if (rec->GetArena() != nullptr) {
      rec->set_logged_select(entry.data(), entry.size());  // a batch's record: kept until encoded
    } else {
      // Borrowed like the request: Instance::Commit releases it after the record is encoded.
      thread_local std::string borrowed;
      borrowed.assign(entry.data(), entry.size());
      rec->set_allocated_logged_select(&borrowed);
    }
  } else {
    // Re-executed on replay: the caller journals the request with this event id.
    rec->set_event_id(p.event_id);
  }
  RecordDecision(std::move(p), d->estimated_gap);
  return absl::OkStatus();
}

absl::Status InstanceState::CheckNewDecision(const SelectCall& call, bool live) const {
  if (pending_.full())
    return absl::ResourceExhaustedError(absl::StrCat(
        "instance '", name_, "' has ", pending_.size(),
        " decisions awaiting rewards, the configured capacity; send rewards or wait for expiry"));
  if (!call.event_id.empty()) {
    const std::string event_id(call.event_id);
    if (auto s = CheckCallerEventId(event_id); !s.ok()) return s;
    if (pending_.Find(event_id) != nullptr)
      return absl::AlreadyExistsError(absl::StrCat(
          "event_id '", event_id, "' is taken by a decision of instance '", name_,
          "' still waiting for its reward, expected a new id for each decision"));
    // A finished decision's id too, while the instance remembers it (its memory of finished
    // events): two decisions under one id would make the decision log's join ambiguous. (A
    // journal written before this check was made is replayed as it was accepted.)
    if (live && pending_.FateOf(event_id) != EventFate::kUnknown)
      return absl::AlreadyExistsError(absl::StrCat(
          "event_id '", event_id, "' was used by a decision of instance '", name_,
          "' that is finished (rewarded or expired), expected a new id for each decision"));
  }
  return absl::OkStatus();
}

bool InstanceState::LogEntryHoldsTheCandidates(const SelectContext& ctx) const {
  if (policy_->context_kind() != ContextKind::kCandidates || ctx.candidates.empty()) return false;
  const Eigen::Index dim = ctx.candidates[0].size();
  for (const Vector& c : ctx.candidates)
    if (c.size() != dim) return false;  // the entry's candidate_dim could not split them
  return true;
}

absl::Status InstanceState::ReplayDecided(const bandit::v1::DecidedSelect& rec) {
  if (!policy_->SelectReadsOnly())
    return absl::DataLossError(absl::StrCat("journal has a decided-select record for instance '",
                                            name_, "', whose policy '", policy_->name(),
                                            "' must be replayed from its requests"));
  if (pending_.full())
    return absl::DataLossError(
        absl::StrCat("replay of instance '", name_, "' found the pending table full at a select"));
  if (auto s = CheckSparseChoice(rec.decision()); !s.ok())
    return absl::DataLossError(absl::StrCat("replay of instance '", name_, "': ", s.message()));
  PendingDecision p = FromRecord(rec.decision());
  const uint64_t seq = next_seq_++;
  // A caller-chosen id never has the server's form (CheckCallerEventId): any other id must be
  // the one this decision's number makes.
  uint64_t uid = 0, id_seq = 0;
  const bool server_made = ParseEventId(p.event_id, &uid, &id_seq);
  const std::string expected = server_made ? FormatEventId(uid_, seq) : p.event_id;
  if (p.event_id != expected || p.seq != seq || pending_.Find(p.event_id) != nullptr)
    return absl::DataLossError(absl::StrCat("replay of instance '", name_, "' expected event '",
                                            expected, "' number ", seq, " where the journal has '",
                                            p.event_id, "' number ", p.seq,
                                            " (or that id was still pending)"));
  RecordDecision(std::move(p), rec.estimated_gap());
  return absl::OkStatus();
}

int64_t InstanceState::AppendToLog(const Decision& d, const SelectContext& ctx,
                                   const SelectCall& call, const std::string& event_id,
                                   uint64_t seq, int64_t now) {
  const SelectInputs& in = call.inputs;
  DecisionLog::Context e;
  e.event_seq = seq;
  e.event_id = event_id;
  e.decided_at_ms = now;
  e.policy = policy_->name();
  std::vector<std::string> ids;
  int num_actions = 0;
  switch (policy_->context_kind()) {
    case ContextKind::kCandidates: {
      const bool sparse = !ctx.sparse_candidates.empty();
      const int n = static_cast<int>(sparse ? ctx.sparse_candidates.size() : ctx.candidates.size());
      e.num_candidates = n;
      e.candidate_dim = sparse  ? static_cast<int>(feature_space_->dimension())
                        : n > 0 ? static_cast<int>(ctx.candidates[0].size())
                                : 0;
      num_actions = n;
      if (!in.action_of.empty()) {
        // Named: the context and actions as sent, not their 2^bits-long hashed vectors.
        e.named = &call;
        e.named_actions = in.action_of;
        break;
      }
      e.candidates = ctx.candidates;
      break;
    }
    case ContextKind::kPoint:
      e.x = &in.x;
      num_actions = d.score_kind == bandit::v1::PROBABILITY ? static_cast<int>(d.scores.size()) : 0;
      break;
    case ContextKind::kNone:
      ids = OfferedArmIds(in.offered_arms);
      e.arm_ids = ids;
      num_actions = static_cast<int>(ids.size());
      break;
  }
  e.num_actions = num_actions;
  e.chosen_index = d.arm;
  e.chosen_arm_id = d.arm_id;
  if (!in.action_of.empty() && d.arm >= 0 && d.arm < static_cast<int>(in.action_of.size()))
    e.chosen_arm_id = call.actions[static_cast<size_t>(in.action_of[d.arm])].id;
  LogDistribution(d, num_actions, &e);
  return log_.Append(e, now);
}

void InstanceState::ScoreShadows(const Decision& d, const SelectContext& ctx,
                                 const SelectInputs& in, PendingDecision* p) {
  ope::LoggedContext logged;
  std::vector<std::string> arm_ids;
  switch (policy_->context_kind()) {
    case ContextKind::kCandidates:
      if (!ctx.sparse_candidates.empty()) {
        // Beyond kMaxDenseDimension the shadows score the sparse vectors; within it, dense
        // ones (AddShadow admits them when 2^bits is within --max_feature_dim).
        logged.sparse_actions = ctx.sparse_candidates;
        logged.num_actions = static_cast<int>(ctx.sparse_candidates.size());
        if (shadows_.NeedsDense()) {
          thread_local std::vector<Vector> dense;
          DensifyAll(ctx.sparse_candidates, &dense);
          logged.actions = dense;
        }
        break;
      }
      logged.actions = ctx.candidates;
      logged.num_actions = static_cast<int>(ctx.candidates.size());
      break;
    case ContextKind::kPoint:
      // The actions of a point policy are its own (e.g. OKS's kernels): as many as the served
      // distribution has entries.
      logged.x = &in.x;
      logged.num_actions =
          d.score_kind == bandit::v1::PROBABILITY ? static_cast<int>(d.scores.size()) : 0;
      break;
    case ContextKind::kNone:
      arm_ids = OfferedArmIds(in.offered_arms);
      logged.arm_ids = &arm_ids;
      logged.num_actions = static_cast<int>(arm_ids.size());
      break;
  }
  p->shadow_scores.reserve(shadows_.size());
  shadows_.Score(logged, d.arm, d.propensity, &p->shadow_scores);
}

}  // namespace bandit::server

namespace bandit::server {

absl::Status InstanceState::CreateEvaluation(const bandit::v1::Evaluation& e) {
  if (e.id().empty()) return absl::InvalidArgumentError("an evaluation needs an id");
  for (const auto& held : evaluations_)
    if (held.id() == e.id())
      return absl::AlreadyExistsError(absl::StrCat("instance '", name_,
                                                   "' already has evaluation '", e.id(), "'"));
  if (static_cast<int>(evaluations_.size()) >= kMaxEvaluations)
    return absl::ResourceExhaustedError(
        absl::StrCat("instance '", name_, "' holds ", evaluations_.size(),
                     " evaluations, the most it keeps: delete one first"));
  evaluations_.push_back(e);
  return absl::OkStatus();
}

absl::Status InstanceState::FinishEvaluation(const bandit::v1::FinishEvaluation& f) {
  for (auto& held : evaluations_)
    if (held.id() == f.evaluation().id()) {
      held = f.evaluation();
      return absl::OkStatus();
    }
  return absl::OkStatus();  // deleted while its job ran
}

absl::Status InstanceState::DeleteEvaluation(const std::string& id) {
  for (auto it = evaluations_.begin(); it != evaluations_.end(); ++it)
    if (it->id() == id) {
      evaluations_.erase(it);
      return absl::OkStatus();
    }
  // The words DecisionService's kNoSuchEvaluation names.
  return absl::NotFoundError(
      absl::StrCat("instance '", name_, "' has no evaluation '", id, "'"));
}

}  // namespace bandit::server
