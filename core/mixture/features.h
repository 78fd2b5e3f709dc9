// Feature maps phi of the mixture objectives. FD works on the raw embedding (identity); the
// kernel objectives (Vendi, RKE, KD) use a normalized kernel, k(x, x) = 1 (paper Sec. 3.2,
// Assumptions 1 and 9): either the cosine kernel phi(x) = x / ||x|| (D = d) or Gaussian random
// Fourier features z(x) (core/common/random_features.h) normalized to unit norm, i.e. the
// normalized kernel k~(x, y) = z(x)'z(y) / (||z(x)|| ||z(y)||).
#pragma once

#include <cstdint>

#include <Eigen/Dense>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/common/random_features.h"
#include "core/rng.h"
#include "core/state_io.h"

namespace bandit::mixture {

enum class FeatureKind { kIdentity, kCosine, kRandomFourier };

class FeatureMap {
 public:
  static FeatureMap Identity(int64_t d);
  static FeatureMap Cosine(int64_t d);
  static absl::StatusOr<FeatureMap> RandomFourier(int64_t d, int64_t D, double bandwidth, Rng& rng);
  FeatureMap() = default;

  FeatureKind kind() const { return kind_; }
  int64_t input_dim() const { return d_; }
  int64_t dim() const { return D_; }
  // Validation of an input for this map (dimension and finiteness are checked by the caller):
  // the cosine kernel needs a nonzero embedding.
  absl::Status Check(absl::string_view field, const Eigen::VectorXd& x) const;
  void Map(const Eigen::VectorXd& x, Eigen::VectorXd* phi) const;

  void Save(StateWriter& w) const;
  absl::Status Restore(const StateReader& r);
  int64_t Bytes() const { return rff_.Bytes(); }

 private:
  FeatureKind kind_ = FeatureKind::kIdentity;
  int64_t d_ = 0, D_ = 0;
  RandomFeatures rff_;
};

}  // namespace bandit::mixture
