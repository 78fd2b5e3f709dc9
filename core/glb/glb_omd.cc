#include "core/glb/glb_omd.h"

#include <cmath>
#include <optional>

#include "core/common/fd_sketch.h"
#include "core/glb/glb_omd_diagonal.h"
#include "core/glb/glb_omd_sketched.h"
#include "core/glb/projection.h"
#include "core/state_io.h"

namespace bandit::glb {

double GlbOmdTheoryLambda(const GlbParams& p) {
  const double eta = p.eta();
  return std::max(14.0 * p.d * eta * p.R * p.R,
                  6.0 * eta * p.R * p.S * p.link.LMu(p.S) / p.link.g());
}

absl::StatusOr<std::unique_ptr<Policy>> GlbOmd::Make(const bandit::v1::PolicyConfig& config,
                                                     uint64_t seed) {
  const auto& c = config.glb_omd();
  const bool diagonal = c.covariance() == bandit::v1::COVARIANCE_DIAGONAL;
  const bool sketched = c.covariance() == bandit::v1::COVARIANCE_SKETCHED;
  if (!diagonal && !sketched && c.covariance() != bandit::v1::COVARIANCE_FULL)
    return absl::InvalidArgumentError(
        absl::StrCat("glb_omd.covariance is ", c.covariance(),
                     ", expected COVARIANCE_FULL, COVARIANCE_DIAGONAL or COVARIANCE_SKETCHED"));
  auto p = ParseParams("glb_omd", c,
                       diagonal   ? GlbOmdDiagonal::kMaxDimension
                       : sketched ? GlbOmdSketched::kMaxDimension
                                  : kMaxDimension);
  if (!p.ok()) return p.status();
  const auto sketch_size = FdSketch::SizeFromConfig(
      "glb_omd.sketch_size", sketched,
      c.has_sketch_size() ? std::optional<int>(c.sketch_size()) : std::nullopt);
  if (!sketch_size.ok()) return sketch_size.status();
  if (c.theory_lambda()) {
    if (c.has_lambda())
      return absl::InvalidArgumentError(
          "glb_omd.lambda and glb_omd.theory_lambda are both set, expected at most one");
    p->lambda = GlbOmdTheoryLambda(*p);
    if (!(p->lambda > 0))  // Gaussian link (R = 0) gives 0
      return absl::InvalidArgumentError(absl::StrCat(
          "glb_omd.theory_lambda gives lambda = ", p->lambda, ", expected > 0 (set lambda)"));
  }
  if (diagonal) return std::unique_ptr<Policy>(new GlbOmdDiagonal(*p));
  if (sketched) return std::unique_ptr<Policy>(new GlbOmdSketched(*p, *sketch_size));
  return std::unique_ptr<Policy>(new GlbOmd(*p));
}

GlbOmd::GlbOmd(const GlbParams& p) : p_(p) {
  theta_ = Vector::Zero(p.d);                  // theta_1 in Theta
  h_ = p.lambda * Matrix::Identity(p.d, p.d);  // H_1 = lambda I
  h_inv_ = (1.0 / p.lambda) * Matrix::Identity(p.d, p.d);
}

double GlbOmd::Beta() const { return p_.radius_multiplier * GlbOmdBeta(p_, p_.lambda, t_ + 1); }

absl::StatusOr<Decision> GlbOmd::Select(const SelectContext& ctx) {
  if (auto s = CheckCandidates(ctx.candidates, p_.d, p_.max_feature_norm); !s.ok()) return s;
  const double beta = Beta();
  Vector ucb, logit;
  const int arm = ArgmaxUcb(ctx.candidates, theta_, h_inv_, beta, &ucb, &logit);  // eq. (6)
  return UcbDecision(p_.link, arm, ucb, logit, beta, ctx.want_scores);
}

absl::Status GlbOmd::Update(const Observation& obs) {
  if (auto s = CheckFeatures(obs.features, p_.d, p_.max_feature_norm); !s.ok()) return s;
  if (auto s = p_.link.CheckReward("reward", obs.reward); !s.ok()) return s;
  const Vector& x = obs.features;
  const double eta = p_.eta();
  const double z = x.dot(theta_);
  const double grad = p_.link.LossGrad(z, obs.reward);  // grad l_t(theta_t) = grad * x
  const double c = eta * p_.link.LossHess(z);           // eta * mu'(x'theta_t) / g
  // (28a) with H~_t^{-1} by Sherman-Morrison (Appendix A.3), applied to the gradient rather
  // than formed: with u = H_t^{-1} x, H~_t^{-1} x = u - c u (x'u) / (1 + c x'u) = u / (1 + c x'u).
  // The same u serves line 5's Sherman-Morrison update of H_t^{-1} below.
  const Vector u = h_inv_ * x;
  const double xu = x.dot(u);
  Vector next = theta_ - (eta * grad / (1.0 + c * xu)) * u;  // zeta_{t+1}
  // (28b): exact H~_t-norm projection onto ||theta|| <= S (eigendecomposition only if needed).
  if (next.norm() > p_.S) {
    Matrix ht = h_;
    ht.noalias() += c * x * x.transpose();
    next = ProjectOntoBall(ht, next, p_.S).theta;
  }
  // Line 5: H_{t+1} = H_t + grad^2 l_t(theta_{t+1}), and H_{t+1}^{-1} by Sherman-Morrison
  // (ShermanMorrisonAdd's arithmetic, with the u computed above).
  const double c2 = p_.link.LossHess(x.dot(next));
  h_.noalias() += c2 * x * x.transpose();
  if (c2 != 0) h_inv_.noalias() -= (c2 / (1.0 + c2 * xu)) * u * u.transpose();
  theta_ = std::move(next);
  ++t_;
  return absl::OkStatus();
}

void GlbOmd::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, name(), 1);
  SaveOmdState(w, theta_, h_, h_inv_, t_);
}

absl::Status GlbOmd::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect(name(), 1); !s.ok()) return s;
  return RestoreOmdState(r, p_.d, &theta_, &h_, &h_inv_, &t_);
}

int64_t GlbOmd::StateBytes() const {
  return (theta_.size() + h_.size() + h_inv_.size()) * sizeof(double) + sizeof(t_);
}

std::vector<std::pair<std::string, double>> GlbOmd::Summary() const {
  return {{"rounds", static_cast<double>(t_)},
          {"beta", Beta()},
          {"lambda", p_.lambda},
          {"theta_norm", theta_.norm()}};
}

}  // namespace bandit::glb
