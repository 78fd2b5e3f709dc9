#include "server/instance_state.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/arms.h"
#include "core/registry.h"
#include "core/common/sparse.h"
#include "server/named_inputs.h"

namespace bandit::server {
namespace {

using bandit::v1::InstanceConfig;

// 2: shadows; 1 (before shadows) still loads.
constexpr uint32_t kSnapshotFormatVersion = 2;

// Copies `values` into `out` after checking size and finiteness; `field()` names the field in
// the error and is only called on error (no string is built per candidate on the hot path).
// Reuses `out`'s storage when the size matches.
template <typename Repeated, typename FieldName>
absl::Status CopyChecked(const Repeated& values, int64_t max_size, Vector* out, FieldName field) {
  // RepeatedField's size is an int, a Span's a size_t: compared as int64_t.
  const int64_t size = static_cast<int64_t>(values.size());
  if (size > max_size)
    return absl::InvalidArgumentError(
        absl::StrCat(field(), " has ", size, " values, expected at most ", max_size));
  // All finite iff the sum of v * 0 is 0 (inf * 0 and NaN * 0 are NaN): one vectorised pass
  // instead of a test and branch per value; the offending index is searched for on error only.
  const Eigen::Map<const Eigen::ArrayXd> a(values.data(), values.size());
  if (!((a * 0.0).sum() == 0.0)) {
    for (int64_t i = 0; i < size; ++i)
      if (!std::isfinite(values[i]))
        return absl::InvalidArgumentError(
            absl::StrCat(field(), "[", i, "] is ", values[i], ", expected a finite number"));
  }
  *out = Eigen::Map<const Vector>(values.data(), values.size());
  return absl::OkStatus();
}

template <typename Repeated>
absl::StatusOr<Vector> ToVector(absl::string_view field, const Repeated& values, int64_t max_size) {
  Vector v;
  if (auto s = CopyChecked(values, max_size, &v, [field] { return field; }); !s.ok()) return s;
  return v;
}

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

// What the decision log keeps of decision `d` over `num_actions` actions: its propensity, and
// its probability vector, the posteriors that vector is a function of, or (a deterministic
// choice) the one-hot vector.
void LogDistribution(const Decision& d, int num_actions, DecisionLog::Context* e) {
  if (std::isfinite(d.propensity)) e->propensity = d.propensity;
  if (d.score_kind == bandit::v1::PROBABILITY && d.scores.size() == num_actions &&
      num_actions > 0) {
    e->probabilities = std::span<const double>(d.scores.data(), d.scores.size());
  } else if (d.argmax_posteriors.has_value() && d.argmax_posteriors->first.size() == num_actions &&
             num_actions > 0) {
    e->posteriors = &*d.argmax_posteriors;
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

absl::Status CheckOptionalFinite(absl::string_view field, bool has, double value) {
  if (has && !std::isfinite(value))
    return absl::InvalidArgumentError(
        absl::StrCat(field, " is ", value, ", expected a finite number"));
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
  if (d.prediction) out->set_prediction(*d.prediction);
  for (const auto& [k, v] : d.diagnostics) (*out->mutable_diagnostics())[k] = v;
  out->set_expires_at_ms(expires_at_ms);
}

}  // namespace

namespace {
// Whether `policy` can run in `mode`: the baseline modes serve the first action offered, which
// policies over an arm set or candidates have; a point-input policy's actions are its own.
absl::Status CheckLearningMode(int mode, const Policy& policy, absl::string_view field) {
  if (!bandit::v1::LearningMode_IsValid(mode))
    return absl::InvalidArgumentError(
        absl::StrCat(field, " is ", mode, ", expected ONLINE, APPRENTICE or LOGGING_ONLY"));
  if (mode == bandit::v1::APPRENTICE || mode == bandit::v1::LOGGING_ONLY) {
    if (policy.context_kind() == ContextKind::kPoint)
      return absl::FailedPreconditionError(absl::StrCat(
          field, " is ", bandit::v1::LearningMode_Name(static_cast<bandit::v1::LearningMode>(mode)),
          ", expected ONLINE for policy '", policy.name(),
          "': it decides over an input x, with no baseline action to serve"));
  }
  return absl::OkStatus();
}

bandit::v1::LearningMode ModeOf(const bandit::v1::InstanceConfig& c) {
  return c.learning_mode() == bandit::v1::LEARNING_MODE_UNSPECIFIED ? bandit::v1::ONLINE
                                                                     : c.learning_mode();
}

void SetEstimate(const ope::Interval& i, bandit::v1::Estimate* out) {
  out->set_value(i.value);
  out->set_se(i.se);
  out->set_lo(i.lo);
  out->set_hi(i.hi);
}
}  // namespace

uint64_t InstanceState::SeedFromName(const std::string& name) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h == 0 ? 1 : h;
}

absl::StatusOr<std::unique_ptr<InstanceState>> InstanceState::Create(
    const bandit::v1::CreateInstanceRequest& req, const InstanceLimits& limits, uint64_t uid) {
  if (auto s = CheckId("name", req.name()); !s.ok()) return s;
  if (static_cast<int64_t>(req.name().size()) > limits.max_name_length)
    return absl::InvalidArgumentError(absl::StrCat("name has ", req.name().size(),
                                                   " characters, expected at most ",
                                                   limits.max_name_length, " (--max_name_length)"));
  if (!req.has_config())
    return absl::InvalidArgumentError(
        "config is missing, expected an InstanceConfig with a policy");
  InstanceConfig config = req.config();
  if (auto s = NormalizeConfig(req.name(), limits, &config); !s.ok()) return s;
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
      new InstanceState(req.name(), std::move(config), *std::move(policy), limits, uid));
  state->feature_space_ = *std::move(space);
  state->SyncConfigArms();
  return state;
}

absl::StatusOr<std::unique_ptr<InstanceState>> InstanceState::FromSnapshot(
    const bandit::v1::InstanceSnapshot& snap, const InstanceLimits& limits) {
  if (snap.format_version() > kSnapshotFormatVersion)
    return absl::InvalidArgumentError(absl::StrCat(
        "snapshot of instance '", snap.name(), "' has format_version ", snap.format_version(),
        ", expected at most ", kSnapshotFormatVersion, " (written by a newer server?)"));
  bandit::v1::CreateInstanceRequest req;
  req.set_name(snap.name());
  *req.mutable_config() = snap.config();
  auto created = Create(req, limits, snap.uid() == 0 ? 1 : snap.uid());
  if (!created.ok()) return created.status();
  InstanceState& in = **created;
  if (auto s = in.policy_->Restore(snap.policy()); !s.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("snapshot of instance '", snap.name(), "': ", s.message()));
  {
    // Policies' Restore does not re-validate arm ids (core ArmSet::Restore); a state with
    // duplicate or malformed ids would make a config the next Create refuses (found by fuzzing).
    absl::flat_hash_set<std::string> seen;
    for (const auto& id : in.policy_->ArmIds()) {
      if (auto s = CheckId("snapshot arm id", id); !s.ok()) return s;
      if (!seen.insert(id).second)
        return absl::InvalidArgumentError(
            absl::StrCat("snapshot of instance '", snap.name(), "' repeats arm id '", id, "'"));
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
  }
  if (auto s = in.log_.Restore(snap.decision_log()); !s.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("snapshot of instance '", snap.name(), "': ", s.message()));
  // Format 1 has no shadows: the instance restores without any.
  if (auto s = in.shadows_.Restore(snap); !s.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("snapshot of instance '", snap.name(), "': ", s.message()));
  if (snap.has_apprentice()) {
    const auto& a = snap.apprentice();
    if (auto s = in.apprentice_.Restore(a); !s.ok())
      return absl::InvalidArgumentError(
          absl::StrCat("snapshot of instance '", snap.name(), "' apprentice: ", s.message()));
    if (a.slots_size() > kLastSlotPosition + 1)
      return absl::InvalidArgumentError(
          absl::StrCat("snapshot of instance '", snap.name(), "' apprentice has ", a.slots_size(),
                       " slot positions, expected at most ", kLastSlotPosition + 1));
    in.apprentice_slots_.resize(a.slots_size());
    for (int k = 0; k < a.slots_size(); ++k) {
      if (a.slots(k).position() != k)
        return absl::InvalidArgumentError(
            absl::StrCat("snapshot of instance '", snap.name(), "' apprentice.slots[", k,
                         "] is position ", a.slots(k).position(), ", expected ", k));
      if (auto s = in.apprentice_slots_[k].Restore(a.slots(k)); !s.ok())
        return absl::InvalidArgumentError(absl::StrCat(
            "snapshot of instance '", snap.name(), "' apprentice.slots[", k, "]: ", s.message()));
    }
  }
  in.stats_ = snap.stats();
  in.next_seq_ = std::max<uint64_t>(1, snap.next_event_seq());
  in.SyncConfigArms();
  return created;
}

void InstanceState::Save(bandit::v1::InstanceSnapshot* snap,
                         std::unique_ptr<DecisionLog::Frozen>* log) const {
  snap->set_format_version(kSnapshotFormatVersion);
  snap->set_name(name_);
  *snap->mutable_config() = config_;
  policy_->Save(snap->mutable_policy());
  for (const PendingDecision* p : pending_.InOrder()) ToRecord(*p, snap->add_pending());
  *snap->mutable_stats() = stats_;
  snap->set_uid(uid_);
  snap->set_next_event_seq(next_seq_);
  if (log != nullptr)
    *log = log_.Freeze();
  else
    log_.Save(snap->mutable_decision_log());
  shadows_.Save(snap);
  if (apprentice_.estimators.events() > 0) {
    auto* a = snap->mutable_apprentice();
    apprentice_.Save(a);
    for (size_t k = 0; k < apprentice_slots_.size(); ++k) {
      auto* slot = a->add_slots();
      slot->set_position(static_cast<int32_t>(k));
      apprentice_slots_[k].Save(slot);
    }
  }
}

void InstanceState::ApprenticeFigures::Count(const PendingDecision& target, double reward) {
  estimators.AddTerms(target.apprentice_target, 1.0, reward, 0.0, 0.0);
  if (target.apprentice_chose_baseline) {
    ++chose_baseline;
    imitated_reward += reward;
  }
}

void InstanceState::ApprenticeFigures::Save(bandit::v1::ApprenticeSnapshot* out) const {
  estimators.Save(out->mutable_estimators());
  out->set_policy_chose_baseline(chose_baseline);
  out->set_imitated_reward_sum(imitated_reward);
}

absl::Status InstanceState::ApprenticeFigures::Restore(const bandit::v1::ApprenticeSnapshot& in) {
  if (auto s = estimators.Restore(in.estimators()); !s.ok()) return s;
  if (in.policy_chose_baseline() < 0 || in.policy_chose_baseline() > in.estimators().events() ||
      !std::isfinite(in.imitated_reward_sum()))
    return absl::InvalidArgumentError(absl::StrCat(
        "policy_chose_baseline ", in.policy_chose_baseline(), " or imitated_reward_sum ",
        in.imitated_reward_sum(), " is not what ", in.estimators().events(),
        " events could make"));
  chose_baseline = in.policy_chose_baseline();
  imitated_reward = in.imitated_reward_sum();
  return absl::OkStatus();
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
  absl::flat_hash_map<std::string, bandit::v1::ArmSpec> old;
  for (const auto& a : config_.policy().arms()) old[a.id()] = a;
  auto* arms = config_.mutable_policy()->mutable_arms();
  arms->Clear();
  for (const auto& id : ids) {
    auto it = old.find(id);
    if (it != old.end()) {
      *arms->Add() = it->second;
    } else {
      arms->Add()->set_id(id);
    }
  }
  config_.mutable_policy()->set_num_arms(0);
}

InstanceState::SelectInputs::SelectInputs() {
  // Candidate vectors are reused per thread: a 50-candidate Select otherwise costs 50 heap
  // allocations and frees. Scratch beyond kKeepDoubles is given back after the call.
  thread_local std::vector<Vector> scratch;
  thread_local std::vector<SparseVector> sparse_scratch;
  candidates = &scratch;
  sparse = &sparse_scratch;
}

InstanceState::SelectInputs::~SelectInputs() {
  constexpr int64_t kKeepDoubles = 1 << 20;
  int64_t total = 0;
  for (const auto& v : *candidates) total += v.size();
  if (total > kKeepDoubles) std::vector<Vector>().swap(*candidates);
  int64_t terms = 0;
  for (const auto& v : *sparse) terms += static_cast<int64_t>(v.size());
  if (terms > kKeepDoubles / 2) std::vector<SparseVector>().swap(*sparse);
}

namespace {

// A multi-slot Select's slots over `ids` (the actions' ids: named ids, or a dense candidate's
// position in decimal): each slot's allowed actions and baseline, checked so that every slot
// can be filled whatever the slots before it choose. `excluded` marks actions excluded for the
// whole request.
absl::Status CheckSlots(const bandit::v1::SelectRequest& req, const std::vector<std::string>& ids,
                        const std::vector<bool>& excluded, int64_t max_candidates,
                        std::vector<InstanceState::SelectInputs::Slot>* slots) {
  const int n = static_cast<int>(ids.size());
  if (req.slots_size() > n)
    return absl::InvalidArgumentError(absl::StrCat(
        "slots has ", req.slots_size(), " entries, expected at most ", n,
        " (one action per slot, and the request has ", n, " actions)"));
  if (int64_t{req.slots_size()} * n > max_candidates)
    return absl::InvalidArgumentError(absl::StrCat(
        "slots x actions is ", req.slots_size(), " x ", n, ", expected at most ", max_candidates,
        " (--max_candidates: each slot sees every action)"));
  absl::flat_hash_map<std::string_view, int> position;
  for (int i = 0; i < n; ++i) position.emplace(ids[i], i);
  absl::flat_hash_map<std::string_view, int> slot_of;
  std::vector<int> baseline_of(n, -1);
  slots->resize(req.slots_size());
  for (int k = 0; k < req.slots_size(); ++k) {
    const bandit::v1::Slot& slot = req.slots(k);
    const std::string field = absl::StrCat("slots[", k, "]");
    if (auto s = CheckId(field + ".id", slot.id()); !s.ok()) return s;
    if (auto [it, fresh] = slot_of.emplace(slot.id(), k); !fresh)
      return absl::InvalidArgumentError(absl::StrCat(field, ".id '", slot.id(), "' repeats slots[",
                                                     it->second, "].id"));
    auto& out = (*slots)[k];
    out.allowed.assign(n, 1);
    for (int i = 0; i < n; ++i)
      if (excluded[i]) out.allowed[i] = 0;
    for (int j = 0; j < slot.excluded_actions_size(); ++j) {
      auto it = position.find(slot.excluded_actions(j));
      if (it == position.end())
        return absl::InvalidArgumentError(absl::StrCat(
            field, ".excluded_actions[", j, "] '", slot.excluded_actions(j),
            "' is not the id of one of the actions (a dense candidate's id is its position)"));
      out.allowed[it->second] = 0;
    }
    out.baseline = -1;
    if (!slot.baseline_action().empty()) {
      auto it = position.find(slot.baseline_action());
      if (it == position.end())
        return absl::InvalidArgumentError(absl::StrCat(
            field, ".baseline_action '", slot.baseline_action(),
            "' is not the id of one of the actions (a dense candidate's id is its position)"));
      if (!out.allowed[it->second])
        return absl::InvalidArgumentError(absl::StrCat(field, ".baseline_action '",
                                                       slot.baseline_action(),
                                                       "' is excluded for that slot"));
      if (baseline_of[it->second] >= 0)
        return absl::InvalidArgumentError(absl::StrCat(
            field, ".baseline_action '", slot.baseline_action(), "' is also slots[",
            baseline_of[it->second], "]'s baseline, expected a different one per slot"));
      baseline_of[it->second] = k;
      out.baseline = it->second;
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

}  // namespace

absl::Status InstanceState::ParseSelectInputs(const bandit::v1::SelectRequest& req,
                                              const InstanceLimits& limits,
                                              const features::FeatureSpace* space,
                                              SelectInputs* in, bool sparse) {
  in->action_of.clear();
  in->slots.clear();
  in->is_sparse = false;
  in->sparse->clear();
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
    if (HasNamedInputs(req)) {
      if (space == nullptr)
        return absl::InvalidArgumentError(
            "context, actions or excluded_actions is set (named inputs), expected candidates: "
            "the instance has no feature_space");
      if (auto s = CheckNamedActions(req, limits.max_candidates, &ids, &excluded); !s.ok())
        return s;
      if (auto s = CheckSlots(req, ids, excluded, limits.max_candidates, &in->slots); !s.ok())
        return s;
      in->x.resize(0);
      in->candidates->clear();
      in->is_sparse = sparse;
      return FeaturizeSlots(*space, limits.named, req, &in->slots, sparse);
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
    if (auto s = CheckSlots(req, ids, excluded, limits.max_candidates, &in->slots); !s.ok())
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
  if (HasNamedInputs(req) && !arm_set_form) {
    if (space == nullptr)
      return absl::InvalidArgumentError(
          "context, actions, excluded_actions or explain is set (named inputs), expected "
          "candidates: the instance has no feature_space (create it with config.feature_space "
          "to send named features)");
    in->x.resize(0);
    in->is_sparse = sparse;
    return FeaturizeSelect(*space, limits.named, limits.max_candidates, req, in->candidates,
                           &in->action_of, sparse ? in->sparse : nullptr);
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

absl::StatusOr<SelectContext> InstanceState::SelectContextFor(const bandit::v1::SelectRequest& req,
                                                              SelectInputs& in) const {
  const std::vector<Vector>& candidates = *in.candidates;
  const Vector* x = &in.x;
  SelectContext ctx;
  ctx.want_scores = req.return_scores();
  const bool arm_set = policy_->context_kind() == ContextKind::kNone;
  if (!arm_set && (in.arm_set_slots || (req.excluded_actions_size() > 0 && req.actions_size() == 0 &&
                                        feature_space_ == nullptr)))
    return absl::InvalidArgumentError(absl::StrCat(
        in.arm_set_slots ? "slots" : "excluded_actions",
        " is set without actions, expected named actions or candidates: instance '", name_,
        "' runs '", policy_->name(), "', which decides over the request's actions, not an arm set"));
  if (arm_set && (in.arm_set_slots || req.excluded_actions_size() > 0)) {
    // The request's ids are the arm set's.
    const std::vector<std::string> ids = policy_->ArmIds();
    absl::flat_hash_map<std::string_view, int> slot_of;
    for (int i = 0; i < static_cast<int>(ids.size()); ++i) slot_of.emplace(ids[i], i);
    std::vector<bool> excluded(ids.size(), false);
    for (int j = 0; j < req.excluded_actions_size(); ++j) {
      auto it = slot_of.find(req.excluded_actions(j));
      if (it == slot_of.end())
        return absl::InvalidArgumentError(absl::StrCat("excluded_actions[", j, "] '",
                                                       req.excluded_actions(j),
                                                       "' is not the id of one of the instance's arms"));
      excluded[it->second] = true;
    }
    if (in.arm_set_slots) {
      if (auto s = CheckSlots(req, ids, excluded, limits_.max_candidates, &in.slots); !s.ok())
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

absl::Status InstanceState::Select(const SelectContext& ctx, const bandit::v1::SelectRequest& req,
                                   const SelectInputs& in, int64_t now, bandit::v1::Decision* out,
                                   bandit::v1::JournalRecord* rec,
                                   const std::string* replay_event_id) {
  if (auto s = CheckNewDecision(req); !s.ok()) return s;
  const bandit::v1::LearningMode mode = ModeOf(config_);
  if (!in.slots.empty()) return SelectSlots(ctx, req, in, now, out, rec, replay_event_id);
  const std::vector<Vector>& candidates = *in.candidates;
  const Vector* x = &in.x;
  // The log keeps the probability vector where the policy has one; asking for it changes no
  // decision (the scores are computed from the same draws), only what Select reports.
  SelectContext policy_ctx = ctx;
  // Shadows score against the served policy's actions (a point policy's count is its
  // distribution's length).
  policy_ctx.want_scores = ctx.want_scores || log_.enabled() || !shadows_.empty();
  // Unless the caller asked for the scores, the log takes a Thompson decision's posteriors
  // (its vector is computed from them at export) and shadows of an arm-set policy need only
  // the arm count.
  policy_ctx.posteriors_suffice = !ctx.want_scores;
  // APPRENTICE: the policy decides, for its probability of the baseline, which needs its whole
  // distribution. LOGGING_ONLY: the policy is not asked (its state, random engine included,
  // does not change).
  if (mode == bandit::v1::APPRENTICE) {
    policy_ctx.want_scores = true;
    policy_ctx.posteriors_suffice = false;
  }
  PendingDecision p;
  absl::StatusOr<Decision> d = Decision();
  if (mode != bandit::v1::LOGGING_ONLY) {
    d = policy_->Select(policy_ctx);
    if (!d.ok()) return d.status();
  }
  if (mode != bandit::v1::ONLINE)
    d = BaselineDecision(ctx, in, mode == bandit::v1::APPRENTICE ? &*d : nullptr, &p);

  p.seq = next_seq_++;
  p.event_id = req.event_id().empty() ? FormatEventId(uid_, p.seq) : req.event_id();
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
  p.memo = std::move(d->memo);
  p.expires_at_ms = now + config_.pending().reward_wait_ms();
  p.awaiting_activation = req.defer_activation();
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
    const int64_t dropped = AppendToLog(seen, ctx, req, in, p.event_id, p.seq, now);
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
  } else if (log_.enabled() && !ctx.want_scores && !HasNamedInputs(req) &&
             !req.defer_activation() && LogEntryHoldsTheCandidates(ctx)) {
    // The log entry just appended holds the candidates (flat, with their count and length) and
    // the event id: journaled instead of the request, it is one copy of bytes already encoded,
    // where the request's encoding walks a submessage per candidate (docs/performance.md, "The
    // decision log's cost at the sizes users send"). Replay rebuilds the request from it, with
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
    // Re-executed on replay. Borrowed, not copied: only read while the record is encoded;
    // Instance::Commit hands it back.
    rec->unsafe_arena_set_allocated_select(const_cast<bandit::v1::SelectRequest*>(&req));
    rec->set_event_id(p.event_id);
  }
  RecordDecision(std::move(p), d->estimated_gap);
  return absl::OkStatus();
}

Decision InstanceState::BaselineDecision(const SelectContext& ctx, const SelectInputs& in,
                                         const Decision* policy, PendingDecision* p) const {
  Decision b;
  b.propensity = 1.0;
  b.score_kind = bandit::v1::PROBABILITY;
  // The actions offered, in the order the policy sees them, and the baseline's position among
  // them: the first (the excluded actions are not offered).
  int n = 0;
  int baseline = 0;
  switch (policy_->context_kind()) {
    case ContextKind::kNone: {
      const std::vector<std::string> ids = policy_->ArmIds();
      n = static_cast<int>(ids.size());
      baseline = in.offered_arms.empty() ? 0 : in.offered_arms.front();
      b.arm_id = ids[static_cast<size_t>(baseline)];
      break;
    }
    case ContextKind::kCandidates:
      n = static_cast<int>(!ctx.sparse_candidates.empty() ? ctx.sparse_candidates.size()
                                                          : ctx.candidates.size());
      break;
    case ContextKind::kPoint:  // refused by CheckLearningMode
      break;
  }
  b.arm = baseline;
  b.scores = Vector::Zero(n);
  if (n > 0) b.scores[baseline] = 1.0;
  if (policy != nullptr) {
    // pi(baseline|x): from the policy's distribution where it gave one over these actions, else
    // the indicator of its choice (exact for a deterministic policy, unbiased for a sampled one).
    const bool distribution =
        policy->score_kind == bandit::v1::PROBABILITY && policy->scores.size() == n;
    p->apprentice_target = distribution ? policy->scores[baseline]
                                        : (policy->arm == baseline ? 1.0 : 0.0);
    if (!std::isfinite(p->apprentice_target)) p->apprentice_target = 0;
    p->apprentice_target = std::clamp(p->apprentice_target, 0.0, 1.0);
    p->apprentice_chose_baseline = policy->arm == baseline;
  }
  return b;
}

Decision InstanceState::SlotBaselineDecision(const std::vector<int>& offered, int baseline,
                                             const Decision* policy, PendingDecision* p) {
  const int n = static_cast<int>(offered.size());
  const int at = static_cast<int>(std::find(offered.begin(), offered.end(), baseline) -
                                  offered.begin());  // < n: see SelectSlots
  Decision b;
  b.propensity = 1.0;
  b.score_kind = bandit::v1::PROBABILITY;
  b.arm = at;
  b.scores = Vector::Zero(n);
  b.scores[at] = 1.0;
  if (policy != nullptr) {
    // pi(baseline|x, earlier slots' choices): as BaselineDecision, among the slot's offered
    // actions.
    const bool distribution =
        policy->score_kind == bandit::v1::PROBABILITY && policy->scores.size() == n;
    p->apprentice_target = distribution ? policy->scores[at] : (policy->arm == at ? 1.0 : 0.0);
    if (!std::isfinite(p->apprentice_target)) p->apprentice_target = 0;
    p->apprentice_target = std::clamp(p->apprentice_target, 0.0, 1.0);
    p->apprentice_chose_baseline = policy->arm == at;
  }
  return b;
}

bool InstanceState::SumsRewards(const PendingDecision& event) const {
  const bandit::v1::RewardAggregation a =
      event.aggregation != bandit::v1::REWARD_AGGREGATION_UNSPECIFIED
          ? bandit::v1::RewardAggregation(event.aggregation)
          : config_.pending().reward_aggregation();
  return a == bandit::v1::SUM;
}

void InstanceState::CountApprentice(const PendingDecision& target, double reward) {
  if (target.learning_mode != bandit::v1::APPRENTICE) return;
  apprentice_.Count(target, reward);
  if (target.slot_index < 0) return;  // a single decision
  const size_t position = static_cast<size_t>(std::min(target.slot_index, kLastSlotPosition));
  if (apprentice_slots_.size() <= position) apprentice_slots_.resize(position + 1);
  apprentice_slots_[position].Count(target, reward);
}

absl::Status InstanceState::CheckNewDecision(const bandit::v1::SelectRequest& req) const {
  if (pending_.full())
    return absl::ResourceExhaustedError(absl::StrCat(
        "instance '", name_, "' has ", pending_.size(),
        " decisions awaiting rewards, the configured capacity; send rewards or wait for expiry"));
  if (!req.event_id().empty()) {
    if (auto s = CheckCallerEventId(req.event_id()); !s.ok()) return s;
    if (pending_.Find(req.event_id()) != nullptr)
      return absl::AlreadyExistsError(absl::StrCat(
          "event_id '", req.event_id(), "' is taken by a decision of instance '", name_,
          "' still waiting for its reward, expected a new id for each decision"));
  }
  return absl::OkStatus();
}

absl::Status InstanceState::SelectSlots(const SelectContext& ctx,
                                        const bandit::v1::SelectRequest& req,
                                        const SelectInputs& in, int64_t now,
                                        bandit::v1::Decision* out, bandit::v1::JournalRecord* rec,
                                        const std::string* replay_event_id) {
  const bool named = req.actions_size() > 0;
  // Over the instance's own arm set, each slot's policy call gets a mask of the arms it may
  // choose (SelectContext::allowed_arms) instead of candidate vectors.
  const bool arm_set = policy_->context_kind() == ContextKind::kNone;
  const std::vector<std::string> arm_ids =
      arm_set ? policy_->ArmIds() : std::vector<std::string>();
  const int n = static_cast<int>(in.slots[0].allowed.size());
  auto id_of = [&](int i) {
    return named ? req.actions(i).id() : arm_set ? arm_ids[i] : absl::StrCat(i);
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
            req.slots(static_cast<int>(k)).id(), "': instance '", name_, "' is in ",
            bandit::v1::LearningMode_Name(mode), " mode, which serves each slot's baseline"));
  }
  PendingDecision event;
  event.seq = next_seq_;
  event.event_id = req.event_id().empty() ? FormatEventId(uid_, event.seq) : req.event_id();
  if (replay_event_id && event.event_id != *replay_event_id)
    return absl::DataLossError(absl::StrCat("replay of instance '", name_, "' produced event '",
                                            event.event_id, "' where the journal has '",
                                            *replay_event_id, "'"));
  event.expires_at_ms = now + config_.pending().reward_wait_ms();
  event.awaiting_activation = req.defer_activation();
  event.learning_mode = mode;
  event.slots.reserve(in.slots.size());
  // The log keeps each slot's probability vector where the policy has one (the shadows ask for
  // it as in a single Select; asking changes no decision).
  SelectContext policy_ctx = ctx;
  policy_ctx.want_scores = ctx.want_scores || log_.enabled() || !shadows_.empty();
  // APPRENTICE: the policy decides each slot for its probability of the slot's baseline, which
  // needs its whole distribution (as in a single Select).
  if (mode == bandit::v1::APPRENTICE) {
    policy_ctx.want_scores = true;
    policy_ctx.posteriors_suffice = false;
  }
  std::vector<char> taken(n, 0);
  // Reused per thread: assigning a vector of the same length keeps its storage.
  thread_local std::vector<Vector> offered;
  // Named actions for a policy that takes sparse input: the slot's vectors stay sparse.
  const bool sparse = in.is_sparse;
  thread_local std::vector<SparseVector> offered_sparse;
  thread_local std::vector<Vector> offered_dense;  // for the shadows, which score dense vectors
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
      if (!shadows_.empty()) {
        // Shadows score dense vectors: AddShadow admits them on a sparse instance only when
        // 2^bits is within --max_feature_dim.
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
    // The policy did not make the served decision: it learns the baseline's reward as logged
    // data.
    p.learn_direct = mode == bandit::v1::APPRENTICE;
    p.slot_id = req.slots(k).id();
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
    if (req.return_scores()) {
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
        e.named = &req;
        e.named_actions = position;
      } else {
        e.candidates = offered_now;
      }
      e.slot = &req.slots(static_cast<int>(k));
      e.slot_index = static_cast<int>(k);
      e.slot_actions = position;
      e.baseline_index = slot.baseline;
      const int64_t dropped = log_.Append(e, now);
      stats_.set_decision_log_evicted(SaturatingAdd(stats_.decision_log_evicted(), dropped));
    }
    event.slots.push_back(std::move(p));
  }
  // The decision's own fields describe its first slot.
  const bandit::v1::SlotDecision& first = out->slots(0);
  out->set_event_id(event.event_id);
  out->set_arm_index(first.arm_index());
  out->set_action_id(first.action_id());
  if (!named) out->set_arm_id(first.action_id());
  out->set_propensity(first.propensity());
  out->set_expires_at_ms(event.expires_at_ms);
  // Replayed from the request (borrowed, as a single Select's; Instance::Commit hands it back).
  rec->unsafe_arena_set_allocated_select(const_cast<bandit::v1::SelectRequest*>(&req));
  rec->set_event_id(event.event_id);
  RecordDecision(std::move(event), any_gap ? gap_sum : std::numeric_limits<double>::quiet_NaN());
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
                                   const bandit::v1::SelectRequest& req, const SelectInputs& in,
                                   const std::string& event_id, uint64_t seq, int64_t now) {
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
        e.named = &req;
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
    e.chosen_arm_id = req.actions(in.action_of[d.arm]).id();
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
        // Shadows score dense vectors: AddShadow admits them on a sparse instance only when
        // 2^bits is within --max_feature_dim.
        thread_local std::vector<Vector> dense;
        DensifyAll(ctx.sparse_candidates, &dense);
        logged.actions = dense;
        logged.num_actions = static_cast<int>(dense.size());
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
  if (d.argmax_posteriors) {
    out.argmax_posteriors->first = restrict(d.argmax_posteriors->first);
    out.argmax_posteriors->second = restrict(d.argmax_posteriors->second);
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

PendingDecision InstanceState::ForShadows(const PendingDecision& p) const {
  PendingDecision dense = p;
  if (!p.sparse_index.empty() && feature_space_ != nullptr) {
    dense.features = Densify(SparseVector{p.sparse_index, p.sparse_value},
                             feature_space_->dimension());
    dense.sparse_index.clear();
    dense.sparse_value.clear();
  }
  return dense;
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
  if (policy_->context_kind() == ContextKind::kNone) {
    const auto ids = policy_->ArmIds();
    auto it = std::find(ids.begin(), ids.end(), p.arm_id);
    if (it != ids.end()) obs.arm = static_cast<int>(it - ids.begin());
  }
  return obs;
}

absl::Status InstanceState::NotPendingError(const std::string& event_id) const {
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

namespace {
std::string SlotList(const PendingDecision& event) {
  std::string out;
  for (const PendingDecision& s : event.slots) absl::StrAppend(&out, out.empty() ? "" : ", ", s.slot_id);
  return out;
}
}  // namespace

PendingDecision* InstanceState::TargetOf(PendingDecision* event, const std::string& slot_id) {
  if (event->slots.empty()) return event;
  for (PendingDecision& s : event->slots)
    if (s.slot_id == slot_id) return &s;
  return nullptr;
}

bool InstanceState::KeepsRewards(const PendingDecision& event) const {
  return event.awaiting_activation || SumsRewards(event);
}

absl::StatusOr<Observation> InstanceState::ObservationFor(const bandit::v1::UpdateRequest& req,
                                                          const PendingDecision** pending) const {
  Observation obs;
  obs.reward = req.reward();
  *pending = nullptr;
  if (req.target_case() == bandit::v1::UpdateRequest::kEventId) {
    const PendingDecision* p = pending_.Find(req.event_id());
    if (p == nullptr) return NotPendingError(req.event_id());
    const PendingDecision* target = p;
    if (!p->slots.empty()) {
      if (req.slot_id().empty())
        return absl::InvalidArgumentError(absl::StrCat(
            "slot_id is empty, expected one of the slots of multi-slot event '", req.event_id(),
            "': ", SlotList(*p)));
      target = TargetOf(const_cast<PendingDecision*>(p), req.slot_id());
      if (target == nullptr)
        return absl::InvalidArgumentError(absl::StrCat("slot_id '", req.slot_id(),
                                                       "' is not a slot of event '", req.event_id(),
                                                       "', expected one of: ", SlotList(*p)));
      if (target->done)
        return absl::FailedPreconditionError(
            absl::StrCat("slot '", req.slot_id(), "' of event '", req.event_id(),
                         "' was already rewarded; a reward is applied once"));
    } else if (!req.slot_id().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("slot_id is '", req.slot_id(), "', but event '",
                                                     req.event_id(),
                                                     "' is a single decision (it has no slots)"));
    }
    if (KeepsRewards(*p)) {
      if (!SumsRewards(*p) && target->rewards > 0)
        return absl::FailedPreconditionError(absl::StrCat(
            "event '", req.event_id(), "' already has a reward, kept until it is activated; a "
            "reward is applied once"));
      if (req.embedding_size() > 0 || req.has_fidelity())
        return absl::InvalidArgumentError(absl::StrCat(
            "embedding or fidelity is set for event '", req.event_id(),
            "', whose reward is kept (deferred activation or SUM aggregation), expected a reward "
            "alone"));
    }
    *pending = target;
    Observation joined = PendingObservation(*target);
    joined.reward = req.reward();
    return joined;
  }
  if (req.target_case() != bandit::v1::UpdateRequest::kDirect)
    return absl::InvalidArgumentError(
        "target is not set, expected event_id (from Select) or direct (logged data)");
  const auto& direct = req.direct();
  obs.direct = true;
  switch (policy_->context_kind()) {
    case ContextKind::kNone: {
      if (direct.arm_id().empty())
        return absl::InvalidArgumentError(
            "direct.arm_id is empty, expected the arm that was played");
      obs.arm_id = direct.arm_id();
      const auto ids = policy_->ArmIds();
      auto it = std::find(ids.begin(), ids.end(), direct.arm_id());
      if (it == ids.end())
        return absl::NotFoundError(absl::StrCat("direct.arm_id '", direct.arm_id(),
                                                "' is not an arm of instance '", name_, "'"));
      obs.arm = static_cast<int>(it - ids.begin());
      break;
    }
    case ContextKind::kCandidates: {
      if (HasNamedInputs(direct) || feature_space_) {
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
      if (direct.features_size() == 0)
        return absl::InvalidArgumentError(
            "direct.features is empty, expected the played arm's feature vector");
      auto v = ToVector("direct.features", direct.features(), limits_.max_vector_size);
      if (!v.ok()) return v.status();
      obs.features = *std::move(v);
      break;
    }
    case ContextKind::kPoint: {
      if (direct.x_size() == 0)
        return absl::InvalidArgumentError("direct.x is empty, expected the input vector");
      auto v = ToVector("direct.x", direct.x(), limits_.max_vector_size);
      if (!v.ok()) return v.status();
      obs.features = *std::move(v);
      break;
    }
  }
  return obs;
}

absl::StatusOr<Vector> InstanceState::CheckUpdate(const bandit::v1::UpdateRequest& req) const {
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
  return ToVector("embedding", req.embedding(), limits_.max_vector_size);
}

absl::Status InstanceState::CheckTarget(const bandit::v1::UpdateRequest& req) const {
  const PendingDecision* pending = nullptr;
  return ObservationFor(req, &pending).status();
}

absl::Status InstanceState::Update(const bandit::v1::UpdateRequest& req, Vector embedding,
                                   int64_t now, bandit::v1::UpdateResponse* out,
                                   bandit::v1::JournalRecord* rec) {
  if (req.target_case() == bandit::v1::UpdateRequest::kDirect &&
      ModeOf(config_) == bandit::v1::LOGGING_ONLY)
    return absl::FailedPreconditionError(absl::StrCat(
        "instance '", name_, "' is in LOGGING_ONLY mode and learns nothing, expected rewards of "
        "its decisions only (set the learning mode to ONLINE or APPRENTICE to learn logged data)"));
  const PendingDecision* pending = nullptr;
  auto obs = ObservationFor(req, &pending);
  if (!obs.ok()) {
    if (obs.status().code() == absl::StatusCode::kNotFound ||
        obs.status().code() == absl::StatusCode::kFailedPrecondition)
      stats_.set_rejected_rewards(SaturatingAdd(stats_.rejected_rewards(), 1));
    return obs.status();
  }
  // Borrowed, not copied: only read while the record is encoded; Instance::Commit hands it back.
  auto journal = [&] {
    out->set_updates(stats_.updates());
    rec->unsafe_arena_set_allocated_update(const_cast<bandit::v1::UpdateRequest*>(&req));
    return absl::OkStatus();
  };
  PendingDecision* event = nullptr;
  PendingDecision* target = nullptr;
  if (pending != nullptr) {
    event = pending_.FindMutable(req.event_id());
    target = TargetOf(event, req.slot_id());
    if (KeepsRewards(*event)) {
      // Learned when activated (EARLIEST) or when the wait ends (SUM).
      target->reward_sum += req.reward();
      ++target->rewards;
      return journal();
    }
  }
  obs->embedding = std::move(embedding);
  if (req.has_fidelity()) obs->fidelity = req.fidelity();
  // A decision made in LOGGING_ONLY mode is not learned by the policy (its reward still counts).
  if (target == nullptr || target->learning_mode != bandit::v1::LOGGING_ONLY)
    if (auto s = policy_->Update(*obs); !s.ok())
      return s;  // pending kept: a fixed reward may follow
  if (target != nullptr && !shadows_.empty())
    shadows_.Learn(ForShadows(*target), req.reward(), obs->embedding, obs->fidelity);
  if (target != nullptr) {
    CountApprentice(*target, req.reward());
    CountSlot(target->slot_index, 0, 1, req.reward());
    FinishTarget(event, target, bandit::v1::OUTCOME_REWARDED, req.reward(), now);
  }
  stats_.set_updates(SaturatingAdd(stats_.updates(), 1));
  stats_.set_reward_sum(stats_.reward_sum() + req.reward());
  if (req.has_best_expected_reward()) {
    const double chosen = req.has_expected_reward() ? req.expected_reward() : req.reward();
    stats_.set_pseudo_regret(stats_.pseudo_regret() + req.best_expected_reward() - chosen);
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
  if (!shadows_.empty()) shadows_.Learn(ForShadows(target), reward, Vector(), std::nullopt);
  CountApprentice(target, reward);
  CountSlot(target.slot_index, 0, 1, reward);
  stats_.set_updates(SaturatingAdd(stats_.updates(), 1));
  stats_.set_reward_sum(stats_.reward_sum() + reward);
  return absl::OkStatus();
}

absl::Status InstanceState::Activate(const bandit::v1::ActivateRequest& req, int64_t now) {
  if (req.event_id().empty())
    return absl::InvalidArgumentError("event_id is empty, expected the event id of a decision");
  PendingDecision* event = pending_.FindMutable(req.event_id());
  if (event == nullptr) return NotPendingError(req.event_id());
  if (!event->awaiting_activation)
    return absl::InvalidArgumentError(absl::StrCat(
        "event '", req.event_id(), "' is already active: it was activated before, or made "
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
    if (pending_.Find(req.event_id()) == nullptr) break;
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

absl::Status InstanceState::Reset() {
  auto fresh = CreatePolicy(config_.policy(), config_.seed());
  if (!fresh.ok()) return fresh.status();
  // Shadows restart with the instance (their estimates were about the policy just forgotten).
  if (auto s = shadows_.Reset(); !s.ok()) return s;
  policy_ = *std::move(fresh);
  pending_.Clear();
  apprentice_ = ApprenticeFigures();
  apprentice_slots_.clear();
  // The log is a record of what happened, not learned state: it stays, and the decisions whose
  // rewards can no longer be joined say so.
  log_.DiscardPending(0);
  const int64_t evicted = stats_.decision_log_evicted();
  stats_.Clear();
  stats_.set_decision_log_evicted(evicted);
  return absl::OkStatus();
}

absl::Status InstanceState::SetMixtureReference(const bandit::v1::SetMixtureReferenceRequest& req) {
  using bandit::v1::MixtureObjective;
  if (!config_.policy().has_mixture())
    return absl::FailedPreconditionError(absl::StrCat(
        "instance '", name_, "' runs policy '", policy_->name(),
        "', which has no reference distribution; expected a mixture instance (FD or KD)"));
  const MixtureObjective objective = config_.policy().mixture().objective();
  if (objective != bandit::v1::FD && objective != bandit::v1::KD &&
      objective != bandit::v1::OBJECTIVE_UNSPECIFIED)
    return absl::FailedPreconditionError(absl::StrCat(
        "instance '", name_, "' scores with ", bandit::v1::MixtureObjective_Name(objective),
        ", which uses no reference; expected an FD or KD mixture"));
  const bool stats = req.mean_size() > 0 || req.covariance_size() > 0;
  const bool embeddings = req.embeddings_size() > 0;
  if (stats == embeddings)
    return absl::InvalidArgumentError(absl::StrCat(
        "expected either mean and covariance or embeddings, got ", stats ? "both" : "neither"));
  if (stats && req.append())
    return absl::InvalidArgumentError("append applies to embeddings, not to mean and covariance");
  if (stats && objective == bandit::v1::KD)
    return absl::InvalidArgumentError(
        "KD compares against reference embeddings, expected embeddings rather than mean and "
        "covariance");

  // The request becomes a new config (the reference lives in the mixture config, so a reset,
  // a snapshot or an export keeps it); the policy factory validates it, once, in
  // ApplyConfig (shapes, finiteness, a symmetric PSD covariance). Checked here only what the
  // config cannot express: one embedding per row, and the server's bound on their total.
  InstanceConfig next = config_;
  auto* m = next.mutable_policy()->mutable_mixture();
  const int d = m->dimension();
  if (stats) {
    m->mutable_reference_mean()->Assign(req.mean().begin(), req.mean().end());
    m->mutable_reference_covariance()->Assign(req.covariance().begin(), req.covariance().end());
    m->clear_reference_samples();
  } else {
    if (!req.append()) m->clear_reference_samples();
    m->clear_reference_mean();
    m->clear_reference_covariance();
    const int64_t total = m->reference_samples_size() + int64_t{req.embeddings_size()} * d;
    if (total > kMaxReferenceValues)
      return absl::ResourceExhaustedError(
          absl::StrCat("the reference would hold ", total,
                       " values (embeddings x dimension), expected at most ", kMaxReferenceValues));
    m->mutable_reference_samples()->Reserve(static_cast<int>(total));
    for (int i = 0; i < req.embeddings_size(); ++i) {
      const auto& e = req.embeddings(i).values();
      if (e.size() != d)
        return absl::InvalidArgumentError(absl::StrCat("embeddings[", i, "] has ", e.size(),
                                                       " values, expected the dimension ", d));
      m->mutable_reference_samples()->Add(e.begin(), e.end());
    }
  }
  if (auto s = ApplyConfig(std::move(next)); !s.ok())
    return absl::Status(s.code(), absl::StrCat("reference: ", s.message()));
  return absl::OkStatus();
}

absl::Status InstanceState::Configure(const bandit::v1::ConfigureInstanceRequest& req) {
  if (!req.has_reward_wait_ms() && !req.has_on_expiry() && !req.has_default_reward() &&
      !req.has_reward_aggregation() && !req.has_epsilon() && !req.has_learning_mode())
    return absl::InvalidArgumentError(
        "no setting is set, expected at least one of reward_wait_ms, on_expiry, default_reward, "
        "reward_aggregation, epsilon, learning_mode");
  // Checked as NormalizeConfig checks them at creation, all before anything changes.
  const bandit::v1::RewardAggregation aggregation_before = config_.pending().reward_aggregation();
  InstanceConfig next = config_;
  auto* p = next.mutable_pending();
  if (req.has_reward_wait_ms()) {
    if (req.reward_wait_ms() < 1 || req.reward_wait_ms() > kMaxRewardWaitMs)
      return absl::InvalidArgumentError(absl::StrCat("reward_wait_ms is ", req.reward_wait_ms(),
                                                     ", expected 1..", kMaxRewardWaitMs,
                                                     " (7 days)"));
    p->set_reward_wait_ms(req.reward_wait_ms());
  }
  if (req.has_on_expiry()) {
    if (!bandit::v1::ExpiryAction_IsValid(req.on_expiry()))
      return absl::InvalidArgumentError(absl::StrCat(
          "on_expiry is ", req.on_expiry(), ", expected APPLY_DEFAULT or DROP"));
    p->set_on_expiry(req.on_expiry() == bandit::v1::EXPIRY_ACTION_UNSPECIFIED
                         ? bandit::v1::APPLY_DEFAULT
                         : req.on_expiry());
  }
  if (req.has_default_reward()) {
    if (!std::isfinite(req.default_reward()))
      return absl::InvalidArgumentError(absl::StrCat(
          "default_reward is ", req.default_reward(), ", expected a finite number"));
    p->set_default_reward(req.default_reward());
  }
  if (req.has_reward_aggregation()) {
    if (!bandit::v1::RewardAggregation_IsValid(req.reward_aggregation()))
      return absl::InvalidArgumentError(absl::StrCat(
          "reward_aggregation is ", req.reward_aggregation(), ", expected EARLIEST or SUM"));
    p->set_reward_aggregation(req.reward_aggregation() ==
                                      bandit::v1::REWARD_AGGREGATION_UNSPECIFIED
                                  ? bandit::v1::EARLIEST
                                  : req.reward_aggregation());
  }
  if (req.has_learning_mode()) {
    if (auto s = CheckLearningMode(req.learning_mode(), *policy_, "learning_mode"); !s.ok())
      return s;
    next.set_learning_mode(req.learning_mode() == bandit::v1::LEARNING_MODE_UNSPECIFIED
                               ? bandit::v1::ONLINE
                               : req.learning_mode());
  }
  if (req.has_epsilon()) {
    if (!(req.epsilon() >= 0.0 && req.epsilon() <= 1.0))
      return absl::InvalidArgumentError(
          absl::StrCat("epsilon is ", req.epsilon(), ", expected a number in [0, 1]"));
    auto* policy = next.mutable_policy();
    if (policy->has_epsilon_greedy()) {
      policy->mutable_epsilon_greedy()->set_epsilon(req.epsilon());
    } else if (policy->has_glm_epsilon_greedy()) {
      policy->mutable_glm_epsilon_greedy()->set_epsilon(req.epsilon());
    } else {
      return absl::FailedPreconditionError(absl::StrCat(
          "epsilon is set, but instance '", name_, "' runs policy '", policy_->name(),
          "', which has no epsilon; expected epsilon_greedy or glm_epsilon_greedy"));
    }
    // The policy takes the new epsilon keeping what it learned (Policy::Reconfigure); the last
    // step that can fail, so nothing has changed if it does.
    if (auto s = ApplyConfig(next); !s.ok()) return s;
  }
  // Decisions already pending keep the aggregation they were made under.
  if (p->reward_aggregation() != aggregation_before) {
    pending_.ForEach([&](PendingDecision& d) {
      if (d.aggregation == bandit::v1::REWARD_AGGREGATION_UNSPECIFIED)
        d.aggregation = aggregation_before;
    });
  }
  config_ = std::move(next);
  return absl::OkStatus();
}

absl::Status InstanceState::ApplyConfig(InstanceConfig next) {
  if (auto s = ReconfigurePolicy(*policy_, next.policy(), next.seed()); !s.ok()) return s;
  config_ = std::move(next);
  SyncConfigArms();
  return absl::OkStatus();
}

absl::Status InstanceState::AdmitArms(const bandit::v1::AddArmsRequest& req) const {
  if (req.arms_size() == 0)
    return absl::InvalidArgumentError("arms is empty, expected at least one arm");
  if (req.arms_size() > limits_.max_arms_per_request)
    return absl::InvalidArgumentError(absl::StrCat(
        "arms has ", req.arms_size(), " entries, expected at most ", limits_.max_arms_per_request));
  if (const int64_t have = static_cast<int64_t>(policy_->ArmIds().size());
      have + req.arms_size() > limits_.max_arms)
    return absl::ResourceExhaustedError(absl::StrCat(
        "instance '", name_, "' has ", have, " arms; adding ", req.arms_size(),
        " would exceed the configured maximum of ", limits_.max_arms, " (--max_arms)"));
  return absl::OkStatus();
}

absl::Status InstanceState::AdmitArmRemoval(const bandit::v1::RemoveArmsRequest& req) const {
  if (req.arm_ids_size() == 0)
    return absl::InvalidArgumentError("arm_ids is empty, expected at least one arm id");
  if (req.arm_ids_size() > limits_.max_arms_per_request)
    return absl::InvalidArgumentError(absl::StrCat("arm_ids has ", req.arm_ids_size(),
                                                   " entries, expected at most ",
                                                   limits_.max_arms_per_request));
  return absl::OkStatus();
}

absl::Status InstanceState::AddArms(const bandit::v1::AddArmsRequest& req) {
  bandit::v1::PolicyState before;
  policy_->Save(&before);
  const bandit::v1::PolicyConfig config_before = config_.policy();
  for (int i = 0; i < req.arms_size(); ++i) {
    if (auto s = policy_->AddArm(req.arms(i)); !s.ok()) {
      RollBack(config_before, before);
      return absl::Status(s.code(), absl::StrCat("arms[", i, "]: ", s.message()));
    }
    *config_.mutable_policy()->add_arms() = req.arms(i);
  }
  if (auto s = shadows_.AddArms(req); !s.ok()) {
    RollBack(config_before, before);
    return s;
  }
  SyncConfigArms();
  return absl::OkStatus();
}

absl::Status InstanceState::RemoveArms(const bandit::v1::RemoveArmsRequest& req) {
  bandit::v1::PolicyState before;
  policy_->Save(&before);
  const bandit::v1::PolicyConfig config_before = config_.policy();
  for (int i = 0; i < req.arm_ids_size(); ++i) {
    if (auto s = policy_->RemoveArm(req.arm_ids(i)); !s.ok()) {
      RollBack(config_before, before);
      return absl::Status(s.code(), absl::StrCat("arm_ids[", i, "]: ", s.message()));
    }
  }
  if (auto s = shadows_.RemoveArms(req); !s.ok()) {
    RollBack(config_before, before);
    return s;
  }
  SyncConfigArms();
  return absl::OkStatus();
}

void InstanceState::RollBack(const bandit::v1::PolicyConfig& config,
                             const bandit::v1::PolicyState& state) {
  // A multi-arm change failed part-way: rebuild the policy exactly as it was before the request.
  *config_.mutable_policy() = config;
  auto fresh = CreatePolicy(config, config_.seed());
  if (fresh.ok() && (*fresh)->Restore(state).ok()) policy_ = *std::move(fresh);
}

bandit::v1::InstanceStats InstanceState::Stats(
    std::vector<std::pair<std::string, double>>* summary) const {
  bandit::v1::InstanceStats stats = stats_;
  stats.set_pending(pending_.size());
  stats.set_state_bytes(policy_->StateBytes());
  stats.set_decision_log_events(log_.events());
  stats.set_decision_log_first_ms(log_.first_decided_ms());
  stats.set_decision_log_last_ms(log_.last_decided_ms());
  stats.set_decision_log_bytes(log_.bytes());
  if (summary) *summary = policy_->Summary();
  return stats;
}

void InstanceState::Describe(bandit::v1::Instance* out) const {
  out->Clear();
  out->set_name(name_);
  *out->mutable_config() = config_;
  *out->mutable_stats() = stats_;
  out->mutable_stats()->set_pending(pending_.size());
  out->mutable_stats()->set_state_bytes(policy_->StateBytes());
  out->mutable_stats()->set_decision_log_events(log_.events());
  out->mutable_stats()->set_decision_log_first_ms(log_.first_decided_ms());
  out->mutable_stats()->set_decision_log_last_ms(log_.last_decided_ms());
  out->mutable_stats()->set_decision_log_bytes(log_.bytes());
  for (const auto& [k, v] : policy_->Summary()) (*out->mutable_summary())[k] = v;
  for (const auto& id : policy_->ArmIds()) out->add_arm_ids(id);
  const Vector w = policy_->Weights();
  out->mutable_weights()->Assign(w.data(), w.data() + w.size());
  shadows_.Describe(out);
  if (apprentice_.estimators.events() > 0 || ModeOf(config_) == bandit::v1::APPRENTICE) {
    auto* a = out->mutable_apprentice();
    apprentice_.Describe(a);
    for (size_t k = 0; k < apprentice_slots_.size(); ++k) {
      auto* slot = a->add_slots();
      slot->set_position(static_cast<int32_t>(k));
      apprentice_slots_[k].Describe(slot);
    }
  }
}

void InstanceState::ApprenticeFigures::Describe(bandit::v1::ApprenticeStatus* a) const {
  a->set_events(estimators.events());
  bandit::v1::OpeEstimatorState sums;  // the reward sum as added up, not mean x count
  estimators.Save(&sums);
  a->set_reward_sum(sums.logged_sum());
  SetEstimate(estimators.Logged(), a->mutable_baseline());
  SetEstimate(estimators.Ips(), a->mutable_ips());
  SetEstimate(estimators.Snips(), a->mutable_snips());
  a->set_policy_chose_baseline(chose_baseline);
  a->set_imitated_reward_sum(imitated_reward);
  a->set_effective_sample_size(estimators.EffectiveSampleSize());
}

absl::Status InstanceState::AddShadow(bandit::v1::AddShadowRequest* req, int64_t max_shadows) {
  // Shadows score and learn dense vectors (and keep a dense direct model): over named features
  // that is 2^bits per action, admitted within the full-matrix bound only.
  if (feature_space_ != nullptr && feature_space_->dimension() > limits_.max_feature_dim)
    return absl::InvalidArgumentError(absl::StrCat(
        "shadow '", req->shadow(), "' would score dense vectors of dimension 2^",
        feature_space_->options().bits, " = ", feature_space_->dimension(),
        ", expected at most --max_feature_dim=", limits_.max_feature_dim,
        ": shadows are not available on an instance with this many feature bits"));
  auto shadow = shadows_.Prepare(
      name_, *policy_, config_, *req,
      [&](InstanceConfig* c) { return NormalizeConfig(name_ + ":" + req->shadow(), limits_, c); },
      max_shadows);
  if (!shadow.ok()) return shadow.status();
  // Journaled normalized (seed and arms filled in), so replay builds the same shadow.
  *req->mutable_config() = shadow->config;
  shadows_.Insert(*std::move(shadow));
  return absl::OkStatus();
}

absl::Status InstanceState::RemoveShadow(const bandit::v1::RemoveShadowRequest& req) {
  auto taken = shadows_.Take(name_, req.shadow());
  if (!taken.ok()) return taken.status();
  return absl::OkStatus();
}

absl::Status InstanceState::PromoteShadow(const bandit::v1::PromoteShadowRequest& req) {
  auto taken = shadows_.Take(name_, req.shadow());
  if (!taken.ok()) return taken.status();
  // The shadow's policy object, with everything it learned and its random engine, becomes the
  // served policy; its config becomes the instance's (so Reset and recovery rebuild it).
  *config_.mutable_policy() = taken->config.policy();
  config_.set_seed(taken->config.seed());
  policy_ = std::move(taken->policy);
  // Decisions still pending were made by the policy just dropped: their memos mean nothing to
  // the new one, which learns their rewards as logged data.
  pending_.ForEach([](PendingDecision& p) {
    p.learn_direct = true;
    p.memo.resize(0);
  });
  SyncConfigArms();
  return absl::OkStatus();
}

}  // namespace bandit::server

namespace bandit::server {

InstanceState::Memory InstanceState::MemoryBytes(bool refresh) {
  Memory& m = memory_;
  if (refresh || policy_->context_kind() != ContextKind::kNone) m.policy = policy_->StateBytes();
  if (refresh || (!shadows_.empty() && policy_->context_kind() != ContextKind::kNone))
    m.shadows = shadows_.StateBytes();
  if (refresh)
    m.overhead = kInstanceOverheadBytes + static_cast<int64_t>(config_.SpaceUsedLong()) +
                 static_cast<int64_t>(name_.size()) +
                 ArmContainerBytes(config_.policy().arms_size()) *
                     (1 + static_cast<int64_t>(shadows_.size()));
  m.pending = pending_.Bytes();
  m.log = log_.MemoryBytes();
  return m;
}

absl::StatusOr<int64_t> InstanceState::DeclaredBytes(const bandit::v1::CreateInstanceRequest& req,
                                                     const InstanceLimits& limits) {
  if (!req.has_config())
    return absl::InvalidArgumentError(
        "config is missing, expected an InstanceConfig with a policy");
  InstanceConfig config = req.config();
  if (auto s = NormalizeConfig(req.name(), limits, &config); !s.ok()) return s;
  // The dimension a feature space gives the policy is filled in by NormalizeConfig.
  auto policy = DeclaredStateBytes(config.policy());
  if (!policy.ok()) return policy.status();
  // The config's arms as they will be held (num_arms becomes one ArmSpec per arm).
  const int64_t arms = config.policy().arms_size() > 0 ? config.policy().arms_size()
                                                       : std::max(0, config.policy().num_arms());
  constexpr int64_t kArmSpecBytes = 64;  // an ArmSpec message with a short id, as held
  return *policy + kInstanceOverheadBytes + static_cast<int64_t>(config.SpaceUsedLong()) +
         static_cast<int64_t>(req.name().size()) + ArmContainerBytes(arms) +
         (config.policy().arms_size() > 0 ? 0 : arms * kArmSpecBytes);
}

int64_t InstanceState::ArmContainerBytes(int64_t arms) {
  constexpr int64_t kSlot = sizeof(std::pair<const std::string, int>) + 1;
  return arms * static_cast<int64_t>(sizeof(std::string)) + arms * kSlot * 16 / 7;
}

absl::StatusOr<int64_t> InstanceState::DeclaredBytes(const bandit::v1::InstanceSnapshot& snap,
                                                     const InstanceLimits& limits) {
  bandit::v1::CreateInstanceRequest req;
  req.set_name(snap.name());
  *req.mutable_config() = snap.config();
  auto bytes = DeclaredBytes(req, limits);
  if (!bytes.ok()) return bytes.status();
  int64_t total = *bytes;
  for (const auto& shadow : snap.shadows()) {
    auto b = DeclaredStateBytes(shadow.config().policy());
    if (!b.ok()) return b.status();
    // Its direct model as the snapshot holds it (doubles, encoded in about their size).
    total += *b + static_cast<int64_t>(shadow.direct_model().ByteSizeLong());
  }
  // Pending decisions as the table will hold them: each record's doubles and ids in about its
  // encoded size, plus the table's per-decision cost.
  for (const auto& p : snap.pending())
    total += PendingTable::BytesPerDecision(static_cast<int64_t>(p.ByteSizeLong()));
  // The log holds its entries encoded, plus an index entry each and a partly used chunk.
  if (snap.decision_log_size() > 0) {
    int64_t log = static_cast<int64_t>(DecisionLog::kMaxChunkBytes);
    for (const auto& d : snap.decision_log())
      log += static_cast<int64_t>(d.ByteSizeLong()) + 64;
    total += log;
  }
  return total;
}

int64_t InstanceState::NewDecisionBytes(const SelectInputs& in) const {
  constexpr int64_t kDouble = sizeof(double);
  // A memo is a few doubles (OKS: one per kernel); ids are at most 128 characters.
  constexpr int64_t kMemoAndIds = 64 * kDouble + 3 * 129;
  int64_t longest = in.x.size(), all = in.x.size();
  for (const Vector& c : *in.candidates) {
    longest = std::max<int64_t>(longest, c.size());
    all += c.size();
  }
  // A sparse vector's term is an index and a value: 12 bytes, counted in doubles.
  auto sparse_doubles = [](const SparseVector& v) {
    return (static_cast<int64_t>(v.size()) * 12 + 7) / 8;
  };
  for (const SparseVector& c : *in.sparse) {
    longest = std::max<int64_t>(longest, sparse_doubles(c));
    all += sparse_doubles(c);
  }
  for (const auto& slot : in.slots) {
    for (const Vector& c : slot.candidates) longest = std::max<int64_t>(longest, c.size());
    for (const SparseVector& c : slot.sparse_candidates)
      longest = std::max<int64_t>(longest, sparse_doubles(c));
  }
  const int64_t slots = std::max<int64_t>(1, static_cast<int64_t>(in.slots.size()));
  const int64_t per_choice = longest * kDouble + kMemoAndIds +
                             static_cast<int64_t>(shadows_.size() * sizeof(ShadowScore));
  int64_t heap = per_choice * slots;
  if (!in.slots.empty()) heap += slots * static_cast<int64_t>(sizeof(PendingDecision));
  int64_t bytes = PendingTable::BytesPerDecision(heap);
  if (log_.enabled()) {
    // The entry holds every candidate (and, with slots, each slot's), the distribution and ids.
    const int64_t entry = (all + (slots + 1) * longest) * kDouble + kMemoAndIds + 1024;
    // At its retention bound the log drops as much as it takes in, into the chunks it has.
    if (log_.bytes() + entry <= config_.decision_log().max_bytes()) bytes += entry;
  }
  return bytes;
}

int64_t InstanceState::ChangeBytes(const bandit::v1::JournalRecord& rec) const {
  using R = bandit::v1::JournalRecord;
  auto declared = [](const bandit::v1::PolicyConfig& c) -> int64_t {
    auto b = DeclaredStateBytes(c);
    return b.ok() ? *b : 0;  // a config the change refuses anyway
  };
  switch (rec.op_case()) {
    case R::kAddArms: {
      bandit::v1::PolicyConfig next = config_.policy();
      for (const auto& a : rec.add_arms().arms()) *next.add_arms() = a;
      const int64_t served = declared(next) - declared(config_.policy());
      // The config holds the arms too; each arm-set shadow takes them as the served policy does.
      return (std::max<int64_t>(0, served) + ArmContainerBytes(rec.add_arms().arms_size())) *
                 static_cast<int64_t>(1 + shadows_.size()) +
             2 * static_cast<int64_t>(rec.add_arms().SpaceUsedLong());
    }
    case R::kAddShadow: {
      bandit::v1::PolicyConfig shadow = rec.add_shadow().config().policy();
      // An arm-set shadow that names no arms takes the instance's.
      if (shadow.arms_size() == 0 && shadow.num_arms() == 0)
        *shadow.mutable_arms() = config_.policy().arms();
      return declared(shadow) + ArmContainerBytes(shadow.arms_size()) +
             static_cast<int64_t>(shadow.SpaceUsedLong());
    }
    case R::kConfigure:  // a new epsilon: a fresh policy is built to take it from
      return rec.configure().has_epsilon() ? declared(config_.policy()) : 0;
    case R::kReset:
    case R::kSetMixtureReference:
      return declared(config_.policy()) +
             (rec.has_set_mixture_reference()
                  ? static_cast<int64_t>(rec.set_mixture_reference().ByteSizeLong())
                  : 0);
    default:
      return 0;
  }
}

}  // namespace bandit::server
