#include "core/mixture/features.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace bandit::mixture {

FeatureMap FeatureMap::Identity(int64_t d) {
  FeatureMap f;
  f.kind_ = FeatureKind::kIdentity;
  f.d_ = f.D_ = d;
  return f;
}

FeatureMap FeatureMap::Cosine(int64_t d) {
  FeatureMap f = Identity(d);
  f.kind_ = FeatureKind::kCosine;
  return f;
}

absl::StatusOr<FeatureMap> FeatureMap::RandomFourier(int64_t d, int64_t D, double bandwidth,
                                                     Rng& rng) {
  auto rff = RandomFeatures::Draw(ShiftInvariantKernel::kGaussian, bandwidth, d, D, rng);
  if (!rff.ok()) return rff.status();
  FeatureMap f;
  f.kind_ = FeatureKind::kRandomFourier;
  f.d_ = d;
  f.D_ = D;
  f.rff_ = *std::move(rff);
  return f;
}

absl::Status FeatureMap::Check(absl::string_view field, const Eigen::VectorXd& x) const {
  if (kind_ == FeatureKind::kCosine && !(x.squaredNorm() > 0))
    return absl::InvalidArgumentError(
        absl::StrCat(field, " is the zero vector, expected a nonzero embedding (cosine kernel)"));
  return absl::OkStatus();
}

void FeatureMap::Map(const Eigen::VectorXd& x, Eigen::VectorXd* phi) const {
  switch (kind_) {
    case FeatureKind::kIdentity:
      *phi = x;
      return;
    case FeatureKind::kCosine:
      *phi = x / x.norm();
      return;
    case FeatureKind::kRandomFourier: {
      rff_.MapInto(x, phi);
      const double n = phi->norm();
      // ||z(x)||^2 -> 1 as D grows; normalizing makes k(x, x) = 1 exactly. A zero vector would
      // need every cos() to vanish at once; guard anyway.
      if (n > 1e-300)
        *phi /= n;
      else
        *phi = Eigen::VectorXd::Unit(D_, 0);
      return;
    }
  }
}

void FeatureMap::Save(StateWriter& w) const {
  if (kind_ == FeatureKind::kRandomFourier) rff_.Save(w, "phi_");
}

absl::Status FeatureMap::Restore(const StateReader& r) {
  if (kind_ != FeatureKind::kRandomFourier) return absl::OkStatus();
  RandomFeatures rff;
  if (auto s = rff.Restore(r, "phi_", d_, D_); !s.ok()) return s;
  rff_ = std::move(rff);
  return absl::OkStatus();
}

}  // namespace bandit::mixture
