// Synthetic "generators" for the mixture experiments (Dibaei Nia & Farnia Sec. 6 /
// App. E.1 analogue): a reference distribution that is an equal-weight mixture of K isotropic
// Gaussian modes in R^d, and m generators that each cover one or two of those modes with their
// own spread and a small mean offset, so that a mixture of generators beats every single one.
//   modes: K = max(m, 2); centre c_k = R e_k (k < d; otherwise a random direction of length R);
//          reference = (1/K) sum_k N(c_k, s^2 I).
//   arm i (even i): 0.6 N(c_i + o_i, (s f_i)^2 I) + 0.4 N(c_{i+1} + o_i, (s f_i)^2 I)
//   arm i (odd i):  N(c_i + o_i, (s f_i)^2 I),
//   f_i cycles through {1.0, 0.8, 1.2, 0.9}; o_i a random offset of length 0.3 s.
// With m = 4 the population-FD-optimal mixture is near (0.42, 0.08, 0.42, 0.08).
#pragma once

#include <vector>

#include <Eigen/Dense>

#include "absl/status/statusor.h"
#include "core/rng.h"

namespace bandit::sim {

struct GeneratorsEnvConfig {
  int arms = 4;
  int d = 16;
  double mode_radius = 5.0;  // R
  double mode_sd = 0.5;      // s
  uint64_t env_seed = 1;     // offsets and (if K > d) directions
};

class GeneratorsEnv {
 public:
  static absl::StatusOr<GeneratorsEnv> Make(const GeneratorsEnvConfig& config);

  int arms() const { return static_cast<int>(arms_.size()); }
  int dim() const { return d_; }
  int modes() const { return static_cast<int>(ref_.size()); }
  Eigen::VectorXd Sample(int arm, Rng& rng) const { return Draw(arms_[arm], rng); }
  Eigen::VectorXd SampleReference(Rng& rng) const { return Draw(ref_, rng); }
  // Exact population moments.
  Eigen::VectorXd ArmMean(int arm) const { return Mean(arms_[arm]); }
  Eigen::MatrixXd ArmSecondMoment(int arm) const { return Second(arms_[arm]); }
  Eigen::VectorXd ReferenceMean() const { return Mean(ref_); }
  Eigen::MatrixXd ReferenceCovariance() const;
  // Mode weights each arm puts on mode k (arms x modes).
  Eigen::MatrixXd Coverage() const;

 private:
  struct Component {
    double weight;
    int mode;
    Eigen::VectorXd mean;
    double sd;
  };
  using Mixture = std::vector<Component>;
  Eigen::VectorXd Draw(const Mixture& mix, Rng& rng) const;
  Eigen::VectorXd Mean(const Mixture& mix) const;
  Eigen::MatrixXd Second(const Mixture& mix) const;

  int d_ = 0;
  std::vector<Mixture> arms_;
  Mixture ref_;
};

}  // namespace bandit::sim
