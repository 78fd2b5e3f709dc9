#include "core/sim/generators_env.h"

#include "absl/strings/str_cat.h"

namespace bandit::sim {

absl::StatusOr<GeneratorsEnv> GeneratorsEnv::Make(const GeneratorsEnvConfig& c) {
  if (c.arms < 1 || c.arms > 1000)
    return absl::InvalidArgumentError(absl::StrCat("arms is ", c.arms, ", expected 1..1000"));
  if (c.d < 1 || c.d > 4096)
    return absl::InvalidArgumentError(absl::StrCat("d is ", c.d, ", expected 1..4096"));
  if (!(c.mode_radius > 0) || !(c.mode_sd > 0))
    return absl::InvalidArgumentError("mode_radius and mode_sd must be > 0");
  GeneratorsEnv env;
  env.d_ = c.d;
  Rng rng(c.env_seed);
  const int K = std::max(c.arms, 2);
  std::vector<Eigen::VectorXd> centres;
  for (int k = 0; k < K; ++k) {
    Eigen::VectorXd ck = Eigen::VectorXd::Zero(c.d);
    if (k < c.d) {
      ck[k] = c.mode_radius;
    } else {
      for (int j = 0; j < c.d; ++j) ck[j] = rng.Normal();
      ck *= c.mode_radius / ck.norm();
    }
    centres.push_back(ck);
    env.ref_.push_back({1.0 / K, k, ck, c.mode_sd});
  }
  const double spread[] = {1.0, 0.8, 1.2, 0.9};
  for (int i = 0; i < c.arms; ++i) {
    Eigen::VectorXd off(c.d);
    for (int j = 0; j < c.d; ++j) off[j] = rng.Normal();
    off *= 0.3 * c.mode_sd / off.norm();
    const double sd = c.mode_sd * spread[i % 4];
    Mixture arm;
    if (i % 2 == 0) {
      arm.push_back({0.6, i % K, centres[i % K] + off, sd});
      arm.push_back({0.4, (i + 1) % K, centres[(i + 1) % K] + off, sd});
    } else {
      arm.push_back({1.0, i % K, centres[i % K] + off, sd});
    }
    env.arms_.push_back(std::move(arm));
  }
  return env;
}

Eigen::VectorXd GeneratorsEnv::Draw(const Mixture& mix, Rng& rng) const {
  double u = rng.Uniform(), acc = 0;
  size_t pick = mix.size() - 1;
  for (size_t k = 0; k < mix.size(); ++k) {
    acc += mix[k].weight;
    if (u < acc) {
      pick = k;
      break;
    }
  }
  Eigen::VectorXd x(d_);
  for (int j = 0; j < d_; ++j) x[j] = mix[pick].mean[j] + mix[pick].sd * rng.Normal();
  return x;
}

Eigen::VectorXd GeneratorsEnv::Mean(const Mixture& mix) const {
  Eigen::VectorXd m = Eigen::VectorXd::Zero(d_);
  for (const auto& c : mix) m += c.weight * c.mean;
  return m;
}

Eigen::MatrixXd GeneratorsEnv::Second(const Mixture& mix) const {
  Eigen::MatrixXd s = Eigen::MatrixXd::Zero(d_, d_);
  for (const auto& c : mix) {
    s += c.weight * (c.mean * c.mean.transpose());
    s.diagonal().array() += c.weight * c.sd * c.sd;
  }
  return s;
}

Eigen::MatrixXd GeneratorsEnv::ReferenceCovariance() const {
  const Eigen::VectorXd m = Mean(ref_);
  return Second(ref_) - m * m.transpose();
}

Eigen::MatrixXd GeneratorsEnv::Coverage() const {
  Eigen::MatrixXd cov = Eigen::MatrixXd::Zero(arms(), modes());
  for (int i = 0; i < arms(); ++i)
    for (const auto& c : arms_[i]) cov(i, c.mode) += c.weight;
  return cov;
}

}  // namespace bandit::sim
