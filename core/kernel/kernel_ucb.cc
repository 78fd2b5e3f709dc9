#include "core/kernel/kernel_ucb.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/validate.h"

namespace bandit {

absl::Status ReadKernelUcbParams(absl::string_view field, const bandit::v1::KernelSpec& kernel,
                                 bool has_lambda, double lambda, bool has_noise, double noise,
                                 bool has_f, double f, bool has_delta, double delta, bool has_mult,
                                 double mult, KernelUcbParams* out) {
  auto k = Kernel::FromSpec(kernel, absl::StrCat(field, ".kernel"));
  if (!k.ok()) return k.status();
  out->kernel = *k;
  if (has_noise) {
    out->noise = noise;
    if (auto s = CheckRange(absl::StrCat(field, ".noise"), noise, 0.0, 1e6); !s.ok()) return s;
  }
  // Default lambda = xi^2 (Section 2: "where lambda = xi^2"), floored so it stays > 0.
  out->lambda = has_lambda ? lambda : std::max(out->noise * out->noise, 1e-6);
  if (auto s = CheckRange(absl::StrCat(field, ".lambda"), out->lambda, 1e-12, 1e12); !s.ok())
    return s;
  if (has_f) {
    out->f_bound = f;
    if (auto s = CheckRange(absl::StrCat(field, ".f_bound"), f, 0.0, 1e12); !s.ok()) return s;
  }
  if (has_delta) {
    out->delta = delta;
    if (!(delta > 0 && delta < 1))
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".delta is ", delta, ", expected a number in (0, 1)"));
  }
  if (has_mult) {
    out->radius_multiplier = mult;
    if (auto s = CheckRange(absl::StrCat(field, ".radius_multiplier"), mult, 0.0, 1e6); !s.ok())
      return s;
  }
  return absl::OkStatus();
}

double KernelUcbRadius(const KernelUcbParams& params, double kappa2, double t, double sum_var) {
  // alpha = 1, eps = 0 for exact GP-UCB.
  const double eps = params.epsilon;
  const double alpha = (1.0 + eps) / (1.0 - eps);
  const double log_t = std::log(std::max(kappa2 * t, 1.0));  // log(kappa^2 t), floored at 0
  return params.radius_multiplier *
         (2.0 * params.noise * std::sqrt(alpha * log_t * sum_var + std::log(1.0 / params.delta)) +
          (1.0 + 1.0 / std::sqrt(1.0 - eps)) * std::sqrt(params.lambda) * params.f_bound);
}

KernelUcbPolicy::KernelUcbPolicy(ArmSet arms, KernelUcbParams params, uint64_t seed)
    : arms_(std::move(arms)), params_(params), rng_(seed) {
  counts_ = Vector::Zero(arms_.size());
  sums_ = Vector::Zero(arms_.size());
  RecomputeKappa();
}

void KernelUcbPolicy::RecomputeKappa() {
  kdiag_ = params_.kernel.DiagAll(arms_.features());
  kappa2_ = kdiag_.size() > 0 ? kdiag_.maxCoeff() : 1.0;
  valid_ = false;
}

void KernelUcbPolicy::EnsurePosterior() const {
  if (valid_) return;
  ComputePosterior(&mean_, &var_);
  beta_ = KernelUcbRadius(params_, kappa2_, total_, counts_.dot(var_));
  valid_ = true;
}

const Vector& KernelUcbPolicy::PosteriorMean() const {
  EnsurePosterior();
  return mean_;
}
const Vector& KernelUcbPolicy::PosteriorVariance() const {
  EnsurePosterior();
  return var_;
}
double KernelUcbPolicy::Beta() const {
  EnsurePosterior();
  return beta_;
}
Vector KernelUcbPolicy::Ucb() const {
  EnsurePosterior();
  return mean_ + beta_ * var_.cwiseSqrt();
}

absl::StatusOr<Decision> KernelUcbPolicy::Select(const SelectContext& ctx) {
  const int k = arms_.size();
  if (k == 0)
    return absl::FailedPreconditionError("the arm set is empty, expected at least one arm");
  const std::span<const char> allowed = ctx.allowed_arms;
  if (auto s = CheckAllowedArms(allowed, k); !s.ok()) return s;
  EnsurePosterior();
  Decision d;
  double best_ucb = -std::numeric_limits<double>::infinity();
  // u_t(x_i) for every arm; argmax over the allowed ones with ties to the lowest slot
  // (eq. 3 / eq. 4).
  Vector ucb(k);
  for (int i = 0; i < k; ++i) {
    ucb[i] = mean_[i] + beta_ * std::sqrt(var_[i]);
    if (IsAllowed(allowed, i) && ucb[i] > best_ucb) {
      best_ucb = ucb[i];
      d.arm = i;
    }
  }
  if (total_ == 0) {
    // Fig. 1, first line: "Select uniformly at random x_1" (among the allowed arms).
    const int n = CountAllowed(allowed, k);
    d.arm = NthAllowed(allowed, static_cast<int>(rng_.UniformInt(n)));
    d.propensity = 1.0 / n;
  } else {
    d.propensity = 1.0;
  }
  // Every u_t NaN (a numerically broken posterior, e.g. restored from a crafted snapshot): no
  // argmax exists; refuse instead of indexing arm -1 (found by fuzzing, see results_hardening).
  if (d.arm < 0)
    return absl::FailedPreconditionError(
        "every arm's upper confidence bound is NaN, expected a finite posterior; reset the "
        "instance");
  d.arm_id = arms_.id(d.arm);
  double best_mean = -std::numeric_limits<double>::infinity();
  for (int i = 0; i < k; ++i)
    if (IsAllowed(allowed, i)) best_mean = std::max(best_mean, mean_[i]);
  d.estimated_gap = best_mean - mean_[d.arm];
  if (ctx.want_scores) {
    d.scores = std::move(ucb);
    d.score_kind = bandit::v1::UPPER_CONFIDENCE_BOUND;
    d.diagnostics = {{"ucb", d.scores[d.arm]}};
  } else {
    d.diagnostics = {{"ucb", ucb[d.arm]}};
  }
  d.diagnostics.push_back({"mean", mean_[d.arm]});
  d.diagnostics.push_back({"sigma", std::sqrt(var_[d.arm])});
  d.diagnostics.push_back({"beta", beta_});
  d.diagnostics.push_back({"pulls", counts_[d.arm]});
  ExtraDiagnostics(&d);
  return d;
}

absl::Status KernelUcbPolicy::Update(const Observation& obs) {
  if (auto s = CheckFinite("reward", obs.reward); !s.ok()) return s;
  auto slot = arms_.Find(obs.arm_id);
  if (!slot)
    return absl::NotFoundError(absl::StrCat("arm id '", obs.arm_id, "' is not in the arm set"));
  EnsurePosterior();  // sigma_t^2 of the state before this observation (cached, deterministic)
  const Vector var_before = var_;
  const bool first = total_ == 0;
  counts_[*slot] += 1.0;
  sums_[*slot] += obs.reward;
  total_ += 1.0;
  AfterObserve(*slot, var_before, first);
  Invalidate();
  return absl::OkStatus();
}

Vector KernelUcbPolicy::Weights() const { return PosteriorMean(); }

absl::Status KernelUcbPolicy::AddArm(const bandit::v1::ArmSpec& arm) {
  if (auto s = arms_.CheckAdd(arm); !s.ok()) return s;
  const int slot = arms_.Add(arm);
  counts_.conservativeResize(slot + 1);
  sums_.conservativeResize(slot + 1);
  counts_[slot] = 0;
  sums_[slot] = 0;
  OnAddArm();
  RecomputeKappa();
  return absl::OkStatus();
}

absl::Status KernelUcbPolicy::RemoveArm(absl::string_view arm_id) {
  auto slot = arms_.Remove(arm_id);
  if (!slot.ok()) return slot.status();
  // The removed arm's observations leave the model with it (they are stored per arm).
  total_ -= counts_[*slot];
  EraseSlot(counts_, *slot);
  EraseSlot(sums_, *slot);
  OnRemoveArm(*slot);
  RecomputeKappa();
  return absl::OkStatus();
}

void KernelUcbPolicy::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, name(), 1);
  arms_.Save(w);
  w.Put("counts", counts_);
  w.Put("sums", sums_);
  SaveExtra(w);
  w.PutRng(rng_);
}

absl::Status KernelUcbPolicy::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect(name(), 1); !s.ok()) return s;
  ArmSet arms = arms_;
  if (auto s = arms.Restore(r); !s.ok()) return s;
  Vector counts, sums;
  Rng rng;
  if (auto s = r.Get("counts", &counts, arms.size()); !s.ok()) return s;
  if (auto s = r.Get("sums", &sums, arms.size()); !s.ok()) return s;
  for (int i = 0; i < counts.size(); ++i) {
    if (!std::isfinite(counts[i]) || counts[i] < 0 || counts[i] != std::floor(counts[i]))
      return absl::InvalidArgumentError(absl::StrCat("state tensor counts[", i, "] is ", counts[i],
                                                     ", expected a non-negative integer"));
    if (!std::isfinite(sums[i]))
      return absl::InvalidArgumentError(
          absl::StrCat("state tensor sums[", i, "] is ", sums[i], ", expected a finite number"));
  }
  if (auto s = RestoreExtra(r, arms, counts); !s.ok()) return s;
  if (auto s = r.GetRng(&rng); !s.ok()) return s;
  arms_ = std::move(arms);
  counts_ = std::move(counts);
  sums_ = std::move(sums);
  total_ = counts_.sum();
  rng_ = rng;
  CommitExtra();
  RecomputeKappa();
  return absl::OkStatus();
}

int64_t KernelUcbPolicy::StateBytes() const {
  return arms_.Bytes() + (counts_.size() + sums_.size()) * sizeof(double) + sizeof(total_) +
         sizeof(rng_) + ExtraBytes();
}

std::vector<std::pair<std::string, double>> KernelUcbPolicy::Summary() const {
  EnsurePosterior();
  std::vector<std::pair<std::string, double>> out = {
      {"observations", total_},
      {"arms", static_cast<double>(arms_.size())},
      {"arms_pulled", static_cast<double>((counts_.array() > 0).count())},
      {"beta_t", beta_},
      {"sum_pulled_variance", counts_.dot(var_)},
      {"kappa2", kappa2_},
      {"lambda", params_.lambda},
  };
  ExtraSummary(&out);
  return out;
}

}  // namespace bandit
