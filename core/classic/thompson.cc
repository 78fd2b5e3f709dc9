#include "core/classic/thompson.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include "core/state_io.h"
#include "core/validate.h"

namespace bandit {

namespace {
absl::Status Positive(absl::string_view f, double v) { return CheckRange(f, v, 1e-300, 1e300); }
absl::Status Finite(absl::string_view f, double v) { return CheckRange(f, v, -1e300, 1e300); }
}  // namespace

absl::StatusOr<std::unique_ptr<Policy>> Thompson::Make(const bandit::v1::PolicyConfig& config,
                                                       uint64_t seed) {
  const auto& c = config.thompson();
  Likelihood lik;
  switch (c.likelihood()) {
    case bandit::v1::ThompsonConfig::LIKELIHOOD_UNSPECIFIED:
    case bandit::v1::ThompsonConfig::BERNOULLI:
      lik = Likelihood::kBernoulli;
      break;
    case bandit::v1::ThompsonConfig::GAUSSIAN:
      lik = Likelihood::kGaussian;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("thompson.likelihood is ", c.likelihood(),
                                                     ", expected BERNOULLI or GAUSSIAN"));
  }
  Prior p;
  if (auto s = OptionalParam("thompson.prior_alpha", c.has_prior_alpha(), c.prior_alpha(), 1.0,
                             &p.alpha, Positive);
      !s.ok())
    return s;
  if (auto s = OptionalParam("thompson.prior_beta", c.has_prior_beta(), c.prior_beta(), 1.0,
                             &p.beta, Positive);
      !s.ok())
    return s;
  if (auto s = OptionalParam("thompson.prior_mean", c.has_prior_mean(), c.prior_mean(), 0.0,
                             &p.mean, Finite);
      !s.ok())
    return s;
  if (auto s = OptionalParam("thompson.prior_variance", c.has_prior_variance(), c.prior_variance(),
                             1.0, &p.variance, Positive);
      !s.ok())
    return s;
  if (auto s = OptionalParam("thompson.noise_variance", c.has_noise_variance(), c.noise_variance(),
                             1.0, &p.noise, Positive);
      !s.ok())
    return s;
  const int m = c.has_propensity_samples() ? c.propensity_samples() : kDefaultPropensitySamples;
  if (m < 0 || m > kMaxPropensitySamples)
    return absl::InvalidArgumentError(absl::StrCat("thompson.propensity_samples is ", m,
                                                   ", expected 0..", kMaxPropensitySamples));
  PropensityMethod method;
  switch (c.propensity_method()) {
    case bandit::v1::ThompsonConfig::PROPENSITY_METHOD_UNSPECIFIED:
    case bandit::v1::ThompsonConfig::QUADRATURE:
      method = PropensityMethod::kQuadrature;
      break;
    case bandit::v1::ThompsonConfig::MONTE_CARLO:
      method = PropensityMethod::kMonteCarlo;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("thompson.propensity_method is ",
                                                     c.propensity_method(),
                                                     ", expected QUADRATURE or MONTE_CARLO"));
  }
  auto arms = ArmSet::FromConfig(config, ArmFeatures::kNone);
  if (!arms.ok()) return arms.status();
  return std::unique_ptr<Policy>(new Thompson(*std::move(arms), lik, p, method, m, seed));
}

Thompson::Thompson(ArmSet arms, Likelihood lik, Prior prior, PropensityMethod method, int samples,
                   uint64_t seed)
    : arms_(std::move(arms)),
      likelihood_(lik),
      prior_(prior),
      method_(method),
      samples_(samples),
      rng_(seed) {
  const int k = arms_.size();
  counts_ = Vector::Zero(k);
  if (lik == Likelihood::kBernoulli) {
    a_ = Vector::Constant(k, prior_.alpha);
    b_ = Vector::Constant(k, prior_.beta);
  } else {
    sums_ = Vector::Zero(k);
  }
}

double Thompson::PosteriorA(int i) const {
  if (likelihood_ == Likelihood::kBernoulli) return a_[i];
  const double v = PosteriorB(i);
  return v * (prior_.mean / prior_.variance + sums_[i] / prior_.noise);
}

double Thompson::PosteriorB(int i) const {
  if (likelihood_ == Likelihood::kBernoulli) return b_[i];
  return 1.0 / (1.0 / prior_.variance + counts_[i] / prior_.noise);
}

Vector Thompson::PosteriorMeans() const {
  const int k = arms_.size();
  Vector m(k);
  for (int i = 0; i < k; ++i)
    m[i] = likelihood_ == Likelihood::kBernoulli ? a_[i] / (a_[i] + b_[i]) : PosteriorA(i);
  return m;
}

double Thompson::Draw(Rng& rng, int i) const {
  if (likelihood_ == Likelihood::kBernoulli) return rng.Beta(a_[i], b_[i]);
  return rng.Normal(PosteriorA(i), std::sqrt(PosteriorB(i)));
}

std::pair<double, double> Thompson::PosteriorShape(int i) const {
  if (likelihood_ == Likelihood::kBernoulli) return {a_[i], b_[i]};
  return {PosteriorA(i), std::sqrt(PosteriorB(i))};
}

ArgmaxPosteriors Thompson::PosteriorShapes() const {
  const int k = arms_.size();
  ArgmaxPosteriors shapes{likelihood_ == Likelihood::kBernoulli, Vector(k), Vector(k)};
  for (int i = 0; i < k; ++i) std::tie(shapes.first[i], shapes.second[i]) = PosteriorShape(i);
  return shapes;
}

const ArgmaxProbability& Thompson::Posteriors() const {
  if (posteriors_stale_) {
    const ArgmaxPosteriors shapes = PosteriorShapes();
    posteriors_ = ArgmaxProbability(
        shapes.beta ? ArgmaxProbability::Family::kBeta : ArgmaxProbability::Family::kNormal,
        shapes.first, shapes.second);
    posteriors_stale_ = false;
  }
  return posteriors_;
}

Vector Thompson::ArgmaxProbabilities() const {
  if (arms_.size() == 0) return Vector();
  return Posteriors().All();
}

int Thompson::ArgMax(const Vector& v, std::span<const char> allowed) {
  int best = NthAllowed(allowed, 0);
  for (int i = best + 1; i < v.size(); ++i)
    if (IsAllowed(allowed, i) && v[i] > v[best]) best = i;
  return best;
}

absl::StatusOr<Decision> Thompson::Select(const SelectContext& ctx) {
  const int k = arms_.size();
  if (k == 0)
    return absl::FailedPreconditionError("the arm set is empty, expected at least one arm");
  const std::span<const char> allowed = ctx.allowed_arms;
  if (auto s = CheckAllowedArms(allowed, k); !s.ok()) return s;
  const bool masked = CountAllowed(allowed, k) < k;
  // Every arm is drawn, allowed or not (the random stream does not depend on the mask); the
  // argmax is over the allowed ones, whose draws are independent of the others'.
  Vector theta(k);
  for (int i = 0; i < k; ++i) theta[i] = Draw(rng_, i);  // theta_i ~ posterior_i
  Decision d;
  d.arm = ArgMax(theta, allowed);
  d.arm_id = arms_.id(d.arm);
  ++rounds_;
  if (samples_ > 0) {
    // The sub-seed is drawn under either method: one random stream (see header).
    const uint64_t subseed = rng_.NextU64();
    Vector p;
    if (method_ == PropensityMethod::kMonteCarlo) {
      Rng local(subseed);
      Vector wins = Vector::Zero(k);
      wins[d.arm] += 1.0;  // the decision's own draw
      Vector draw(k);
      for (int s = 0; s < samples_; ++s) {
        for (int i = 0; i < k; ++i) draw[i] = Draw(local, i);
        wins[ArgMax(draw, allowed)] += 1.0;
      }
      p = wins / static_cast<double>(samples_ + 1);
    } else if (masked) {
      // P(arm i is the argmax of the allowed arms' draws): the same integral over the allowed
      // arms' posteriors only (uncached: the mask changes from one decision to the next).
      const ArgmaxPosteriors shapes = PosteriorShapes();
      std::vector<int> slot_of;
      for (int i = 0; i < k; ++i)
        if (IsAllowed(allowed, i)) slot_of.push_back(i);
      const int n = static_cast<int>(slot_of.size());
      Vector first(n), second(n);
      int chosen = 0;
      for (int j = 0; j < n; ++j) {
        first[j] = shapes.first[slot_of[j]];
        second[j] = shapes.second[slot_of[j]];
        if (slot_of[j] == d.arm) chosen = j;
      }
      const ArgmaxProbability sub(
          shapes.beta ? ArgmaxProbability::Family::kBeta : ArgmaxProbability::Family::kNormal,
          first, second);
      p = Vector::Zero(k);
      if (ctx.want_scores) {
        const Vector all = sub.All();
        for (int j = 0; j < n; ++j) p[slot_of[j]] = all[j];
      }
      p[d.arm] = std::max(sub.Of(chosen), kPropensityFloor);
    } else {
      const ArgmaxProbability& posteriors = Posteriors();
      if (ctx.want_scores && !ctx.want_scores.posteriors_suffice()) {
        // All() integrates on nodes shared by every arm, Of() on the chosen arm's own: they
        // agree within the quadrature's error, and the propensity is Of()'s whether or not the
        // scores were asked for (so is the vector's entry for the chosen arm).
        p = posteriors.All();
        p[d.arm] = posteriors.Of(d.arm);
      } else {
        p = Vector::Zero(k);
        p[d.arm] = posteriors.Of(d.arm);
      }
      p[d.arm] = std::max(p[d.arm], kPropensityFloor);
    }
    d.propensity = p[d.arm];
    if (ctx.want_scores.posteriors_suffice() && !masked &&
        method_ != PropensityMethod::kMonteCarlo) {
      // The vector is a quadrature per arm: the caller computes it from the posteriors when it
      // needs it (ArgmaxProbabilities), the served decision needs only its own arm's.
      d.extension = PosteriorShapes();
    } else if (ctx.want_scores) {
      d.scores = std::move(p);
      d.score_kind = bandit::v1::PROBABILITY;
    }
  } else {
    d.propensity = std::numeric_limits<double>::quiet_NaN();
    if (ctx.want_scores) {
      d.scores = theta;
      d.score_kind = bandit::v1::POSTERIOR_SAMPLE;
    }
  }
  const Vector means = PosteriorMeans();
  double best_mean = -std::numeric_limits<double>::infinity();
  for (int i = 0; i < k; ++i)
    if (IsAllowed(allowed, i)) best_mean = std::max(best_mean, means[i]);
  d.estimated_gap = best_mean - means[d.arm];
  d.diagnostics = {{"sample", theta[d.arm]}, {"mean", means[d.arm]}, {"pulls", counts_[d.arm]}};
  return d;
}

absl::Status Thompson::Update(const Observation& obs) {
  if (likelihood_ == Likelihood::kBernoulli) {
    if (auto s = CheckRange("reward", obs.reward, 0.0, 1.0); !s.ok()) return s;
  } else {
    if (auto s = CheckFinite("reward", obs.reward); !s.ok()) return s;
  }
  auto slot = arms_.Find(obs.arm_id);
  if (!slot)
    return absl::NotFoundError(absl::StrCat("arm id '", obs.arm_id, "' is not in the arm set"));
  const int i = *slot;
  counts_[i] += 1.0;
  if (likelihood_ == Likelihood::kBernoulli) {
    a_[i] += obs.reward;  // fractional conjugate update
    b_[i] += 1.0 - obs.reward;
  } else {
    sums_[i] += obs.reward;
  }
  if (!posteriors_stale_) {
    const auto [first, second] = PosteriorShape(i);
    posteriors_.Set(i, first, second);
  }
  return absl::OkStatus();
}

std::optional<double> Thompson::EstimatedMean(int arm) const {
  if (arm < 0 || arm >= arms_.size()) return std::nullopt;
  return PosteriorMeans()[arm];
}

absl::Status Thompson::AddArm(const bandit::v1::ArmSpec& arm) {
  if (auto s = arms_.CheckAdd(arm); !s.ok()) return s;
  const int slot = arms_.Add(arm);
  auto grow = [slot](Vector& v, double value) {
    v.conservativeResize(slot + 1);
    v[slot] = value;
  };
  grow(counts_, 0.0);
  if (likelihood_ == Likelihood::kBernoulli) {
    grow(a_, prior_.alpha);
    grow(b_, prior_.beta);
  } else {
    grow(sums_, 0.0);
  }
  posteriors_stale_ = true;
  return absl::OkStatus();
}

absl::Status Thompson::RemoveArm(absl::string_view arm_id) {
  auto slot = arms_.Remove(arm_id);
  if (!slot.ok()) return slot.status();
  EraseSlot(counts_, *slot);
  if (likelihood_ == Likelihood::kBernoulli) {
    EraseSlot(a_, *slot);
    EraseSlot(b_, *slot);
  } else {
    EraseSlot(sums_, *slot);
  }
  posteriors_stale_ = true;
  return absl::OkStatus();
}

void Thompson::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, name(), 1);
  arms_.Save(w);
  w.Put("counts", counts_);
  if (likelihood_ == Likelihood::kBernoulli) {
    w.Put("alpha", a_);
    w.Put("beta", b_);
  } else {
    w.Put("sums", sums_);
  }
  w.PutInt("rounds", rounds_);
  w.PutRng(rng_);
}

absl::Status Thompson::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect(name(), 1); !s.ok()) return s;
  ArmSet arms = arms_;
  if (auto s = arms.Restore(r); !s.ok()) return s;
  const int k = arms.size();
  Vector counts, a, b, sums;
  int64_t rounds;
  Rng rng;
  if (auto s = r.Get("counts", &counts, k); !s.ok()) return s;
  if (likelihood_ == Likelihood::kBernoulli) {
    if (auto s = r.Get("alpha", &a, k); !s.ok()) return s;
    if (auto s = r.Get("beta", &b, k); !s.ok()) return s;
    if (!((a.array() > 0).all() && (b.array() > 0).all() && a.allFinite() && b.allFinite()))
      return absl::InvalidArgumentError("thompson state alpha/beta must be finite and > 0");
  } else {
    if (auto s = r.Get("sums", &sums, k); !s.ok()) return s;
    if (!sums.allFinite()) return absl::InvalidArgumentError("thompson state sums must be finite");
  }
  if (auto s = r.GetInt("rounds", &rounds); !s.ok()) return s;
  if (auto s = r.GetRng(&rng); !s.ok()) return s;
  arms_ = std::move(arms);
  counts_ = std::move(counts);
  a_ = std::move(a);
  b_ = std::move(b);
  sums_ = std::move(sums);
  rounds_ = rounds;
  rng_ = rng;
  posteriors_stale_ = true;
  return absl::OkStatus();
}

int64_t Thompson::StateBytes() const {
  return arms_.Bytes() +
         (counts_.size() + a_.size() + b_.size() + sums_.size()) *
             static_cast<int64_t>(sizeof(double)) +
         sizeof(rounds_) + sizeof(rng_);
}

std::vector<std::pair<std::string, double>> Thompson::Summary() const {
  return {{"updates", counts_.sum()}, {"rounds", static_cast<double>(rounds_)}};
}

}  // namespace bandit
