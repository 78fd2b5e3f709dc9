#include "core/sim/glb_env.h"

#include <cmath>
#include <numbers>

#include "absl/strings/str_cat.h"

namespace bandit::sim {

absl::StatusOr<GlbEnvKind> ParseGlbEnv(absl::string_view name) {
  if (name == "logistic") return GlbEnvKind::kLogistic;
  if (name == "poisson") return GlbEnvKind::kPoisson;
  if (name == "gaussian") return GlbEnvKind::kGaussian;
  if (name == "drift") return GlbEnvKind::kDrift;
  if (name == "piecewise") return GlbEnvKind::kPiecewise;
  return absl::InvalidArgumentError(absl::StrCat(
      "env '", name, "' is not a GLB env, expected logistic|poisson|gaussian|drift|piecewise"));
}

namespace {

Eigen::VectorXd UnitGaussian(Rng& rng, int d) {
  Eigen::VectorXd x(d);
  for (int i = 0; i < d; ++i) x[i] = rng.Normal();
  return x / x.norm();
}

}  // namespace

GlbEnv::GlbEnv(const GlbEnvConfig& config, uint64_t seed)
    : c_(config),
      arm_rng_(seed * 0x9E3779B97F4A7C15ULL + 1),
      noise_rng_(seed * 0xD1B54A32D192ED03ULL + 7) {
  switch (c_.kind) {
    case GlbEnvKind::kPoisson:
      link_ = glb::GlmLink(glb::LinkKind::kPoisson, 1.0);
      break;
    case GlbEnvKind::kGaussian:
      link_ = glb::GlmLink(glb::LinkKind::kGaussian, c_.dispersion);
      break;
    default:
      link_ = glb::GlmLink(glb::LinkKind::kLogistic, 1.0);
  }
  // theta* (and the drift circle) from a third stream, fixed by the seed.
  Rng theta_rng(seed * 0x94D049BB133111EBULL + 3);
  u_ = UnitGaussian(theta_rng, c_.d);
  theta0_ = c_.S * u_;
  if (c_.d >= 2) {  // v orthonormal to u (Gram-Schmidt on a fresh Gaussian)
    Eigen::VectorXd w(c_.d);
    do {
      for (int i = 0; i < c_.d; ++i) w[i] = theta_rng.Normal();
      w -= w.dot(u_) * u_;
    } while (w.norm() < 1e-8);
    v_ = w / w.norm();
  } else {
    v_ = u_;
  }
  theta_t_ = theta0_;
}

Eigen::VectorXd GlbEnv::ThetaAt(int64_t t) const {
  switch (c_.kind) {
    case GlbEnvKind::kDrift: {
      const double a = 2 * std::numbers::pi * static_cast<double>(t) / static_cast<double>(c_.T);
      return c_.S * (std::cos(a) * u_ + std::sin(a) * v_);
    }
    case GlbEnvKind::kPiecewise:
      return t < c_.T / 2 ? theta0_ : Eigen::VectorXd(-theta0_);
    default:
      return theta0_;
  }
}

const std::vector<Eigen::VectorXd>& GlbEnv::NextRound() {
  ++t_;
  theta_t_ = ThetaAt(t_);
  candidates_.resize(c_.arms);
  for (int i = 0; i < c_.arms; ++i) {
    if (c_.nnz <= 0) {
      candidates_[i] = UnitGaussian(arm_rng_, c_.d);
      continue;
    }
    Eigen::VectorXd x = Eigen::VectorXd::Zero(c_.d);
    for (int k = 0; k < c_.nnz; ++k) x[arm_rng_.UniformInt(c_.d)] += arm_rng_.Normal();
    const double n = x.norm();
    candidates_[i] = n > 0 ? Eigen::VectorXd(x / n) : x;
  }
  return candidates_;
}

double GlbEnv::Poisson(Rng& rng, double mean) {
  // Count unit-rate exponential arrivals before `mean` (exact, O(mean) draws).
  double acc = 0;
  int64_t k = 0;
  while (true) {
    acc += -std::log(rng.UniformOpen());
    if (acc > mean) return static_cast<double>(k);
    ++k;
  }
}

double GlbEnv::Reward(int arm) {
  const double z = candidates_[arm].dot(theta_t_);
  switch (link_.kind()) {
    case glb::LinkKind::kLogistic:
      return noise_rng_.Bernoulli(link_.Mu(z)) ? 1.0 : 0.0;
    case glb::LinkKind::kPoisson:
      return Poisson(noise_rng_, link_.Mu(z));
    case glb::LinkKind::kGaussian:
      return z + std::sqrt(c_.dispersion) * noise_rng_.Normal();
  }
  return 0;
}

int GlbEnv::BestArm() const {
  int best = 0;
  double bz = -INFINITY;
  for (int i = 0; i < static_cast<int>(candidates_.size()); ++i) {
    const double z = candidates_[i].dot(theta_t_);
    if (z > bz) bz = z, best = i;
  }
  return best;
}

double GlbEnv::Regret(int arm) const {
  return link_.Mu(candidates_[BestArm()].dot(theta_t_)) - link_.Mu(candidates_[arm].dot(theta_t_));
}

double GlbEnv::PathLength() const {
  double p = 0;
  for (int64_t t = 0; t + 1 < c_.T; ++t) p += (ThetaAt(t + 1) - ThetaAt(t)).norm();
  return p;
}

int64_t GlbEnv::NumChanges() const {
  int64_t n = 0;
  for (int64_t t = 0; t + 1 < c_.T; ++t) n += (ThetaAt(t + 1) != ThetaAt(t));
  return n;
}

}  // namespace bandit::sim
