#include "core/ope/evaluator.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/features/config.h"
#include "core/features/dense.h"
#include "core/ope/target.h"
#include "core/registry.h"

namespace bandit::ope {
namespace v1 = bandit::v1;

absl::StatusOr<std::unique_ptr<Evaluator>> Evaluator::Create(std::vector<Candidate> candidates,
                                                             EvaluateOptions options) {
  if (candidates.empty())
    return absl::InvalidArgumentError("no candidate configs, expected at least one");
  if (!(options.max_weight >= 0) || !std::isfinite(options.max_weight))
    return absl::InvalidArgumentError(
        absl::StrCat("max_weight is ", options.max_weight, ", expected 0 (no clipping) or more"));
  if (!(options.ridge_lambda > 0) || !std::isfinite(options.ridge_lambda))
    return absl::InvalidArgumentError(
        absl::StrCat("ridge_lambda is ", options.ridge_lambda, ", expected a positive number"));
  if (options.window_ms < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("window_ms is ", options.window_ms, ", expected 0 (no windows) or more"));
  if (options.max_dense_dimension < 1)
    return absl::InvalidArgumentError(absl::StrCat(
        "max_dense_dimension is ", options.max_dense_dimension, ", expected at least 1"));
  std::vector<std::unique_ptr<Policy>> policies;
  std::shared_ptr<const features::FeatureSpace> space;
  const v1::FeatureSpaceConfig* space_config = nullptr;
  for (auto& c : candidates) {
    if (!c.config.has_policy())
      return absl::InvalidArgumentError(
          absl::StrCat("candidate '", c.name, "': config has no policy"));
    if (c.config.has_feature_space()) {
      v1::FeatureSpaceConfig fs = c.config.feature_space();
      fs.clear_version();
      if (space_config == nullptr) {
        auto created = features::FeatureSpace::Create(features::OptionsOf(fs));
        if (!created.ok())
          return absl::InvalidArgumentError(
              absl::StrCat("candidate '", c.name, "': ", created.status().message()));
        space = std::make_shared<const features::FeatureSpace>(*std::move(created));
        space_config = &c.config.feature_space();
      } else {
        v1::FeatureSpaceConfig first = *space_config;
        first.clear_version();
        if (first.SerializeAsString() != fs.SerializeAsString())
          return absl::InvalidArgumentError(absl::StrCat(
              "candidate '", c.name, "': feature_space differs from the first candidate's, "
              "expected the one feature space the log was hashed with"));
      }
      if (auto s = features::SetPolicyDimension(space->dimension(), c.config.mutable_policy());
          !s.ok())
        return absl::InvalidArgumentError(absl::StrCat("candidate '", c.name, "': ", s.message()));
    }
    auto p = CreatePolicy(c.config.policy(), c.config.seed() == 0 ? 1 : c.config.seed());
    if (!p.ok())
      return absl::Status(p.status().code(),
                          absl::StrCat("candidate '", c.name, "': ", p.status().message()));
    policies.push_back(*std::move(p));
  }
  auto evaluator = std::unique_ptr<Evaluator>(
      new Evaluator(std::move(candidates), std::move(policies), options));
  if (space && space->dimension() > options.max_dense_dimension) {
    // Beyond the dense bound the actions stay sparse: every candidate must take them.
    for (size_t c = 0; c < candidates.size(); ++c)
      if (evaluator->policies_[c]->context_kind() == ContextKind::kCandidates &&
          !evaluator->policies_[c]->TakesSparse())
        return absl::InvalidArgumentError(absl::StrCat(
            "candidate '", evaluator->candidates_[c].name, "': feature_space.bits is ",
            space->options().bits, ", a weight space of ", space->dimension(),
            " coordinates; beyond ", options.max_dense_dimension,
            " bandit-ope evaluates on sparse vectors, expected a policy that takes them "
            "(covariance: COVARIANCE_SKETCHED or COVARIANCE_DIAGONAL)"));
    evaluator->sparse_model_ =
        std::make_unique<SparseDirectModel>(options.ridge_lambda, space->dimension());
  }
  evaluator->space_ = std::move(space);
  return evaluator;
}

Evaluator::Evaluator(std::vector<Candidate> candidates,
                     std::vector<std::unique_ptr<Policy>> policies, EvaluateOptions options)
    : candidates_(std::move(candidates)),
      policies_(std::move(policies)),
      options_(options),
      model_(options.ridge_lambda) {
  for (size_t i = 0; i < candidates_.size(); ++i) {
    CandidateResult r{.name = candidates_[i].name,
                      .policy = std::string(policies_[i]->name()),
                      .estimators = Estimators(options.max_weight),
                      .slots = {},
                      .trace = {},
                      .held_out = Estimators(options.max_weight),
                      .searched = Estimators(options.max_weight)};
    results_.push_back(std::move(r));
  }
}

absl::StatusOr<Vector> Evaluator::TargetFor(size_t c, const v1::LoggedDecision& d,
                                            const Scored& scored, Observation* learn) {
  Policy& policy = *policies_[c];
  const std::string who =
      absl::StrCat("candidate '", candidates_[c].name, "' (", policy.name(), ")");
  LoggedContext ctx;
  ctx.actions = scored.actions;
  ctx.sparse_actions = scored.sparse_actions;
  ctx.x = &scored.x;
  ctx.arm_ids = &scored.arm_ids;
  ctx.num_actions = d.num_actions();
  auto target = TargetDistribution(policy, ctx, who);
  if (!target.ok()) return target.status();
  if (target->exact) {
    ++results_[c].exact_distribution;
  } else {
    ++results_[c].sampled_distribution;
  }
  // What the candidate learns afterwards: the logged action and its reward.
  auto obs = LoggedObservation(policy, ctx, d.chosen_index(), d.reward(), who);
  if (!obs.ok()) return obs.status();
  // As VW learns a logged example: at the probability it was logged with.
  obs->logged_propensity = d.propensity();
  obs->offered = d.num_actions();
  obs->logged_position = d.chosen_index();
  *learn = *std::move(obs);
  return std::move(target->pi);
}

absl::Status Evaluator::Add(const v1::LoggedDecision& d, const std::string& where,
                            int slots_in_decision) {
  return AddDecision(std::span<const v1::LoggedDecision>(&d, 1), where, slots_in_decision);
}

absl::Status Evaluator::AddDecision(std::span<const v1::LoggedDecision> slots,
                                    const std::string& where, int slots_in_decision) {
  // Every slot is scored before any is learned: the logging policy filled all the slots of a
  // decision from one state, and the candidates are asked in the same state.
  std::vector<Scored> scored;
  for (const v1::LoggedDecision& d : slots) {
    if (d.outcome() != v1::OUTCOME_REWARDED && d.outcome() != v1::OUTCOME_EXPIRED_DEFAULT) {
      ++skipped_;
      continue;
    }
    auto one = Score(d, where, slots_in_decision);
    if (!one.ok()) return one.status();
    scored.push_back(*std::move(one));
  }
  for (Scored& one : scored)
    if (auto s = Learn(one, where); !s.ok()) return s;
  return absl::OkStatus();
}

absl::StatusOr<Evaluator::Scored> Evaluator::Score(const v1::LoggedDecision& d,
                                                   const std::string& where,
                                                   int slots_in_decision) {
  auto fail = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", why));
  };
  if (!d.has_propensity())
    return fail("field _label_probability: missing, expected the logged action's probability");
  if (!(d.propensity() > 0) || d.propensity() > 1)
    return fail(absl::StrCat("field _label_probability: is ", d.propensity(),
                             ", expected a probability in (0, 1] (an action the logging policy "
                             "could not take cannot be reweighted)"));
  if (!std::isfinite(d.reward())) return fail("field _label_cost: expected a finite number");
  const int n = d.num_actions();
  if (n <= 0 || d.chosen_index() < 0 || d.chosen_index() >= n)
    return fail(
        absl::StrCat("chosen action ", d.chosen_index(), " is outside the ", n, " actions"));
  std::vector<Vector> actions;
  std::vector<SparseVector> sparse_actions;
  if (d.named_actions_size() > 0) {
    if (!space_)
      return fail("the log holds named decisions, expected candidate configs with the "
                  "instance's feature_space to hash them");
    if (d.named_actions_size() != n) return fail("field c._multi: not one action per entry of a");
    features::InputLimits limits;
    limits.max_features = limits.max_json_bytes;  // the server accepted what was logged
    features::ParsedFeatures shared;
    if (!d.named_context().empty())
      if (auto s = space_->Parse(d.named_context(), "c", limits, false, &shared); !s.ok())
        return fail(std::string(s.message()));
    // A slot of a multi-slot decision is featurized as the server did
    // (server/instance/named_inputs.cc): with several slots, or a slot with features of its own, in
    // VW's CCB form (the slot's features and index added to the context, the slot space's
    // interactions).
    const features::FeatureSpace* used = space_.get();
    if (!d.slot_id().empty() && (slots_in_decision > 1 || !d.slot_features().empty())) {
      if (!slot_space_) {
        auto created = space_->ForSlots();
        if (!created.ok()) return fail(std::string(created.status().message()));
        slot_space_ = std::make_unique<features::FeatureSpace>(*std::move(created));
      }
      used = slot_space_.get();
      features::ParsedFeatures slot;
      if (!d.slot_features().empty())
        if (auto s = space_->Parse(d.slot_features(), "c._slots", limits, false, &slot); !s.ok())
          return fail(std::string(s.message()));
      used->AddSlotFeatures(slot, d.slot_index(), false, &shared);
    } else if (options_.importance_of >= 0 && d.chosen_index() >= 0 && d.chosen_index() < n) {
      // The weights as the candidate holds them now, before it learns this decision.
      AddImportance(d.named_context(), d.named_actions(d.chosen_index()).features());
    }
    features::SparseFeatures sparse;
    if (sparse_model_) sparse_actions.resize(n);
    for (int i = 0; i < n; ++i) {
      features::ParsedFeatures action;
      const std::string& json = d.named_actions(i).features();
      if (!json.empty())
        if (auto s = space_->Parse(json, absl::StrCat("c._multi[", i, "]"), limits, false, &action);
            !s.ok())
          return fail(std::string(s.message()));
      if (sparse_model_) {
        used->Featurize(action, &shared, &sparse_actions[i].index, &sparse_actions[i].value);
      } else {
        used->Featurize(action, &shared, false, &sparse);
        actions.push_back(features::ToDense(sparse, used->dimension()));
      }
    }
  } else if (d.num_candidates() > 0) {
    if (d.num_candidates() != n ||
        d.candidates_size() != int64_t{d.num_candidates()} * d.candidate_dim())
      return fail("field c._multi: candidate vectors do not match the action count");
    for (int i = 0; i < n; ++i)
      actions.emplace_back(Eigen::Map<const Vector>(d.candidates().data() + i * d.candidate_dim(),
                                                    d.candidate_dim()));
  }
  Scored out;
  out.x = Eigen::Map<const Vector>(d.x().data(), d.x_size());
  out.arm_ids.assign(d.arm_ids().begin(), d.arm_ids().end());
  out.actions = std::move(actions);
  out.sparse_actions = std::move(sparse_actions);
  out.chosen = d.chosen_index();
  out.slot_index = d.slot_id().empty() ? -1 : d.slot_index();
  out.decided_at_ms = d.decided_at_ms();
  out.held_out = options_.held_out && options_.held_out(d.event_id());
  out.event.logged_action = d.chosen_index();
  out.event.logged_propensity = d.propensity();
  out.event.reward = d.reward();
  out.event.q = !out.sparse_actions.empty()
                    ? sparse_model_->Predict(out.sparse_actions)
                    : model_.Predict(out.actions, &out.x,
                                     out.arm_ids.empty() ? nullptr : &out.arm_ids, n);
  // Every candidate's distribution for this context first; each learns in Learn (the tool
  // stops at the first error, so a refused event ends the evaluation).
  out.learns.resize(policies_.size());
  for (size_t c = 0; c < policies_.size(); ++c) {
    auto t = TargetFor(c, d, out, &out.learns[c]);
    if (!t.ok()) return fail(std::string(t.status().message()));
    out.targets.push_back(*std::move(t));
  }
  return out;
}

absl::Status Evaluator::Learn(Scored& one, const std::string& where) {
  for (size_t c = 0; c < policies_.size(); ++c) {
    if (auto s = policies_[c]->Update(one.learns[c]); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat(where, ": candidate '", candidates_[c].name,
                                                     "' cannot learn the logged action: ",
                                                     s.message()));
    ScoredEvent e = one.event;
    e.target = one.targets[c];
    results_[c].estimators.Add(e);
    if (options_.held_out) (one.held_out ? results_[c].held_out : results_[c].searched).Add(e);
    if (options_.window_ms > 0) {
      const int64_t start = one.decided_at_ms - (((one.decided_at_ms % options_.window_ms) +
                                                  options_.window_ms) % options_.window_ms);
      results_[c].windows.try_emplace(start, options_.max_weight).first->second.Add(e);
    }
    if (one.slot_index >= 0) {
      auto& slots = results_[c].slots;
      while (static_cast<int>(slots.size()) <= one.slot_index)
        slots.emplace_back(options_.max_weight);
      slots[static_cast<size_t>(one.slot_index)].Add(e);
    }
    if (options_.trace_every > 0 && results_[c].estimators.events() % options_.trace_every == 0) {
      const Estimators& est = results_[c].estimators;
      results_[c].trace.push_back({est.events(), est.Ips().value, est.Snips().value,
                                   est.DoublyRobust().value, est.Logged().value});
    }
  }
  if (!one.sparse_actions.empty()) {
    sparse_model_->Learn(one.sparse_actions[static_cast<size_t>(one.chosen)], one.event.reward);
  } else {
    model_.Learn(one.actions, &one.x, one.arm_ids.empty() ? nullptr : &one.arm_ids, one.chosen,
                 one.event.reward);
  }
  return absl::OkStatus();
}

void Evaluator::AddImportance(const std::string& context_json, const std::string& chosen_json) {
  const auto c = static_cast<size_t>(options_.importance_of);
  if (c >= policies_.size()) return;
  features::InputLimits limits;
  limits.max_features = limits.max_json_bytes;
  // The audit names need an audited parse: the context's again, and the chosen action's.
  const features::FeatureSpace& space = *space_;
  features::ParsedFeatures audited_shared, action;
  // Score parsed these documents already; these parses succeed.
  if (!context_json.empty())
    (void)space.Parse(context_json, "c", limits, /*audit=*/true, &audited_shared);
  if (!chosen_json.empty()) (void)space.Parse(chosen_json, "a", limits, true, &action);
  features::SparseFeatures f;
  space.Featurize(action, &audited_shared, /*audit=*/true, &f);
  CandidateResult& r = results_[c];
  ++r.importance_events;
  // This decision's contribution per feature and per namespace.
  std::map<std::string, double> seen, seen_namespaces;
  for (size_t i = 0; i < f.index.size(); ++i) {
    if (f.names[i] == "Constant") continue;
    const double w = policies_[c]->CoordinateWeight(f.index[i]).value_or(0.0);
    const std::vector<std::string> parts = absl::StrSplit(f.names[i], '*');
    const double share = std::abs(w * f.value[i]) / static_cast<double>(parts.size());
    for (const std::string& name : parts) {
      seen[name] += share;
      // VW's audit name: "namespace^feature", no prefix in the default namespace.
      const size_t caret = name.find('^');
      seen_namespaces[caret == std::string::npos ? " " : name.substr(0, caret)] += share;
    }
  }
  for (const auto& [into, from] :
       {std::pair{&r.features, &seen}, std::pair{&r.namespaces, &seen_namespaces}})
    for (const auto& [name, contribution] : *from) {
      FeatureWeight& fw = (*into)[name];
      fw.abs_contribution += contribution;
      ++fw.occurrences;
    }
}

absl::Status DecisionGroups::Add(v1::LoggedDecision d) {
  if (!group_.empty() && (d.slot_id().empty() || group_.front().event_id() != d.event_id()))
    if (auto s = Finish(); !s.ok()) return s;
  group_.push_back(std::move(d));
  if (group_.front().slot_id().empty()) return Finish();
  return absl::OkStatus();
}

absl::Status DecisionGroups::Finish() {
  if (group_.empty()) return absl::OkStatus();
  const int count = group_.front().slot_id().empty() ? 1 : static_cast<int>(group_.size());
  absl::Status s = ready_(group_, count);
  group_.clear();
  return s;
}

}  // namespace bandit::ope
