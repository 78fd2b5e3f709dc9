#include "core/sim/rkhs_candidates_env.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace bandit::sim {

absl::StatusOr<RkhsCandidatesEnv> RkhsCandidatesEnv::Make(int dim, int centers,
                                                          const Kernel& kernel, double f_norm,
                                                          double noise, uint64_t seed) {
  if (dim < 1 || dim > 1000)
    return absl::InvalidArgumentError(absl::StrCat("d is ", dim, ", expected 1..1000"));
  if (centers < 1 || centers > 10000)
    return absl::InvalidArgumentError(absl::StrCat("centers is ", centers, ", expected 1..10000"));
  if (!(f_norm > 0) || !std::isfinite(f_norm))
    return absl::InvalidArgumentError(absl::StrCat("f_norm is ", f_norm, ", expected > 0"));
  if (!(noise >= 0))
    return absl::InvalidArgumentError(absl::StrCat("noise is ", noise, ", expected >= 0"));
  Rng rng(seed);
  RkhsCandidatesEnv env;
  env.kernel_ = kernel;
  env.noise_ = noise;
  env.centers_.resize(dim, centers);
  for (int j = 0; j < centers; ++j)
    for (int i = 0; i < dim; ++i) env.centers_(i, j) = rng.Uniform();
  env.a_.resize(centers);
  for (int j = 0; j < centers; ++j) env.a_[j] = rng.Normal();
  const double norm = std::sqrt(env.a_.dot(kernel.Cross(env.centers_, env.centers_) * env.a_));
  if (!(norm > 0)) return absl::InternalError("the drawn function has RKHS norm 0");
  env.a_ *= f_norm / norm;
  env.norm_ = f_norm;
  return env;
}

double RkhsCandidatesEnv::f(const Vector& x) const {
  return (kernel_.Cross(centers_, x).col(0)).dot(a_);
}

double RkhsCandidatesEnv::Draw(int n, Rng& rng, std::vector<Vector>* out) const {
  out->resize(n);
  double best = -std::numeric_limits<double>::infinity();
  for (auto& x : *out) {
    x.resize(dim());
    for (int i = 0; i < dim(); ++i) x[i] = rng.Uniform();
    best = std::max(best, f(x));
  }
  return best;
}

}  // namespace bandit::sim
