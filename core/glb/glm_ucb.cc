#include "core/glb/glm_ucb.h"

#include <cmath>

#include "core/state_io.h"

namespace bandit::glb {

absl::StatusOr<std::unique_ptr<Policy>> GlmUcb::Make(const bandit::v1::PolicyConfig& config,
                                                     uint64_t seed) {
  const auto& c = config.glm_ucb();
  auto p = ParseParams("glm_ucb", c);
  if (!p.ok()) return p.status();
  const int64_t window = c.has_window() ? c.window() : 0;
  if (window < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("glm_ucb.window is ", window, ", expected 0 (all history) or a number > 0"));
  auto bonus = c.bonus();
  if (bonus == bandit::v1::GlmUcbConfig::BONUS_UNSPECIFIED)
    bonus = bandit::v1::GlmUcbConfig::LOCAL_HESSIAN;
  if (bonus != bandit::v1::GlmUcbConfig::LOCAL_HESSIAN &&
      bonus != bandit::v1::GlmUcbConfig::DESIGN_MATRIX)
    return absl::InvalidArgumentError(absl::StrCat(
        "glm_ucb.bonus is ", static_cast<int>(bonus), ", expected LOCAL_HESSIAN or DESIGN_MATRIX"));
  return std::unique_ptr<Policy>(new GlmUcb(*p, window, bonus));
}

GlmUcb::GlmUcb(const GlbParams& p, int64_t window, bandit::v1::GlmUcbConfig::Bonus bonus)
    : p_(p), bonus_(bonus), data_(p.d, window) {
  theta_ = Vector::Zero(p.d);
  w_inv_ = (1.0 / LambdaT()) * Matrix::Identity(p.d, p.d);
}

double GlmUcb::LambdaT() const {
  return p_.lambda * std::log(2.0 + static_cast<double>(data_.size()));  // lambda log(1 + t)
}

double GlmUcb::Radius() const {
  const int64_t t = data_.size() + 1;
  if (bonus_ == bandit::v1::GlmUcbConfig::LOCAL_HESSIAN)
    return p_.radius_multiplier * GlbOmdBeta(p_, LambdaT(), t);
  const double sigma = p_.link.NoiseScale(p_.S), c_mu = p_.link.CMu(p_.S);
  return p_.radius_multiplier * sigma / c_mu *
         std::sqrt(0.5 * p_.d * std::log(1 + 2.0 * static_cast<double>(t) / p_.d) +
                   std::log(1 / p_.delta));
}

void GlmUcb::Refit() {
  const double lambda = LambdaT();
  MleFit fit = FitGlmMle(p_.link, data_, lambda, theta_, p_.S);
  theta_ = std::move(fit.theta);
  Matrix w;
  if (bonus_ == bandit::v1::GlmUcbConfig::LOCAL_HESSIAN) {
    w = std::move(fit.hessian);
  } else {
    const auto X = data_.X();
    w.noalias() = X * X.transpose();
    w.diagonal().array() += lambda;
  }
  w_inv_ = w.llt().solve(Matrix::Identity(p_.d, p_.d));
}

absl::StatusOr<Decision> GlmUcb::Select(const SelectContext& ctx) {
  if (auto s = CheckCandidates(ctx.candidates, p_.d, p_.max_feature_norm); !s.ok()) return s;
  const double beta = Radius();
  Vector ucb, logit;
  const int arm = ArgmaxUcb(ctx.candidates, theta_, w_inv_, beta, &ucb, &logit);
  return UcbDecision(p_.link, arm, ucb, logit, beta, ctx.want_scores);
}

absl::Status GlmUcb::Update(const Observation& obs) {
  if (auto s = CheckFeatures(obs.features, p_.d, p_.max_feature_norm); !s.ok()) return s;
  if (auto s = p_.link.CheckReward("reward", obs.reward); !s.ok()) return s;
  data_.Add(obs.features, obs.reward);
  Refit();
  ++t_;
  return absl::OkStatus();
}

std::optional<double> GlmUcb::EstimatedMean(const Vector& features) const {
  if (features.size() != p_.d || !features.allFinite()) return std::nullopt;
  return p_.link.Mu(features.dot(theta_));
}

void GlmUcb::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, name(), 1);
  data_.Save(w);
  w.Put("theta", theta_);
  w.Put("w_inv", w_inv_);
  w.PutInt("t", t_);
}

absl::Status GlmUcb::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect(name(), 1); !s.ok()) return s;
  GlmHistory data = data_;
  Vector theta;
  Matrix w_inv;
  int64_t t;
  if (auto s = data.Restore(r); !s.ok()) return s;
  if (auto s = r.Get("theta", &theta, p_.d); !s.ok()) return s;
  if (auto s = r.Get("w_inv", &w_inv, p_.d, p_.d); !s.ok()) return s;
  if (auto s = r.GetInt("t", &t); !s.ok()) return s;
  if (!theta.allFinite() || !w_inv.allFinite())
    return absl::InvalidArgumentError("state theta/w_inv has non-finite values, expected finite");
  data_ = std::move(data);
  theta_ = std::move(theta);
  w_inv_ = std::move(w_inv);
  t_ = t;
  return absl::OkStatus();
}

int64_t GlmUcb::StateBytes() const {
  return data_.Bytes() + (theta_.size() + w_inv_.size()) * sizeof(double) + sizeof(t_);
}

std::vector<std::pair<std::string, double>> GlmUcb::Summary() const {
  return {{"rounds", static_cast<double>(t_)},
          {"stored_rounds", static_cast<double>(data_.size())},
          {"radius", Radius()},
          {"theta_norm", theta_.norm()}};
}

}  // namespace bandit::glb
