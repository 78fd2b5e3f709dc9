#include "server/instance/named_inputs.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/features/config.h"
#include "core/features/dense.h"
#include "core/id_index.h"
#include "core/vw/options.h"

namespace bandit::server {
namespace {

constexpr size_t kMaxActionIdBytes = 256;  // Personalizer's limit on an action id

}  // namespace

bool KeepsOnlyVectors(const bandit::v1::PolicyConfig& policy) {
  switch (policy.policy_case()) {
    case bandit::v1::PolicyConfig::kLinucb:
      return policy.linucb().covariance() != bandit::v1::COVARIANCE_FULL;
    case bandit::v1::PolicyConfig::kGlbOmd:
      return policy.glb_omd().covariance() != bandit::v1::COVARIANCE_FULL;
    case bandit::v1::PolicyConfig::kVw:
      return true;
    default:
      return false;
  }
}

// A vw policy's feature space, from its arguments: set where the config has none; one that
// is set must agree.
absl::Status FeatureSpaceFromVwArguments(bandit::v1::InstanceConfig* c) {
  auto vw = vw::ParseVwArguments(c->policy().vw().arguments());
  if (!vw.ok()) return vw.status();
  const features::FeatureSpaceOptions& want = vw->space;
  if (!c->has_feature_space()) {
    auto* fs = c->mutable_feature_space();
    fs->set_bits(want.bits);
    for (const auto& i : want.interactions) fs->add_interactions(i);
    fs->set_hash_seed(want.hash_seed);
    fs->set_no_constant(!want.constant);
    fs->set_ignore(want.ignore);
    return absl::OkStatus();
  }
  const features::FeatureSpaceOptions given = features::OptionsOf(c->feature_space());
  const auto letters = [](std::string s) {
    std::sort(s.begin(), s.end());
    s.erase(std::unique(s.begin(), s.end()), s.end());
    return s;
  };
  const auto differs = [](absl::string_view field, const std::string& given,
                          const std::string& args) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.feature_space.", field, " is ", given, " but the vw arguments give ", args,
        ", expected them to agree (or no feature_space: it is taken from the arguments)"));
  };
  if (given.bits != want.bits)
    return differs("bits", absl::StrCat(given.bits),
                   vw->weight_bits == want.bits
                       ? absl::StrCat(want.bits, " (-b)")
                       : absl::StrCat(want.bits, " (-b ", vw->weight_bits, " less ceil(log2 --bag ",
                                      vw->bag_size, "))"));
  if (given.interactions != want.interactions)
    return differs("interactions", absl::StrCat("[", absl::StrJoin(given.interactions, " "), "]"),
                   absl::StrCat("[", absl::StrJoin(want.interactions, " "), "]"));
  if (given.hash_seed != want.hash_seed)
    return differs("hash_seed", absl::StrCat(given.hash_seed), absl::StrCat(want.hash_seed));
  if (given.constant != want.constant)
    return differs("no_constant", given.constant ? "false" : "true",
                   want.constant ? "the constant" : "--noconstant");
  if (letters(given.ignore) != letters(want.ignore))
    return differs("ignore", absl::StrCat("'", given.ignore, "'"),
                   absl::StrCat("'", want.ignore, "'"));
  return absl::OkStatus();
}

absl::Status NormalizeFeatureSpace(int64_t max_feature_dim, int64_t max_diagonal_feature_dim,
                                   bandit::v1::InstanceConfig* c) {
  if (c->policy().has_vw())
    if (auto s = FeatureSpaceFromVwArguments(c); !s.ok()) return s;
  if (!c->has_feature_space()) return absl::OkStatus();
  auto* fs = c->mutable_feature_space();
  if (fs->version() == 0) fs->set_version(kFeaturizationVersion);
  if (fs->version() > kFeaturizationVersion)
    return absl::InvalidArgumentError(absl::StrCat(
        "config.feature_space.version is ", fs->version(), ", expected at most ",
        kFeaturizationVersion, " (written by a newer server: its weights would be remapped)"));
  if (fs->version() < 1)
    return absl::InvalidArgumentError(absl::StrCat("config.feature_space.version is ",
                                                   fs->version(), ", expected 1"));
  if (auto space = FeatureSpaceOf(*c); !space.ok()) return space.status();
  const int64_t dimension = int64_t{1} << fs->bits();
  if (KeepsOnlyVectors(c->policy())) {
    if (dimension > max_diagonal_feature_dim)
      return absl::InvalidArgumentError(absl::StrCat(
          "config.feature_space.bits is ", fs->bits(), ": a diagonal-covariance policy of "
          "dimension 2^", fs->bits(), " = ", dimension, " exceeds --max_diagonal_feature_dim=",
          max_diagonal_feature_dim, "; use bits <= ",
          63 - __builtin_clzll(static_cast<uint64_t>(max_diagonal_feature_dim))));
    return features::SetPolicyDimension(dimension, c->mutable_policy());
  }
  if (dimension > max_feature_dim)
    return absl::InvalidArgumentError(absl::StrCat(
        "config.feature_space.bits is ", fs->bits(), ": a policy of dimension 2^", fs->bits(),
        " = ", dimension, " exceeds --max_feature_dim=", max_feature_dim,
        " (these policies keep d x d matrices); use bits <= ",
        63 - __builtin_clzll(static_cast<uint64_t>(max_feature_dim)),
        ", or linucb / glb_omd with covariance: COVARIANCE_SKETCHED or COVARIANCE_DIAGONAL for a "
        "larger space"));
  return features::SetPolicyDimension(dimension, c->mutable_policy());
}

absl::StatusOr<std::shared_ptr<const features::FeatureSpace>> FeatureSpaceOf(
    const bandit::v1::InstanceConfig& c) {
  if (!c.has_feature_space()) return std::shared_ptr<const features::FeatureSpace>();
  const features::FeatureSpaceOptions o = features::OptionsOf(c.feature_space());
  auto space = features::FeatureSpace::Create(o);
  if (!space.ok())
    return absl::InvalidArgumentError(absl::StrCat("config.", space.status().message()));
  return std::make_shared<const features::FeatureSpace>(*std::move(space));
}

bool HasNamedInputs(const bandit::v1::SelectRequest& req) {
  return req.actions_size() > 0 || !req.context().empty() || req.excluded_actions_size() > 0 ||
         req.explain();
}


absl::Status CheckNamedActions(const bandit::v1::SelectRequest& req, int64_t max_actions,
                               std::vector<std::string>* ids, std::vector<bool>* excluded) {
  if (req.candidates_size() > 0 || req.x_size() > 0)
    return absl::InvalidArgumentError(
        "candidates or x is set with named actions, expected one or the other");
  if (req.actions_size() == 0)
    return absl::InvalidArgumentError("actions is empty, expected at least one named action");
  if (req.actions_size() > max_actions)
    return absl::InvalidArgumentError(absl::StrCat("actions has ", req.actions_size(),
                                                   " entries, expected at most ", max_actions,
                                                   " (--max_candidates)"));
  IdIndex position(req.actions_size());
  auto action_field = [](int i) { return absl::StrCat("actions[", i, "].id"); };
  for (int i = 0; i < req.actions_size(); ++i) {
    const std::string& id = req.actions(i).id();
    if (id.empty() || id.size() > kMaxActionIdBytes)
      return absl::InvalidArgumentError(absl::StrCat("actions[", i, "].id has ", id.size(),
                                                     " bytes, expected 1..", kMaxActionIdBytes));
    if (auto s = position.Append(id, action_field); !s.ok()) return s;
  }
  excluded->assign(req.actions_size(), false);
  for (int i = 0; i < req.excluded_actions_size(); ++i) {
    auto at = position.Position(absl::StrCat("excluded_actions[", i, "]"), req.excluded_actions(i),
                                "the actions");
    if (!at.ok()) return at.status();
    (*excluded)[*at] = true;
  }
  if (ids != nullptr) {
    ids->clear();
    for (const auto& a : req.actions()) ids->push_back(a.id());
  }
  return absl::OkStatus();
}

absl::Status FeaturizeSelect(const features::FeatureSpace& space,
                             const features::InputLimits& limits, int64_t max_actions,
                             const bandit::v1::SelectRequest& req, std::vector<Vector>* candidates,
                             std::vector<int>* action_of, std::vector<SparseVector>* sparse_out,
                             features::ParsedFeatures* audited_context,
                             std::vector<features::ParsedFeatures>* audited_actions) {
  std::vector<bool> excluded;
  if (auto s = CheckNamedActions(req, max_actions, nullptr, &excluded); !s.ok()) return s;
  thread_local features::ParsedFeatures shared;
  // Actions come back round after round with the same documents: each is parsed once per thread
  // (the context, new every round, is parsed each time).
  thread_local features::ParsedDocuments documents;
  static const features::ParsedFeatures kNoFeatures;
  thread_local features::SparseFeatures sparse;
  thread_local std::string path;  // reused: a request names one document per action
  const bool audit = audited_context != nullptr && audited_actions != nullptr;
  shared.Clear();
  if (!req.context().empty())
    if (auto s = space.Parse(req.context(), "context", limits, audit, &shared); !s.ok()) return s;
  if (audit) {
    *audited_context = shared;
    audited_actions->assign(static_cast<size_t>(req.actions_size()), features::ParsedFeatures());
  }
  candidates->clear();
  action_of->clear();
  size_t featurized = 0;  // sparse_out's elements are reused: their arrays keep their capacity
  for (int i = 0; i < req.actions_size(); ++i) {
    const features::ParsedFeatures* parsed = &kNoFeatures;
    const std::string& json = req.actions(i).features();
    if (!json.empty()) {
      path.clear();
      absl::StrAppend(&path, "actions[", i, "].features");
      if (audit) {  // an explained choice keeps its audited parse
        features::ParsedFeatures& into = (*audited_actions)[static_cast<size_t>(i)];
        if (auto s = space.Parse(json, path, limits, true, &into); !s.ok()) return s;
        parsed = &into;
      } else {
        absl::StatusOr<const features::ParsedFeatures*> document =
            documents.Parse(space, json, path, limits);
        if (!document.ok()) return document.status();
        parsed = *document;
      }
    }
    const features::ParsedFeatures& action = *parsed;
    if (excluded[i]) continue;
    path.clear();
    absl::StrAppend(&path, "actions[", i, "]");
    // Into the caller's next sparse vector, or into the scratch for a dense candidate.
    SparseVector* x = nullptr;
    if (sparse_out) {
      if (sparse_out->size() <= featurized) sparse_out->emplace_back();
      x = &(*sparse_out)[featurized++];
    }
    if (auto s = space.FeaturizeChecked(action, &shared, limits.max_terms, path,
                                        x ? &x->index : &sparse.index,
                                        x ? &x->value : &sparse.value);
        !s.ok())
      return s;
    if (!sparse_out) candidates->push_back(features::ToDense(sparse, space.dimension()));
    action_of->push_back(i);
  }
  if (sparse_out) sparse_out->resize(featurized);
  if (action_of->empty())
    return absl::InvalidArgumentError(
        "excluded_actions excludes every action, expected at least one action to choose from");
  return absl::OkStatus();
}

absl::Status FeaturizeSlots(const features::FeatureSpace& space,
                            const features::InputLimits& limits,
                            const bandit::v1::SelectRequest& req,
                            std::vector<SelectInputs::Slot>* slots,
                            bool sparse, Policy::SlotIndex slot_index, bool* multi_slot) {
  features::ParsedFeatures shared;
  if (!req.context().empty())
    if (auto s = space.Parse(req.context(), "context", limits, false, &shared); !s.ok()) return s;
  std::vector<features::ParsedFeatures> actions(req.actions_size());
  for (int i = 0; i < req.actions_size(); ++i) {
    const std::string& json = req.actions(i).features();
    if (!json.empty())
      if (auto s = space.Parse(json, absl::StrCat("actions[", i, "].features"), limits, false,
                               &actions[i]);
          !s.ok())
        return s;
  }
  std::vector<features::ParsedFeatures> slot_features(req.slots_size());
  for (int k = 0; k < req.slots_size(); ++k) {
    const std::string& json = req.slots(k).features();
    if (!json.empty())
      if (auto s = space.Parse(json, absl::StrCat("slots[", k, "].features"), limits, false,
                               &slot_features[k]);
          !s.ok())
        return s;
  }
  // VW's CCB adds the slots' features, and their index (with the interactions with it) once a
  // decision has several slots or its first slot has features of its own; a learner that keeps
  // that as state (--ccb_explore_adf) adds the index from then on to every decision.
  const bool multi = req.slots_size() > 1 || slot_features[0].size() > 0;
  if (multi_slot != nullptr) *multi_slot = multi;
  using SlotIndex = Policy::SlotIndex;
  const bool indexed =
      slot_index == SlotIndex::kAlways ||
      (multi && (slot_index == SlotIndex::kPerDecision || slot_index == SlotIndex::kBeforeFirst));
  std::optional<features::FeatureSpace> slot_space;
  if (indexed) {
    auto s = space.ForSlots();
    if (!s.ok()) return s.status();
    slot_space = *std::move(s);
  }
  const features::FeatureSpace& used = indexed ? *slot_space : space;
  std::vector<features::ParsedFeatures> contexts;
  used.SlotContexts(shared, slot_features, indexed, false, &contexts);
  const bool sparse_out = sparse;
  features::SparseFeatures terms;
  for (int k = 0; k < req.slots_size(); ++k) {
    const features::ParsedFeatures& context = contexts[k];
    auto& out = (*slots)[k];
    if (sparse_out) {
      out.sparse_candidates.assign(req.actions_size(), SparseVector());
    } else {
      out.candidates.assign(req.actions_size(), Vector());
    }
    for (int i = 0; i < req.actions_size(); ++i) {
      if (!out.allowed[i]) continue;
      if (auto s = used.FeaturizeChecked(actions[i], &context, limits.max_terms,
                                         absl::StrCat("slots[", k, "] with actions[", i, "]"),
                                         &terms.index, &terms.value);
          !s.ok())
        return s;
      if (sparse_out) {
        out.sparse_candidates[i].index = terms.index;
        out.sparse_candidates[i].value = terms.value;
      } else {
        out.candidates[i] = features::ToDense(terms, used.dimension());
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Vector> FeaturizeDirect(const features::FeatureSpace& space,
                                       const features::InputLimits& limits,
                                       const UpdateCall::Direct& direct) {
  auto sparse = FeaturizeDirectSparse(space, limits, direct);
  if (!sparse.ok()) return sparse.status();
  return Densify(*sparse, space.dimension());
}

Vector Densify(const SparseVector& x, int64_t dimension) {
  Vector v = Vector::Zero(dimension);
  for (size_t k = 0; k < x.index.size(); ++k) v[x.index[k]] += x.value[k];
  return v;
}

absl::StatusOr<SparseVector> FeaturizeDirectSparse(const features::FeatureSpace& space,
                                                   const features::InputLimits& limits,
                                                   const UpdateCall::Direct& direct) {
  if (!direct.features.empty() || !direct.x.empty() || !direct.arm_id.empty())
    return absl::InvalidArgumentError(
        "direct.features, x or arm_id is set with a named action, expected one or the other");
  if (!direct.has_action)
    return absl::InvalidArgumentError(
        "direct.action is missing, expected the played action (id and features)");
  features::ParsedFeatures shared, action;
  if (!direct.context.empty())
    if (auto s = space.Parse(std::string_view(direct.context.data(), direct.context.size()), "direct.context", limits, false, &shared); !s.ok())
      return s;
  if (!direct.action_features.empty())
    if (auto s = space.Parse(std::string_view(direct.action_features.data(), direct.action_features.size()),
                             "direct.action.features", limits, false,
                             &action);
        !s.ok())
      return s;
  SparseVector out;
  if (auto s = space.FeaturizeChecked(action, &shared, limits.max_terms, "direct.action",
                                      &out.index, &out.value);
      !s.ok())
    return s;
  return out;
}

void WriteNamedDecision(const SelectCall& call, bandit::v1::Decision* out) {
  const std::vector<int>& action_of = call.inputs.action_of;
  const int chosen_candidate = out->arm_index();
  const int chosen = action_of[chosen_candidate];
  out->set_arm_index(chosen);
  out->set_action_id(std::string(call.actions[chosen].id));
  if (!call.want_scores || out->scores_size() != static_cast<int>(action_of.size())) return;
  // Personalizer's ranking: the chosen action first, then the others by the policy's score;
  // probabilities where the policy has them, otherwise 1 for the (deterministic) choice.
  const bool probabilities = out->score_kind() == bandit::v1::PROBABILITY;
  // A predicted cost ranks the lowest first; every other score the highest.
  const bool costs = out->score_kind() == bandit::v1::PREDICTED_COST;
  std::vector<int> order(action_of.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if ((a == chosen_candidate) != (b == chosen_candidate)) return a == chosen_candidate;
    return costs ? out->scores(a) < out->scores(b) : out->scores(a) > out->scores(b);
  });
  std::vector<bool> offered(call.actions.size(), false);
  for (int k : order) {
    auto* r = out->add_ranking();
    r->set_id(std::string(call.actions[action_of[k]].id));
    r->set_probability(probabilities ? out->scores(k) : (k == chosen_candidate ? 1.0 : 0.0));
    offered[action_of[k]] = true;
  }
  for (size_t i = 0; i < call.actions.size(); ++i) {
    if (offered[i]) continue;
    auto* r = out->add_ranking();
    r->set_id(std::string(call.actions[i].id));
    r->set_probability(0.0);
  }
}

void ExplainChoice(const features::FeatureSpace& space, const SelectCall& call,
                   const std::function<double(uint32_t)>& weight_of, bandit::v1::Decision* out) {
  const size_t chosen = static_cast<size_t>(out->arm_index());
  if (chosen >= call.audited_actions.size()) return;  // not parsed for an explanation
  features::SparseFeatures f;
  space.Featurize(call.audited_actions[chosen], &call.audited_context, /*audit=*/true, &f);
  for (size_t i = 0; i < f.index.size(); ++i) {
    auto* w = out->add_explanation();
    w->set_name(f.names[i]);
    w->set_index(f.index[i]);
    w->set_value(f.value[i]);
    w->set_weight(weight_of(f.index[i]));
  }
}

}  // namespace bandit::server
