// Environments of the GLB papers' experiments (GLB-OMD Section 5; DOMD-GLB Section 5).
// Each round: `arms` vectors drawn i.i.d. standard Gaussian and normalized to unit norm;
// theta* uniform on the sphere of radius S. Rewards:
//   logistic   Bernoulli(sigmoid(x'theta*))
//   poisson    Poisson(exp(x'theta*))
//   gaussian   x'theta* + N(0, dispersion)
//   drift      logistic, theta_t = S (cos(2 pi t/T) u + sin(2 pi t/T) v), u, v orthonormal:
//              one full turn of the circle of radius S over T rounds (path length <= 2 pi S)
//   piecewise  logistic, theta_t = theta* for t < T/2 and -theta* from T/2 on (one change)
// With nnz > 0 each arm is instead sparse, like a hashed feature vector: nnz standard Gaussian
// values at indices drawn uniformly with replacement (colliding ones add up), normalized.
// Arms come from their own engine, so for one seed every algorithm sees the same candidate sets;
// reward noise has a second engine. Regret is the pseudo-regret mu(max x'theta_t) - mu(x_t'theta_t).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/glb/link.h"
#include "core/rng.h"

namespace bandit::sim {

enum class GlbEnvKind { kLogistic, kPoisson, kGaussian, kDrift, kPiecewise };

absl::StatusOr<GlbEnvKind> ParseGlbEnv(absl::string_view name);

struct GlbEnvConfig {
  GlbEnvKind kind = GlbEnvKind::kLogistic;
  int d = 5;
  int arms = 30;
  double S = 3.0;
  int64_t T = 3000;
  double dispersion = 1.0;  // gaussian only
  int nnz = 0;              // > 0: sparse arms with this many terms
};

class GlbEnv {
 public:
  GlbEnv(const GlbEnvConfig& config, uint64_t seed);

  const glb::GlmLink& link() const { return link_; }
  // Draws the candidate set of round t (0-based) and sets the current theta_t.
  const std::vector<Eigen::VectorXd>& NextRound();
  int64_t round() const { return t_; }
  const Eigen::VectorXd& theta() const { return theta_t_; }
  // Draws the reward of candidate `arm` of the current round.
  double Reward(int arm);
  // Pseudo-regret of choosing `arm` in the current round.
  double Regret(int arm) const;
  int BestArm() const;
  // Path length P_T and number of changes Gamma_T of the parameter sequence over T rounds.
  double PathLength() const;
  int64_t NumChanges() const;

  static double Poisson(Rng& rng, double mean);

 private:
  Eigen::VectorXd ThetaAt(int64_t t) const;

  GlbEnvConfig c_;
  glb::GlmLink link_;
  Rng arm_rng_, noise_rng_;
  Eigen::VectorXd theta0_, u_, v_, theta_t_;
  std::vector<Eigen::VectorXd> candidates_;
  int64_t t_ = -1;
};

}  // namespace bandit::sim
