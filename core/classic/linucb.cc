#include "core/classic/linucb.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/classic/linucb_diagonal.h"
#include "core/classic/linucb_sketched.h"
#include "core/classic/ucb_choice.h"
#include "core/common/fd_sketch.h"
#include "core/state_io.h"
#include "core/validate.h"

namespace bandit {

absl::StatusOr<std::unique_ptr<Policy>> LinUcb::Make(const bandit::v1::PolicyConfig& config,
                                                     uint64_t /*seed: deterministic policy*/) {
  const auto& c = config.linucb();
  const bool diagonal = c.covariance() == bandit::v1::COVARIANCE_DIAGONAL;
  const bool sketched = c.covariance() == bandit::v1::COVARIANCE_SKETCHED;
  if (!diagonal && !sketched && c.covariance() != bandit::v1::COVARIANCE_FULL)
    return absl::InvalidArgumentError(
        absl::StrCat("linucb.covariance is ", c.covariance(),
                     ", expected COVARIANCE_FULL, COVARIANCE_DIAGONAL or COVARIANCE_SKETCHED"));
  const int max_dim = diagonal   ? LinUcbDiagonal::kMaxDimension
                      : sketched ? LinUcbSketched::kMaxDimension
                                 : kMaxDimension;
  if (c.dimension() <= 0 || c.dimension() > max_dim)
    return absl::InvalidArgumentError(absl::StrCat(
        "linucb.dimension is ", c.dimension(), ", expected 1..", max_dim,
        diagonal || sketched ? ""
                             : " (a larger space: covariance: COVARIANCE_SKETCHED or "
                               "COVARIANCE_DIAGONAL)"));
  const auto sketch_size = FdSketch::SizeFromConfig(
      "linucb.sketch_size", sketched,
      c.has_sketch_size() ? std::optional<int>(c.sketch_size()) : std::nullopt);
  if (!sketch_size.ok()) return sketch_size.status();
  double lambda, alpha;
  if (auto s = OptionalParam(
          "linucb.lambda", c.has_lambda(), c.lambda(), 1.0, &lambda,
          [](absl::string_view f, double v) { return CheckRange(f, v, 1e-12, 1e12); });
      !s.ok())
    return s;
  if (auto s =
          OptionalParam("linucb.alpha", c.has_alpha(), c.alpha(), 1.0, &alpha,
                        [](absl::string_view f, double v) { return CheckRange(f, v, 0.0, 1e12); });
      !s.ok())
    return s;
  if (config.arms_size() > 0 || config.num_arms() != 0)
    return absl::InvalidArgumentError(
        "linucb takes candidate feature vectors with every Select, expected no arms / num_arms");
  if (diagonal) return std::unique_ptr<Policy>(new LinUcbDiagonal(c.dimension(), lambda, alpha));
  if (sketched)
    return std::unique_ptr<Policy>(
        new LinUcbSketched(c.dimension(), lambda, alpha, *sketch_size));
  return std::unique_ptr<Policy>(new LinUcb(c.dimension(), lambda, alpha));
}

LinUcb::LinUcb(int dim, double lambda, double alpha) : alpha_(alpha) {
  a_inv_ = Matrix::Identity(dim, dim) / lambda;  // A_0 = lambda I
  b_ = Vector::Zero(dim);
  theta_ = Vector::Zero(dim);
}

absl::StatusOr<Decision> LinUcb::Select(const SelectContext& ctx) {
  const int n = static_cast<int>(ctx.candidates.size());
  if (n == 0)
    return absl::InvalidArgumentError("candidates is empty, expected at least one feature vector");
  const int d = dimension();
  for (int i = 0; i < n; ++i)
    if (ctx.candidates[i].size() != d ||
        !IsInputVector(ctx.candidates[i]))  // name built on error only
      return CheckVector(absl::StrCat("candidates[", i, "]"), ctx.candidates[i], d);

  UcbChoice choice(n, ctx.want_scores);
  Vector u(d);
  for (int i = 0; i < n; ++i) {
    const Vector& x = ctx.candidates[i];
    u.noalias() = a_inv_ * x;
    // mean x'theta and width alpha ||x||_{A^-1} (>= 0): Alg. 1 line 9
    choice.Offer(i, x.dot(theta_), alpha_ * std::sqrt(std::max(0.0, x.dot(u))));
  }
  return std::move(choice).Take();
}

absl::Status LinUcb::Update(const Observation& obs) {
  if (auto s = CheckVector("features", obs.features, dimension()); !s.ok()) return s;
  if (auto s = CheckFinite("reward", obs.reward); !s.ok()) return s;
  const Vector& x = obs.features;
  // Sherman-Morrison: (A + x x')^{-1} = A^{-1} - (A^{-1}x)(A^{-1}x)' / (1 + x'A^{-1}x).
  const Vector u = a_inv_ * x;
  const double denom = 1.0 + x.dot(u);
  a_inv_.noalias() -= (u / denom) * u.transpose();
  b_.noalias() += obs.reward * x;  // Alg. 1 line 13
  theta_.noalias() = a_inv_ * b_;
  ++updates_;
  return absl::OkStatus();
}

std::optional<double> LinUcb::EstimatedMean(const Vector& features) const {
  if (features.size() != dimension() || !features.allFinite()) return std::nullopt;
  return features.dot(theta_);
}

void LinUcb::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, name(), 1);
  w.Put("a_inv", a_inv_);
  w.Put("b", b_);
  w.Put("theta", theta_);
  w.PutInt("updates", updates_);
}

absl::Status LinUcb::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect(name(), 1); !s.ok()) return s;
  const int d = dimension();
  Matrix a_inv;
  Vector b, theta;
  int64_t updates;
  if (auto s = r.Get("a_inv", &a_inv, d, d); !s.ok()) return s;
  if (auto s = r.Get("b", &b, d); !s.ok()) return s;
  if (auto s = r.Get("theta", &theta, d); !s.ok()) return s;
  if (auto s = r.GetInt("updates", &updates); !s.ok()) return s;
  if (!a_inv.allFinite() || !b.allFinite() || !theta.allFinite())
    return absl::InvalidArgumentError("linucb state has non-finite values, expected finite");
  a_inv_ = std::move(a_inv);
  b_ = std::move(b);
  theta_ = std::move(theta);
  updates_ = updates;
  return absl::OkStatus();
}

int64_t LinUcb::StateBytes() const {
  return (a_inv_.size() + b_.size() + theta_.size()) * static_cast<int64_t>(sizeof(double)) +
         sizeof(updates_);
}

std::vector<std::pair<std::string, double>> LinUcb::Summary() const {
  return {{"updates", static_cast<double>(updates_)}, {"theta_norm", theta_.norm()}};
}

}  // namespace bandit
