// LinUCB with one shared parameter vector over candidate feature vectors (Li, Chu, Langford,
// Schapire 2010, Algorithm 1 with a single shared theta; equivalently OFUL's ridge-regression UCB):
//   A = lambda I + sum_s x_s x_s',  b = sum_s r_s x_s,  theta = A^{-1} b,
//   score(x) = x'theta + alpha * sqrt(x' A^{-1} x)                         (Alg. 1, line 9)
// A^{-1} is maintained with the Sherman-Morrison rank-1 update, O(d^2) per update and per
// candidate. Deterministic: the lowest-index maximiser is chosen, propensity 1.
#pragma once

#include <memory>

#include "core/dimension_limits.h"
#include "core/policy.h"

namespace bandit {

class LinUcb final : public Policy {
 public:
  static absl::StatusOr<std::unique_ptr<Policy>> Make(const bandit::v1::PolicyConfig& config,
                                                      uint64_t seed);

  absl::string_view name() const override { return "linucb"; }
  ContextKind context_kind() const override { return ContextKind::kCandidates; }
  absl::StatusOr<Decision> Select(const SelectContext& ctx) override;
  // Select changes nothing (the instance counts rounds): journaled by outcome, not request.
  bool SelectReadsOnly() const override { return true; }
  absl::Status Update(const Observation& obs) override;
  std::optional<double> EstimatedMean(const Vector& features) const;
  void Save(bandit::v1::PolicyState* out) const override;
  absl::Status Restore(const bandit::v1::PolicyState& state) override;
  int64_t StateBytes() const override;
  std::vector<std::pair<std::string, double>> Summary() const override;
  Vector Weights() const override { return theta_; }

  int dimension() const { return static_cast<int>(theta_.size()); }
  const Matrix& a_inverse() const { return a_inv_; }
  const Vector& theta() const { return theta_; }
  const Vector& b() const { return b_; }

  static constexpr int kMaxDimension = kMaxDenseDimension;

 private:
  LinUcb(int dim, double lambda, double alpha);

  double alpha_;
  Matrix a_inv_;  // A^{-1}, d x d
  Vector b_;      // sum r x
  Vector theta_;  // A^{-1} b
  int64_t updates_ = 0;
};

inline absl::StatusOr<std::unique_ptr<Policy>> MakeLinUcb(const bandit::v1::PolicyConfig& config,
                                                          uint64_t seed) {
  return LinUcb::Make(config, seed);
}

}  // namespace bandit
