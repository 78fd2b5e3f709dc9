#include "core/sim/gp_env.h"

#include "absl/strings/str_cat.h"

namespace bandit::sim {

absl::StatusOr<GpEnv> GpEnv::Make(int arms, int dim, const Kernel& kernel, double noise,
                                  uint64_t seed) {
  if (arms < 1 || arms > 20000)
    return absl::InvalidArgumentError(absl::StrCat("arms is ", arms, ", expected 1..20000"));
  if (dim < 1 || dim > 1000)
    return absl::InvalidArgumentError(absl::StrCat("d is ", dim, ", expected 1..1000"));
  if (!(noise >= 0))
    return absl::InvalidArgumentError(absl::StrCat("noise is ", noise, ", expected >= 0"));
  Rng rng(seed);
  GpEnv env;
  env.noise_ = noise;
  env.X_.resize(dim, arms);
  for (int j = 0; j < arms; ++j)
    for (int i = 0; i < dim; ++i) env.X_(i, j) = rng.Uniform();
  Matrix K = kernel.Cross(env.X_, env.X_);
  K.diagonal().array() += 1e-8;
  Eigen::LLT<Matrix> llt(K);
  if (llt.info() != Eigen::Success)
    return absl::InternalError("Cholesky of the GP prior covariance failed");
  Vector g(arms);
  for (int j = 0; j < arms; ++j) g[j] = rng.Normal();
  env.f_ = llt.matrixL() * g;
  env.best_ = env.f_.maxCoeff();
  return env;
}

void GpEnv::FillArms(bandit::v1::PolicyConfig* config) const {
  config->clear_arms();
  for (int j = 0; j < arms(); ++j) {
    auto* a = config->add_arms();
    a->set_id(std::to_string(j));
    for (int i = 0; i < X_.rows(); ++i) a->add_features(X_(i, j));
  }
}

}  // namespace bandit::sim
