#include "core/mixture/rke_objective.h"

#include <algorithm>

namespace bandit::mixture {

Matrix RkeObjective::Gram(const MixtureStats& stats) {
  const int m = stats.arms();
  Matrix k(m, m);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j <= i; ++j)
      k(i, j) = k(j, i) = stats.second(i).cwiseProduct(stats.second(j)).sum();  // <S_i, S_j>
  return k;
}

std::unique_ptr<BoundLoss> RkeObjective::Bind(const MixtureStats& stats) const {
  return std::make_unique<QuadraticLoss>(Gram(stats), Vector::Zero(stats.arms()), 0.0);
}

double RkeObjective::DefaultStepSize(const MixtureStats& stats) const {
  const double kmax = Gram(stats).cwiseAbs().maxCoeff();
  return 1.0 / (2.0 * std::max(kmax, 1e-12));
}

}  // namespace bandit::mixture
