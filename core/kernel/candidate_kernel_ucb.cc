#include "core/kernel/candidate_kernel_ucb.h"

#include <cmath>

#include "core/validate.h"

namespace bandit {

absl::Status CheckCandidatesForm(absl::string_view field, int dimension,
                                 const bandit::v1::PolicyConfig& config) {
  if (dimension < 1 || dimension > CandidateKernelUcb::kMaxDimension)
    return absl::InvalidArgumentError(absl::StrCat(field, ".dimension is ", dimension,
                                                   ", expected an integer in [1, ",
                                                   CandidateKernelUcb::kMaxDimension, "]"));
  if (config.arms_size() > 0 || config.num_arms() > 0)
    return absl::InvalidArgumentError(
        absl::StrCat(field,
                     ".dimension is set together with arms, expected one of them: dimension for "
                     "per-request candidates, arms for a fixed arm set"));
  return absl::OkStatus();
}

double CandidateKernelUcb::Beta() const {
  return KernelUcbRadius(params_, kappa2_, static_cast<double>(total_), SumPulledVariance());
}

absl::StatusOr<Decision> CandidateKernelUcb::Select(const SelectContext& ctx) {
  const int n = static_cast<int>(ctx.candidates.size());
  if (n == 0)
    return absl::InvalidArgumentError("candidates is empty, expected at least one feature vector");
  for (int i = 0; i < n; ++i)
    if (ctx.candidates[i].size() != dim_ ||
        !ctx.candidates[i].allFinite())  // name built on error only
      return CheckVector(absl::StrCat("candidates[", i, "]"), ctx.candidates[i], dim_);
  Matrix X(dim_, n);
  for (int i = 0; i < n; ++i) X.col(i) = ctx.candidates[i];
  Vector mean, var;
  Posterior(X, &mean, &var);
  const double beta = Beta();
  Decision d;
  double best_ucb = -std::numeric_limits<double>::infinity();
  // u_t(x) of every candidate; argmax with ties to the lowest index (eq. 3 / eq. 4).
  Vector ucb(n);
  for (int i = 0; i < n; ++i) {
    ucb[i] = mean[i] + beta * std::sqrt(var[i]);
    if (ucb[i] > best_ucb) {
      best_ucb = ucb[i];
      d.arm = i;
    }
  }
  if (total_ == 0) {
    // Fig. 1, first line: "Select uniformly at random x_1".
    d.arm = static_cast<int>(rng_.UniformInt(n));
    d.propensity = 1.0 / n;
  } else {
    d.propensity = 1.0;
  }
  if (d.arm < 0)
    return absl::FailedPreconditionError(
        "every candidate's upper confidence bound is NaN, expected a finite posterior; reset the "
        "instance");
  d.estimated_gap = mean.maxCoeff() - mean[d.arm];
  d.diagnostics = {
      {"ucb", ucb[d.arm]}, {"mean", mean[d.arm]}, {"sigma", std::sqrt(var[d.arm])}, {"beta", beta}};
  if (ctx.want_scores) {
    d.scores = std::move(ucb);
    d.score_kind = bandit::v1::UPPER_CONFIDENCE_BOUND;
  }
  ExtraDiagnostics(&d);
  return d;
}

absl::Status CandidateKernelUcb::Update(const Observation& obs) {
  if (auto s = CheckVector("features", obs.features, dim_); !s.ok()) return s;
  if (auto s = CheckFinite("reward", obs.reward); !s.ok()) return s;
  return Observe(obs.features, obs.reward);
}

std::vector<std::pair<std::string, double>> CandidateKernelUcb::Summary() const {
  std::vector<std::pair<std::string, double>> out = {
      {"observations", static_cast<double>(total_)},
      {"dimension", static_cast<double>(dim_)},
      {"beta_t", Beta()},
      {"sum_pulled_variance", SumPulledVariance()},
      {"kappa2", kappa2_},
      {"lambda", params_.lambda},
  };
  ExtraSummary(&out);
  return out;
}

}  // namespace bandit
