#include "core/mixture/oracle.h"

#include "core/mixture/eg_solver.h"

namespace bandit::mixture {

OracleSolution OracleWeights(const Objective& objective, const MixtureStats& stats,
                             const Vector& linear, int steps, double eta) {
  const int m = stats.arms();
  std::unique_ptr<BoundLoss> loss = objective.Bind(stats);
  if (linear.size() == m) loss = std::make_unique<LinearPlus>(std::move(loss), linear);
  if (eta <= 0) eta = objective.DefaultStepSize(stats);
  const EgResult r =
      ExponentiatedGradient(*loss, Vector::Constant(m, 1.0 / m), steps, eta, 0.0, true);
  OracleSolution s;
  s.alpha = r.alpha;
  s.loss = r.value;
  s.score = objective.Score(objective.Bind(stats)->Value(r.alpha));
  return s;
}

}  // namespace bandit::mixture
