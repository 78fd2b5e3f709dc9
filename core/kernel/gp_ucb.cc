#include "core/kernel/gp_ucb.h"

#include <cmath>

#include "core/kernel/candidate_gp_ucb.h"

namespace bandit {

namespace {
constexpr Eigen::Index kGpArmBlock = 2048;  // arms scored per block (bounds temporary memory)
}

void ExactGpPosterior(const Kernel& kernel, const Matrix& X, const Vector& kdiag,
                      const Vector& counts, const Vector& sums, double lambda, Vector* mean,
                      Vector* var) {
  const Eigen::Index A = X.cols();
  std::vector<Eigen::Index> pulled;
  for (Eigen::Index i = 0; i < A; ++i)
    if (counts[i] > 0) pulled.push_back(i);
  const Eigen::Index p = static_cast<Eigen::Index>(pulled.size());
  mean->setZero(A);
  if (p == 0) {
    *var = kdiag / lambda;  // prior: k(x,x) / lambda
    return;
  }
  Matrix Xp(X.rows(), p);
  Vector sq(p), c(p);
  for (Eigen::Index j = 0; j < p; ++j) {
    Xp.col(j) = X.col(pulled[j]);
    sq[j] = std::sqrt(counts[pulled[j]]);
    c[j] = sums[pulled[j]] / sq[j];
  }
  Matrix G = sq.asDiagonal() * kernel.Cross(Xp, Xp) * sq.asDiagonal();
  G.diagonal().array() += lambda;
  Eigen::LLT<Matrix> llt(G);
  const Vector w = llt.solve(c);
  var->resize(A);
  for (Eigen::Index b0 = 0; b0 < A; b0 += kGpArmBlock) {
    const Eigen::Index nb = std::min(kGpArmBlock, A - b0);
    Matrix Y = sq.asDiagonal() * kernel.Cross(Xp, X.middleCols(b0, nb));  // D k_P(x)
    mean->segment(b0, nb).noalias() = Y.transpose() * w;
    llt.matrixL().solveInPlace(Y);
    var->segment(b0, nb) =
        ((kdiag.segment(b0, nb) - Y.colwise().squaredNorm().transpose()) / lambda).cwiseMax(0.0);
  }
}

absl::StatusOr<std::unique_ptr<Policy>> GpUcb::Make(const bandit::v1::PolicyConfig& config,
                                                    uint64_t seed) {
  const auto& c = config.gp_ucb();
  KernelUcbParams params;
  if (auto s =
          ReadKernelUcbParams("gp_ucb", c.kernel(), c.has_lambda(), c.lambda(), c.has_noise(),
                              c.noise(), c.has_f_bound(), c.f_bound(), c.has_delta(), c.delta(),
                              c.has_radius_multiplier(), c.radius_multiplier(), &params);
      !s.ok())
    return s;
  params.epsilon = 0.0;
  if (c.has_dimension()) return CandidateGpUcb::Make(config, params, seed);
  if (c.has_max_pulls())
    return absl::InvalidArgumentError(
        "gp_ucb.max_pulls applies to the candidates form, expected gp_ucb.dimension with it");
  auto arms = ArmSet::FromConfig(config, ArmFeatures::kRequired);
  if (!arms.ok()) return arms.status();
  return std::unique_ptr<Policy>(new GpUcb(*std::move(arms), params, seed));
}

void GpUcb::ComputePosterior(Vector* mean, Vector* var) const {
  ExactGpPosterior(params_.kernel, arms_.features(), kdiag_, counts_, sums_, params_.lambda, mean,
                   var);
}

}  // namespace bandit
