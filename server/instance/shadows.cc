#include "server/instance/shadows.h"

#include <algorithm>
#include <cmath>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/arms.h"
#include "core/common/sparse.h"
#include "core/dimension_limits.h"
#include "core/registry.h"
#include "server/instance/named_inputs.h"

namespace bandit::server {
namespace {

// The feature dimension a policy config declares (its `dimension` field), 0 if none: every
// contextual policy config names it so (instance_config.cc classifies them as feature dims).
int64_t DeclaredDimension(const bandit::v1::PolicyConfig& config) {
  const auto* oneof = config.GetDescriptor()->FindOneofByName("policy");
  if (oneof == nullptr) return 0;
  const auto* reflection = config.GetReflection();
  const auto* set = reflection->GetOneofFieldDescriptor(config, oneof);
  if (set == nullptr || set->type() != google::protobuf::FieldDescriptor::TYPE_MESSAGE) return 0;
  const google::protobuf::Message& policy = reflection->GetMessage(config, set);
  const auto* dim = policy.GetDescriptor()->FindFieldByName("dimension");
  if (dim == nullptr || dim->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_INT32)
    return 0;
  return policy.GetReflection()->GetInt32(policy, dim);
}

const char* KindName(ContextKind kind) {
  switch (kind) {
    case ContextKind::kNone:
      return "its own arm set";
    case ContextKind::kCandidates:
      return "candidate feature vectors";
    case ContextKind::kPoint:
      return "an input x";
  }
  return "?";
}

}  // namespace

int64_t ShadowSet::SparseDimension(const bandit::v1::InstanceConfig& instance_config) {
  if (!instance_config.has_feature_space()) return 0;
  const int bits = instance_config.feature_space().bits();
  if (bits < 1 || bits > 30) return 0;  // refused by the feature space's own check
  const int64_t dimension = int64_t{1} << bits;
  return dimension > kMaxDenseDimension ? dimension : 0;
}

void ToEstimate(const ope::Interval& in, bandit::v1::Estimate* out) {
  out->set_value(in.value);
  out->set_se(in.se);
  out->set_lo(in.lo);
  out->set_hi(in.hi);
}

absl::StatusOr<Shadow> ShadowSet::Prepare(
    const std::string& instance, const Policy& served,
    const bandit::v1::InstanceConfig& instance_config, const std::string& name,
    const bandit::v1::ShadowConfig& config,
    const std::function<absl::Status(bandit::v1::InstanceConfig*)>& normalize,
    int64_t max_shadows) const {
  if (auto s = CheckId("shadow", name); !s.ok()) return s;
  for (const Shadow& s : shadows_)
    if (s.name == name)
      return absl::AlreadyExistsError(
          absl::StrCat("instance '", instance, "' already has a shadow '", name,
                       "'; expected a new name (or RemoveShadow first)"));
  if (max_shadows <= 0)
    return absl::ResourceExhaustedError(absl::StrCat(
        "shadows are disabled on this server (--max_shadows=0); instance '", instance,
        "' cannot take shadow '", name, "'"));
  if (static_cast<int64_t>(shadows_.size()) >= max_shadows)
    return absl::ResourceExhaustedError(
        absl::StrCat("instance '", instance, "' has ", shadows_.size(),
                     " shadows, the configured maximum of ", max_shadows,
                     " (--max_shadows); remove one first"));
  if (!config.has_policy() ||
      config.policy().policy_case() == bandit::v1::PolicyConfig::POLICY_NOT_SET)
    return absl::InvalidArgumentError(
        "config.policy is missing, expected the shadow's PolicyConfig (one policy set)");
  Shadow shadow;
  shadow.name = name;
  shadow.config = config;
  bandit::v1::ShadowConfig& c = shadow.config;
  if (!std::isfinite(c.max_weight()) || c.max_weight() < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("config.max_weight is ", c.max_weight(),
                     ", expected 0 (no clipping) or a positive number"));
  if (!std::isfinite(c.ridge_lambda()) || c.ridge_lambda() < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("config.ridge_lambda is ", c.ridge_lambda(),
                     ", expected 0 (default 1) or a positive number"));
  if (c.ridge_lambda() == 0) c.set_ridge_lambda(1.0);
  bandit::v1::PolicyConfig* policy = c.mutable_policy();
  {
    bandit::v1::InstanceConfig as_instance;
    *as_instance.mutable_policy() = *policy;
    as_instance.set_seed(c.seed());
    // A named instance's shadow decides over the same hashed vectors: its dimension, when left
    // 0, is filled from the instance's feature space like the served policy's.
    if (instance_config.has_feature_space())
      *as_instance.mutable_feature_space() = instance_config.feature_space();
    if (auto s = normalize(&as_instance); !s.ok()) return s;
    c.set_seed(as_instance.seed());
    *policy = as_instance.policy();
  }
  // Arm-set policies that name no arms get the instance's. A policy that takes no arm set
  // refuses them: it is then built as given, and refused below for its context kind.
  absl::StatusOr<std::unique_ptr<Policy>> created;
  if (served.context_kind() == ContextKind::kNone && policy->arms_size() == 0 &&
      policy->num_arms() == 0) {
    bandit::v1::PolicyConfig with_arms = *policy;
    *with_arms.mutable_arms() = instance_config.policy().arms();
    created = CreatePolicy(with_arms, c.seed());
    if (created.ok()) {
      *policy = std::move(with_arms);
    } else if (auto as_given = CreatePolicy(*policy, c.seed()); as_given.ok()) {
      created = std::move(as_given);
    }
  } else {
    created = CreatePolicy(*policy, c.seed());
  }
  if (!created.ok())
    return absl::Status(created.status().code(),
                        absl::StrCat("config.policy: ", created.status().message()));
  shadow.policy = *std::move(created);
  const Policy& p = *shadow.policy;
  const std::string who = absl::StrCat("shadow '", name, "' (policy '", p.name(), "')");
  if (p.context_kind() != served.context_kind())
    return absl::InvalidArgumentError(
        absl::StrCat(who, " chooses among ", KindName(p.context_kind()),
                     ", expected a policy that chooses among ", KindName(served.context_kind()),
                     " like instance '", instance, "' (policy '", served.name(), "')"));
  if (p.context_kind() == ContextKind::kNone) {
    const std::vector<std::string> own = p.ArmIds();
    const std::vector<std::string> want = served.ArmIds();
    bool same = own.size() == want.size();
    for (size_t i = 0; same && i < want.size(); ++i)
      same = std::find(own.begin(), own.end(), want[i]) != own.end();
    if (!same)
      return absl::InvalidArgumentError(absl::StrCat(
          who, " has arms [", absl::StrJoin(own, ", "), "], expected the instance's arms [",
          absl::StrJoin(want, ", "), "] (or no arms: the shadow then takes the instance's)"));
    // The shadow's config lists the arms in its own slot order (as the instance's does).
    auto* arms = policy->mutable_arms();
    if (arms->empty()) {
      for (const auto& id : own) arms->Add()->set_id(id);
      policy->set_num_arms(0);
    }
  } else {
    const int64_t mine = DeclaredDimension(*policy);
    const int64_t theirs = DeclaredDimension(instance_config.policy());
    if (mine > 0 && theirs > 0 && mine != theirs)
      return absl::InvalidArgumentError(absl::StrCat(
          who, " has dimension ", mine, ", expected the instance's dimension ", theirs));
  }
  shadow.estimators = ope::Estimators(c.max_weight());
  shadow.model = ope::DirectModel(c.ridge_lambda());
  if (const int64_t sparse = SparseDimension(instance_config);
      sparse > 0 && p.context_kind() == ContextKind::kCandidates) {
    // Beyond the dense bound the candidates stay sparse, as bandit-ope replays such a log.
    if (!p.TakesSparse())
      return absl::InvalidArgumentError(absl::StrCat(
          who, " takes dense candidate vectors; instance '", instance,
          "' hashes its named features into 2^", instance_config.feature_space().bits(), " = ",
          sparse, " coordinates, beyond ", kMaxDenseDimension,
          " its shadows score sparse vectors: expected a policy that takes them (covariance: "
          "COVARIANCE_SKETCHED or COVARIANCE_DIAGONAL)"));
    shadow.sparse_model = std::make_unique<ope::SparseDirectModel>(c.ridge_lambda(), sparse);
  }
  shadow.id = next_id_;
  return shadow;
}

void ShadowSet::Insert(Shadow shadow) {
  next_id_ = std::max(next_id_, shadow.id + 1);
  shadows_.push_back(std::move(shadow));
}

absl::Status ShadowSet::CheckExists(const std::string& instance, const std::string& name) const {
  for (const Shadow& s : shadows_)
    if (s.name == name) return absl::OkStatus();
  std::vector<std::string> names;
  for (const Shadow& s : shadows_) names.push_back(s.name);
  return absl::NotFoundError(absl::StrCat("instance '", instance, "' has no shadow '", name,
                                          "'; its shadows: [", absl::StrJoin(names, ", "), "]"));
}

absl::StatusOr<Shadow> ShadowSet::Take(const std::string& instance, const std::string& name) {
  if (auto s = CheckExists(instance, name); !s.ok()) return s;
  auto it = std::find_if(shadows_.begin(), shadows_.end(),
                         [&](const Shadow& s) { return s.name == name; });
  Shadow out = std::move(*it);
  shadows_.erase(it);
  return out;
}

void ShadowSet::Score(const ope::LoggedContext& ctx, int served_action, double served_propensity,
                      std::vector<ShadowScore>* out) {
  // An action the served policy gave no usable probability cannot be reweighted.
  const bool usable = served_propensity > 0 && served_propensity <= 1 && served_action >= 0 &&
                      served_action < ctx.num_actions;
  for (Shadow& s : shadows_) {
    if (!usable) {
      ++s.errors;
      continue;
    }
    // A shadow sees the candidates in the form its direct model reads: sparse or dense.
    ope::LoggedContext mine = ctx;
    if (s.sparse_model != nullptr) {
      mine.actions = {};
    } else {
      mine.sparse_actions = {};
    }
    if (s.policy->context_kind() == ContextKind::kCandidates &&
        (s.sparse_model != nullptr ? mine.sparse_actions.empty() : mine.actions.empty())) {
      ++s.errors;
      continue;
    }
    auto target = ope::TargetDistribution(*s.policy, mine, s.name);
    if (!target.ok()) {
      ++s.errors;
      continue;
    }
    // q is learned from earlier rewards only (DirectModel: predict, then learn), so the DR
    // term's conditional mean is the shadow's value whatever q is.
    const Vector q =
        s.sparse_model != nullptr
            ? s.sparse_model->Predict(mine.sparse_actions)
            : s.model.Predict(mine.actions, mine.x, mine.arm_ids, mine.num_actions);
    ShadowScore score;
    score.shadow_id = s.id;
    score.target = target->pi[served_action];
    score.dm = target->pi.dot(q);
    score.q_logged = q[served_action];
    score.logged_propensity = served_propensity;
    score.exact = target->exact;
    out->push_back(score);
  }
}

void ShadowSet::Learn(const PendingDecision& p, int64_t dimension, double reward,
                      const std::optional<GeneratedSample>& sample) {
  // The chosen candidate in both forms: sparse as the decision kept it, dense (made once, when
  // a shadow reads it) for the shadows that take dense vectors.
  const bool sparse_choice = !p.sparse_index.empty();
  const SparseVector chosen_sparse{p.sparse_index, p.sparse_value};
  std::optional<Vector> densified;
  auto chosen_dense = [&]() -> const Vector& {
    if (!sparse_choice) return p.features;
    if (!densified) densified = Densify(chosen_sparse, dimension);
    return *densified;
  };
  for (Shadow& s : shadows_) {
    const ShadowScore* score = nullptr;
    for (const ShadowScore& sc : p.shadow_scores)
      if (sc.shadow_id == s.id) score = &sc;
    if (score == nullptr) {
      ++s.unscored;
      continue;
    }
    // The shadow learns the logged (x_t, a_t, r_t) as logged data (core/ope/target.h).
    ope::LoggedContext ctx;
    std::vector<std::string> arm_id;
    int action = 0;
    switch (s.policy->context_kind()) {
      case ContextKind::kCandidates:
        if (s.sparse_model != nullptr) {
          if (!sparse_choice) {  // made before the instance's candidates were sparse: none is
            ++s.errors;
            continue;
          }
          ctx.sparse_actions = std::span<const SparseVector>(&chosen_sparse, 1);
        } else {
          ctx.actions = std::span<const Vector>(&chosen_dense(), 1);
        }
        break;
      case ContextKind::kPoint:
        ctx.x = &p.features;
        action = p.arm;
        break;
      case ContextKind::kNone:
        arm_id.push_back(p.arm_id);
        ctx.arm_ids = &arm_id;
        break;
    }
    auto obs = ope::LoggedObservation(*s.policy, ctx, action, reward, s.name);
    if (!obs.ok()) {
      ++s.errors;
      continue;
    }
    obs->sample = sample;
    if (!s.policy->Update(*obs).ok()) {
      ++s.errors;
      continue;
    }
    s.estimators.AddTerms(score->target, score->logged_propensity, reward, score->dm,
                          score->q_logged);
    if (p.slot_index >= 0) {
      const size_t position = static_cast<size_t>(std::min(p.slot_index, kLastSlotPosition));
      while (s.slot_estimators.size() <= position)
        s.slot_estimators.emplace_back(s.config.max_weight());
      s.slot_estimators[position].AddTerms(score->target, score->logged_propensity, reward,
                                           score->dm, score->q_logged);
    }
    ++(score->exact ? s.exact_distribution : s.sampled_distribution);
    switch (s.policy->context_kind()) {
      case ContextKind::kCandidates:
        if (s.sparse_model != nullptr) {
          s.sparse_model->Learn(chosen_sparse, reward);
        } else {
          s.model.LearnCandidate(chosen_dense(), reward);
        }
        break;
      case ContextKind::kPoint:
        s.model.LearnPoint(p.features, p.arm, reward);
        break;
      case ContextKind::kNone:
        s.model.LearnArm(p.arm_id, reward);
        break;
    }
  }
}

template <typename Change>
absl::Status ShadowSet::ChangeArms(Change&& change) {
  std::vector<std::pair<bandit::v1::PolicyConfig, bandit::v1::PolicyState>> before;
  for (const Shadow& s : shadows_) {
    before.emplace_back(s.config.policy(), bandit::v1::PolicyState());
    s.policy->Save(&before.back().second);
  }
  for (size_t i = 0; i < shadows_.size(); ++i) {
    if (auto st = change(shadows_[i]); !st.ok()) {
      // Rebuild every shadow touched so far exactly as it was.
      for (size_t j = 0; j <= i; ++j) {
        Shadow& s = shadows_[j];
        *s.config.mutable_policy() = before[j].first;
        auto fresh = CreatePolicy(before[j].first, s.config.seed());
        if (fresh.ok() && (*fresh)->Restore(before[j].second).ok()) s.policy = *std::move(fresh);
      }
      return absl::Status(st.code(),
                          absl::StrCat("shadow '", shadows_[i].name, "': ", st.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status ShadowSet::AddArms(const google::protobuf::RepeatedPtrField<bandit::v1::ArmSpec>& arms) {
  return ChangeArms([&](Shadow& s) -> absl::Status {
    for (const auto& arm : arms) {
      if (auto st = s.policy->AddArm(arm); !st.ok()) return st;
      *s.config.mutable_policy()->add_arms() = arm;
    }
    return absl::OkStatus();
  });
}

absl::Status ShadowSet::RemoveArms(const google::protobuf::RepeatedPtrField<std::string>& arm_ids) {
  return ChangeArms([&](Shadow& s) -> absl::Status {
    for (const auto& id : arm_ids) {
      if (auto st = s.policy->RemoveArm(id); !st.ok()) return st;
      auto* arms = s.config.mutable_policy()->mutable_arms();
      for (int i = 0; i < arms->size(); ++i)
        if (arms->Get(i).id() == id) {
          arms->DeleteSubrange(i, 1);
          break;
        }
    }
    return absl::OkStatus();
  });
}

absl::Status ShadowSet::Reset() {
  std::vector<std::unique_ptr<Policy>> fresh;
  for (const Shadow& s : shadows_) {
    auto p = CreatePolicy(s.config.policy(), s.config.seed());
    if (!p.ok())
      return absl::Status(p.status().code(),
                          absl::StrCat("shadow '", s.name, "': ", p.status().message()));
    fresh.push_back(*std::move(p));
  }
  for (size_t i = 0; i < shadows_.size(); ++i) {
    Shadow& s = shadows_[i];
    s.policy = std::move(fresh[i]);
    s.estimators = ope::Estimators(s.config.max_weight());
    s.slot_estimators.clear();
    s.model = ope::DirectModel(s.config.ridge_lambda());
    if (s.sparse_model != nullptr)
      s.sparse_model = std::make_unique<ope::SparseDirectModel>(s.config.ridge_lambda(),
                                                                s.sparse_model->dimension());
    s.unscored = s.errors = s.exact_distribution = s.sampled_distribution = 0;
  }
  return absl::OkStatus();
}

void ShadowSet::Save(bandit::v1::InstanceSnapshot* snap) const {
  for (const Shadow& s : shadows_) {
    auto* out = snap->add_shadows();
    out->set_name(s.name);
    out->set_id(s.id);
    *out->mutable_config() = s.config;
    s.policy->Save(out->mutable_policy());
    s.estimators.Save(out->mutable_estimators());
    for (const ope::Estimators& e : s.slot_estimators) e.Save(out->add_slot_estimators());
    if (s.sparse_model != nullptr) {
      s.sparse_model->Save(out->mutable_direct_model());
    } else {
      s.model.Save(out->mutable_direct_model());
    }
    out->set_unscored(s.unscored);
    out->set_errors(s.errors);
    out->set_exact_distribution(s.exact_distribution);
    out->set_sampled_distribution(s.sampled_distribution);
  }
  if (!shadows_.empty() || next_id_ > 1) snap->set_next_shadow_id(next_id_);
}

absl::Status ShadowSet::Restore(const bandit::v1::InstanceSnapshot& snap) {
  ShadowSet next;
  next.next_id_ = std::max<uint32_t>(1, snap.next_shadow_id());
  for (const auto& in : snap.shadows()) {
    const std::string where = absl::StrCat("shadow '", in.name(), "': ");
    if (auto s = CheckId("shadow", in.name()); !s.ok()) return s;
    for (const Shadow& s : next.shadows_)
      if (s.name == in.name() || s.id == in.id())
        return absl::InvalidArgumentError(
            absl::StrCat(where, "repeats a shadow name or id of the same instance"));
    if (in.id() == 0 || in.id() >= next.next_id_)
      return absl::InvalidArgumentError(
          absl::StrCat(where, "id ", in.id(), ", expected 1..", next.next_id_ - 1));
    Shadow s;
    s.name = in.name();
    s.id = in.id();
    s.config = in.config();
    auto p = CreatePolicy(s.config.policy(), s.config.seed());
    if (!p.ok()) return absl::InvalidArgumentError(absl::StrCat(where, p.status().message()));
    s.policy = *std::move(p);
    if (auto st = s.policy->Restore(in.policy()); !st.ok())
      return absl::InvalidArgumentError(absl::StrCat(where, st.message()));
    if (auto st = s.estimators.Restore(in.estimators()); !st.ok())
      return absl::InvalidArgumentError(absl::StrCat(where, st.message()));
    if (in.slot_estimators_size() > kLastSlotPosition + 1)
      return absl::InvalidArgumentError(
          absl::StrCat(where, "has estimators for ", in.slot_estimators_size(),
                       " slot positions, expected at most ", kLastSlotPosition + 1));
    for (int k = 0; k < in.slot_estimators_size(); ++k) {
      s.slot_estimators.emplace_back(s.config.max_weight());
      if (auto st = s.slot_estimators.back().Restore(in.slot_estimators(k)); !st.ok())
        return absl::InvalidArgumentError(
            absl::StrCat(where, "slot position ", k, ": ", st.message()));
    }
    const double lambda = s.config.ridge_lambda() > 0 ? s.config.ridge_lambda() : 1.0;
    s.model = ope::DirectModel(lambda);
    // The shadows of an instance whose candidates stay sparse keep the diagonal ridge; a state
    // of the other kind is not this instance's.
    const int64_t sparse = s.policy->context_kind() == ContextKind::kCandidates
                               ? SparseDimension(snap.config())
                               : 0;
    if (in.direct_model().has_diagonal() != (sparse > 0))
      return absl::InvalidArgumentError(absl::StrCat(
          where, "direct model is ", in.direct_model().has_diagonal() ? "diagonal" : "dense",
          ", expected ",
          sparse > 0 ? "the diagonal ridge of an instance whose candidates are sparse"
                     : "a dense one"));
    if (sparse > 0) {
      if (!s.policy->TakesSparse())
        return absl::InvalidArgumentError(absl::StrCat(
            where, "policy '", s.policy->name(),
            "' takes dense vectors, expected one that takes the instance's sparse candidates"));
      s.sparse_model = std::make_unique<ope::SparseDirectModel>(lambda, sparse);
      if (auto st = s.sparse_model->Restore(in.direct_model()); !st.ok())
        return absl::InvalidArgumentError(absl::StrCat(where, st.message()));
    } else if (in.has_direct_model()) {
      if (auto st = s.model.Restore(in.direct_model()); !st.ok())
        return absl::InvalidArgumentError(absl::StrCat(where, st.message()));
    }
    s.unscored = in.unscored();
    s.errors = in.errors();
    s.exact_distribution = in.exact_distribution();
    s.sampled_distribution = in.sampled_distribution();
    next.shadows_.push_back(std::move(s));
  }
  *this = std::move(next);
  return absl::OkStatus();
}

int64_t ShadowSet::Bytes(const Shadow& s) {
  return s.policy->StateBytes() +
         (s.sparse_model != nullptr ? s.sparse_model->StateBytes() : s.model.StateBytes()) +
         static_cast<int64_t>(s.slot_estimators.capacity() * sizeof(ope::Estimators));
}

void ShadowSet::Describe(bandit::v1::Instance* out) const {
  for (const Shadow& s : shadows_) {
    auto* st = out->add_shadows();
    st->set_name(s.name);
    *st->mutable_config() = s.config;
    st->set_policy(std::string(s.policy->name()));
    const ope::Estimators& e = s.estimators;
    st->set_events(e.events());
    ToEstimate(e.Ips(), st->mutable_ips());
    ToEstimate(e.Snips(), st->mutable_snips());
    ToEstimate(e.DoublyRobust(), st->mutable_dr());
    ToEstimate(e.DirectMethod(), st->mutable_dm());
    ToEstimate(e.Logged(), st->mutable_served());
    st->set_effective_sample_size(e.EffectiveSampleSize());
    st->set_clipped(e.clipped());
    st->set_largest_weight(e.largest_weight());
    st->set_exact_distribution(s.exact_distribution);
    st->set_sampled_distribution(s.sampled_distribution);
    st->set_unscored(s.unscored);
    st->set_errors(s.errors);
    st->set_state_bytes(Bytes(s));
    st->set_direct_model(s.sparse_model != nullptr ? "diagonal ridge" : "ridge");
    bandit::v1::PageValue* page = s.slot_estimators.empty() ? nullptr : st->mutable_page();
    for (size_t k = 0; k < s.slot_estimators.size(); ++k) {
      const ope::Estimators& pe = s.slot_estimators[k];
      auto* slot = st->add_slots();
      slot->set_position(static_cast<int32_t>(k));
      slot->set_events(pe.events());
      const ope::Interval ips = pe.Ips(), snips = pe.Snips(), dr = pe.DoublyRobust(),
                          served = pe.Logged();
      ToEstimate(ips, slot->mutable_ips());
      ToEstimate(snips, slot->mutable_snips());
      ToEstimate(dr, slot->mutable_dr());
      ToEstimate(served, slot->mutable_served());
      if (pe.events() == 0) continue;  // a position not yet rewarded adds nothing to the page
      page->set_ips(page->ips() + ips.value);
      page->set_snips(page->snips() + snips.value);
      page->set_dr(page->dr() + dr.value);
      page->set_served(page->served() + served.value);
    }
    for (const auto& [k, v] : s.policy->Summary()) (*st->mutable_summary())[k] = v;
  }
}

int64_t ShadowSet::StateBytes() const {
  int64_t bytes = 0;
  for (const Shadow& s : shadows_) bytes += Bytes(s);
  return bytes;
}

}  // namespace bandit::server
