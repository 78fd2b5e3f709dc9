#include "core/mixture/mixture_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/dimension_limits.h"
#include "core/mixture/eg_solver.h"
#include "core/mixture/fd_objective.h"
#include "core/mixture/kd_objective.h"
#include "core/validate.h"

namespace bandit::mixture {

using bandit::v1::MixtureConfig;

absl::StatusOr<MixtureParams> ParseParams(const MixtureConfig& c, int num_arms) {
  MixtureParams p;
  p.algorithm = c.algorithm() == MixtureConfig::ALGORITHM_UNSPECIFIED
                    ? MixtureConfig::MIXTURE_GREEDY
                    : c.algorithm();
  if (!MixtureConfig::Algorithm_IsValid(p.algorithm))
    return absl::InvalidArgumentError(
        absl::StrCat("mixture.algorithm is ", c.algorithm(), ", expected one of 1..6"));
  p.objective = c.objective() == bandit::v1::OBJECTIVE_UNSPECIFIED ? bandit::v1::FD : c.objective();
  if (!bandit::v1::MixtureObjective_IsValid(p.objective))
    return absl::InvalidArgumentError(
        absl::StrCat("mixture.objective is ", c.objective(), ", expected FD, VENDI, RKE or KD"));
  if (c.dimension() < 1 || c.dimension() > kMaxDenseDimension)
    return absl::InvalidArgumentError(absl::StrCat("mixture.dimension is ", c.dimension(),
                                                   ", expected the embedding dimension in 1..",
                                                   kMaxDenseDimension));
  p.dimension = c.dimension();
  if (c.random_features() < 0 || c.random_features() > kMaxDenseDimension)
    return absl::InvalidArgumentError(absl::StrCat("mixture.random_features is ",
                                                   c.random_features(), ", expected 0 (cosine) .. ",
                                                   kMaxDenseDimension));
  p.random_features = p.objective == bandit::v1::FD ? 0 : c.random_features();
  const int64_t D = p.random_features > 0 ? p.random_features : p.dimension;
  if (static_cast<double>(std::max(num_arms, 1)) * D * D * 8.0 > static_cast<double>(1 << 30))
    return absl::InvalidArgumentError(absl::StrCat(
        "arms * D^2 * 8 bytes = ", static_cast<double>(num_arms) * D * D * 8.0,
        " exceeds the 1 GiB per-instance state limit; reduce arms, dimension or random_features"));
  if (c.has_bandwidth()) {
    if (auto s = CheckPositive("mixture.bandwidth", c.bandwidth()); !s.ok()) return s;
    p.bandwidth = c.bandwidth();
  }
  const bool oracle = p.algorithm == MixtureConfig::MIXTURE_ORACLE;
  const bool one_arm_oracle = p.algorithm == MixtureConfig::ONE_ARM_ORACLE;
  if (c.has_warm_start()) {
    const int min_m = oracle || one_arm_oracle ? 0 : 1;
    if (c.warm_start() < min_m || c.warm_start() > 1000000)
      return absl::InvalidArgumentError(absl::StrCat("mixture.warm_start is ", c.warm_start(),
                                                     ", expected M in ", min_m, "..1000000"));
    p.warm_start = c.warm_start();
  }
  if (c.has_eg_steps()) {
    if (c.eg_steps() < 1 || c.eg_steps() > 100000)
      return absl::InvalidArgumentError(
          absl::StrCat("mixture.eg_steps is ", c.eg_steps(), ", expected S in 1..100000"));
    p.eg_steps = c.eg_steps();
  }
  if (c.has_eg_step_size()) {
    if (auto s = CheckPositive("mixture.eg_step_size", c.eg_step_size()); !s.ok()) return s;
    p.eg_step_size = c.eg_step_size();
  }
  if (c.has_fidelity_weight()) {
    if (auto s = CheckRange("mixture.fidelity_weight", c.fidelity_weight(), 0.0, 1e12); !s.ok())
      return s;
    p.fidelity_weight = c.fidelity_weight();
  }
  if (c.has_epsilon()) {
    if (auto s = CheckRange("mixture.epsilon", c.epsilon(), 0.0, 1.0); !s.ok()) return s;
    p.epsilon = c.epsilon();
  }
  p.epsilon_over_mixture = c.epsilon_over_mixture();
  if (c.has_ucb_beta()) {
    if (auto s = CheckRange("mixture.ucb_beta", c.ucb_beta(), 0.0, 1e12); !s.ok()) return s;
    p.ucb_beta = c.ucb_beta();
  }
  if (c.has_ucb_delta()) {
    if (auto s = CheckRange("mixture.ucb_delta", c.ucb_delta(), 0.0, 1e12); !s.ok()) return s;
    p.ucb_delta = c.ucb_delta();
  }
  if (c.has_alpha_floor()) {
    if (auto s = CheckRange("mixture.alpha_floor", c.alpha_floor(), 0.0, 1e-3); !s.ok()) return s;
    p.alpha_floor = c.alpha_floor();
  }
  if (oracle) {
    if (c.oracle_weights_size() != num_arms)
      return absl::InvalidArgumentError(
          absl::StrCat("mixture.oracle_weights has ", c.oracle_weights_size(),
                       " values, expected one per arm (", num_arms, ")"));
    p.oracle_weights = Eigen::Map<const Vector>(c.oracle_weights().data(), num_arms);
    for (int i = 0; i < num_arms; ++i)
      if (!std::isfinite(p.oracle_weights[i]) || p.oracle_weights[i] < 0)
        return absl::InvalidArgumentError(absl::StrCat("mixture.oracle_weights[", i, "] is ",
                                                       p.oracle_weights[i],
                                                       ", expected a finite number >= 0"));
    if (std::abs(p.oracle_weights.sum() - 1.0) > 1e-6)
      return absl::InvalidArgumentError(
          absl::StrCat("mixture.oracle_weights sum to ", p.oracle_weights.sum(), ", expected 1"));
    p.oracle_weights /= p.oracle_weights.sum();
  } else if (c.oracle_weights_size() > 0) {
    return absl::InvalidArgumentError(
        "mixture.oracle_weights is set, expected it only with algorithm MIXTURE_ORACLE");
  }
  // ONE_ARM_ORACLE: oracle_arm is resolved to a slot by the factory, which knows the arm ids.
  if (one_arm_oracle && c.oracle_arm().empty())
    return absl::InvalidArgumentError(
        "mixture.oracle_arm is empty, expected the id of the arm ONE_ARM_ORACLE samples");
  if (!one_arm_oracle && !c.oracle_arm().empty())
    return absl::InvalidArgumentError(
        "mixture.oracle_arm is set, expected it only with algorithm ONE_ARM_ORACLE");
  return p;
}

MixturePolicy::MixturePolicy(ArmSet arms, MixtureParams params, FeatureMap features,
                             std::unique_ptr<Objective> objective, Rng rng)
    : arms_(std::move(arms)),
      params_(std::move(params)),
      features_(std::move(features)),
      objective_(std::move(objective)),
      stats_(arms_.size(), features_.dim(), objective_->NeedsSecondMoment()),
      rng_(rng) {
  const int m = arms_.size();
  alpha_ = Vector::Constant(m, m > 0 ? 1.0 / m : 0.0);  // Algorithm 1 line 5: uniform start
  probs_ = alpha_;
}

bool MixturePolicy::InWarmStart() const {
  return arms_.size() > 0 && stats_.counts().minCoeff() < params_.warm_start;
}

std::unique_ptr<BoundLoss> MixturePolicy::BindLoss(const Vector& extra_linear) const {
  const int m = arms_.size();
  Vector lin = Vector::Zero(m);
  if (params_.fidelity_weight > 0)  // Section 5.3: + w sum_i a_i (1 - theta_i)
    lin += params_.fidelity_weight * (Vector::Ones(m) - stats_.FidelityMeans());
  if (extra_linear.size() == m) lin += extra_linear;
  auto base = objective_->Bind(stats_);
  if (lin.isZero(0.0)) return base;
  return std::make_unique<LinearPlus>(std::move(base), std::move(lin));
}

double MixturePolicy::PluginLoss(const Vector& alpha) const { return BindLoss()->Value(alpha); }

double MixturePolicy::StepSize() const {
  return params_.eg_step_size ? *params_.eg_step_size : objective_->DefaultStepSize(stats_);
}

double MixturePolicy::GreedyStep(const Vector& extra_linear) {
  auto loss = BindLoss(extra_linear);
  // Algorithm 1 lines 5-11: warm start from alpha_{t-1}, S EG steps (eq. 13).
  EgResult r =
      ExponentiatedGradient(*loss, alpha_, params_.eg_steps, StepSize(), params_.alpha_floor);
  if (r.alpha.allFinite() && std::abs(r.alpha.sum() - 1.0) < 1e-6) alpha_ = r.alpha;
  return r.value;
}

Vector MixturePolicy::VertexLosses() const {
  const int m = arms_.size();
  auto loss = BindLoss();
  Vector v(m);
  for (int i = 0; i < m; ++i) v[i] = loss->Value(Vector::Unit(m, i));
  return v;
}

absl::StatusOr<Decision> MixturePolicy::Select(const SelectContext& ctx) {
  const int m = arms_.size();
  if (m == 0)
    return absl::FailedPreconditionError("the arm set is empty, expected at least one arm");
  const std::span<const char> allowed = ctx.allowed_arms;
  if (auto s = CheckAllowedArms(allowed, m); !s.ok()) return s;
  Decision d;
  Vector p;
  if (InWarmStart()) {
    // Algorithm 1 line 2: M samples per arm, deterministic round-robin over the least-sampled
    // (allowed) arms.
    double least = std::numeric_limits<double>::infinity();
    for (int j = 0; j < m; ++j)
      if (IsAllowed(allowed, j)) least = std::min(least, stats_.counts()[j]);
    int pick = NthAllowed(allowed, 0);
    for (int k = 0; k < m; ++k) {
      const int j = static_cast<int>((rr_ + k) % m);
      if (IsAllowed(allowed, j) && stats_.counts()[j] == least) {
        pick = j;
        break;
      }
    }
    rr_ = (pick + 1) % m;
    d.arm = pick;
    d.propensity = 1.0;
    p = Vector::Unit(m, pick);
    d.diagnostics = {{"warm_start", 1.0}};
  } else {
    Vector arm_gap;
    std::vector<std::pair<std::string, double>> diag;
    p = ComputeDistribution(&diag, &arm_gap);
    if (CountAllowed(allowed, m) < m) {
      // The mixture conditioned on the allowed arms: alpha_i / sum of the allowed alpha_j
      // (uniform over them if the mixture gives them no mass).
      for (int j = 0; j < m; ++j)
        if (!IsAllowed(allowed, j)) p[j] = 0.0;
      const double mass = p.sum();
      if (mass > 0) {
        p /= mass;
      } else {
        for (int j = 0; j < m; ++j) p[j] = IsAllowed(allowed, j) ? 1.0 : 0.0;
        p /= p.sum();
      }
    }
    probs_ = p;
    d.arm = rng_.Categorical(p);
    d.propensity = p[d.arm];
    if (arm_gap.size() == m) d.estimated_gap = arm_gap[d.arm];
    d.diagnostics = std::move(diag);
    d.diagnostics.insert(d.diagnostics.begin(), {"alpha", p[d.arm]});
  }
  ++t_;
  d.arm_id = arms_.id(d.arm);
  d.diagnostics.push_back({"pulls", stats_.counts()[d.arm]});
  if (ctx.want_scores) {
    d.scores = p;
    d.score_kind = bandit::v1::PROBABILITY;
  }
  return d;
}

absl::Status MixturePolicy::Update(const Observation& obs) {
  // No sample reads as an empty embedding: refused for its dimension, with the message of any
  // other wrong-sized embedding.
  static const GeneratedSample kNoSample;
  const GeneratedSample& sample = obs.sample ? *obs.sample : kNoSample;
  if (auto s = CheckVector("embedding", sample.embedding, params_.dimension); !s.ok()) return s;
  if (auto s = features_.Check("embedding", sample.embedding); !s.ok()) return s;
  if (sample.fidelity) {
    if (auto s = CheckRange("fidelity", *sample.fidelity, 0.0, 1.0); !s.ok()) return s;
  } else if (params_.fidelity_weight > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("fidelity is missing, expected a fidelity score in [0, 1] (fidelity_weight = ",
                     params_.fidelity_weight, ")"));
  }
  auto slot = arms_.Find(obs.arm_id);
  if (!slot)
    return absl::NotFoundError(absl::StrCat("arm id '", obs.arm_id, "' is not in the arm set"));
  Vector phi;
  features_.Map(sample.embedding, &phi);
  stats_.Add(*slot, phi, sample.fidelity);
  return absl::OkStatus();
}

absl::Status MixturePolicy::AddArm(const bandit::v1::ArmSpec& arm) {
  if (!SupportsArmChanges())
    return absl::FailedPreconditionError(
        "the mixture oracle has fixed weights; arms cannot be added or removed");
  if (auto s = arms_.CheckAdd(arm); !s.ok()) return s;
  const double D = static_cast<double>(features_.dim());
  if ((arms_.size() + 1.0) * D * D * 8.0 > static_cast<double>(1 << 30))
    return absl::ResourceExhaustedError(
        "adding an arm would exceed the 1 GiB per-instance state limit");
  arms_.Add(arm);
  stats_.AddArm();
  const int m = arms_.size();
  // New arm gets 1/m; the others keep their proportions. It is warm-started by Select.
  alpha_.conservativeResize(m);
  alpha_.head(m - 1) *= (m - 1.0) / m;
  alpha_[m - 1] = 1.0 / m;
  alpha_ = Normalize(alpha_);
  probs_ = alpha_;
  return absl::OkStatus();
}

absl::Status MixturePolicy::RemoveArm(absl::string_view arm_id) {
  if (!SupportsArmChanges())
    return absl::FailedPreconditionError(
        "the mixture oracle has fixed weights; arms cannot be added or removed");
  auto slot = arms_.Remove(arm_id);
  if (!slot.ok()) return slot.status();
  stats_.RemoveArm(*slot);
  EraseSlot(alpha_, *slot);
  if (alpha_.size() > 0) alpha_ = Normalize(alpha_);
  probs_ = alpha_;
  return absl::OkStatus();
}

absl::Status MixturePolicy::Reconfigure(Policy& fresh) {
  auto* next = dynamic_cast<MixturePolicy*>(&fresh);
  if (next == nullptr)
    return absl::FailedPreconditionError(
        absl::StrCat("a mixture cannot become policy '", fresh.name(), "' live"));
  const MixtureParams& p = next->params_;
  if (p.algorithm != params_.algorithm || p.objective != params_.objective ||
      p.dimension != params_.dimension || p.random_features != params_.random_features ||
      p.bandwidth != params_.bandwidth)
    return absl::FailedPreconditionError(
        "a mixture keeps its algorithm, objective, dimension, random_features and bandwidth "
        "live (its statistics live in that feature space); only the reference and the other "
        "parameters can change");
  if (next->arms_.ids() != arms_.ids())
    return absl::FailedPreconditionError(
        "the new config lists different arms; change arms "
        "with AddArms/RemoveArms");
  objective_ = std::move(next->objective_);
  params_ = p;
  return absl::OkStatus();
}

std::vector<std::pair<std::string, double>> MixturePolicy::Summary() const {
  std::vector<std::pair<std::string, double>> out;
  const double n = stats_.total();
  out.push_back({"samples", n});
  out.push_back({"rounds", static_cast<double>(t_)});
  out.push_back({"warm_start", InWarmStart() ? 1.0 : 0.0});
  const Vector& fn = stats_.fidelity_counts();
  if (fn.sum() > 0) out.push_back({"fidelity", stats_.FidelityMeans().dot(fn) / fn.sum()});
  if (n <= 0) return out;
  const Vector emp = stats_.counts() / n;  // the collected samples = mixture with a_i = n_i / N
  auto base = objective_->Bind(stats_);
  auto loss = BindLoss();
  const double objective = loss->Value(emp);
  out.push_back({"score", objective_->Score(base->Value(emp))});
  out.push_back({"objective", objective});
  // Plug-in optimum over the arms that have samples, EG from the current iterate.
  Vector start = alpha_;
  for (int i = 0; i < start.size(); ++i)
    if (stats_.counts()[i] <= 0) start[i] = 0;
  start = Normalize(start.cwiseMax(0.0));
  for (int i = 0; i < start.size(); ++i)
    if (stats_.counts()[i] > 0) start[i] = std::max(start[i], 1e-6);
  start = Normalize(start);
  const EgResult best = ExponentiatedGradient(*loss, start, 50, StepSize(), 0.0, true);
  const double best_obj = std::min(best.value, objective);
  out.push_back({"best_objective", best_obj});
  out.push_back(
      {"best_score", objective_->Score(base->Value(best.value <= objective ? best.alpha : emp))});
  out.push_back({"gap", objective - best_obj});
  return out;
}

void MixturePolicy::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, name(), 1);
  arms_.Save(w);
  w.PutInt("algorithm", params_.algorithm);
  w.PutInt("objective", params_.objective);
  features_.Save(w);
  objective_->Save(w);
  stats_.Save(w);
  w.Put("alpha", alpha_);
  w.Put("probs", probs_);
  w.PutInt("t", t_);
  w.PutInt("rr", rr_);
  w.PutRng(rng_);
}

absl::Status MixturePolicy::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect(name(), 1); !s.ok()) return s;
  int64_t algorithm, objective, t, rr;
  if (auto s = r.GetInt("algorithm", &algorithm); !s.ok()) return s;
  if (auto s = r.GetInt("objective", &objective); !s.ok()) return s;
  if (algorithm != params_.algorithm || objective != params_.objective)
    return absl::InvalidArgumentError(absl::StrCat(
        "state is for mixture algorithm ", algorithm, " / objective ", objective,
        ", expected algorithm ", params_.algorithm, " / objective ", params_.objective));
  ArmSet arms = arms_;
  if (auto s = arms.Restore(r); !s.ok()) return s;
  const int m = arms.size();
  FeatureMap features = features_;
  if (auto s = features.Restore(r); !s.ok()) return s;
  std::unique_ptr<Objective> obj = objective_->Clone();
  if (auto s = obj->Restore(r); !s.ok()) return s;
  MixtureStats stats = stats_;
  if (auto s = stats.Restore(r, m); !s.ok()) return s;
  Vector alpha, probs;
  if (auto s = r.Get("alpha", &alpha, m); !s.ok()) return s;
  if (auto s = r.Get("probs", &probs, m); !s.ok()) return s;
  if (!alpha.allFinite() || !probs.allFinite() || (alpha.array() < 0).any() ||
      (probs.array() < 0).any())
    return absl::InvalidArgumentError("state alpha / probs must be finite and >= 0");
  if (auto s = r.GetInt("t", &t); !s.ok()) return s;
  if (auto s = r.GetInt("rr", &rr); !s.ok()) return s;
  Rng rng;
  if (auto s = r.GetRng(&rng); !s.ok()) return s;
  arms_ = std::move(arms);
  features_ = std::move(features);
  objective_ = std::move(obj);
  stats_ = std::move(stats);
  alpha_ = std::move(alpha);
  probs_ = std::move(probs);
  t_ = t;
  rr_ = rr;
  rng_ = rng;
  return absl::OkStatus();
}

int64_t MixturePolicy::StateBytes() const {
  return arms_.Bytes() + features_.Bytes() + objective_->Bytes() + stats_.Bytes() +
         (alpha_.size() + probs_.size()) * static_cast<int64_t>(sizeof(double)) + sizeof(t_) +
         sizeof(rr_) + sizeof(rng_);
}

}  // namespace bandit::mixture
