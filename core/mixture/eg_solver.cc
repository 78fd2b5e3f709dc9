#include "core/mixture/eg_solver.h"

#include <cmath>

namespace bandit::mixture {

Vector Normalize(const Vector& a) {
  const double s = a.sum();
  if (s > 0) return a / s;
  return Vector::Constant(a.size(), 1.0 / static_cast<double>(a.size()));
}

EgResult ExponentiatedGradient(const BoundLoss& loss, const Vector& alpha0, int steps, double eta,
                               double floor, bool final_value) {
  EgResult r;
  r.alpha = alpha0;
  const int m = static_cast<int>(alpha0.size());
  Vector g(m), next(m);
  for (int s = 0; s < steps; ++s) {
    r.value = loss.Eval(r.alpha, &g);
    // Shift by the smallest gradient over the support: exp() stays <= 1, normalization undoes it.
    double gmin = 0;
    bool first = true;
    for (int i = 0; i < m; ++i)
      if (r.alpha[i] > 0 && (first || g[i] < gmin)) gmin = g[i], first = false;
    for (int i = 0; i < m; ++i)
      next[i] = r.alpha[i] > 0 ? r.alpha[i] * std::exp(-eta * (g[i] - gmin)) : 0.0;  // eq. (13)
    next /= next.sum();
    if (floor > 0) {
      bool changed = false;
      for (int i = 0; i < m; ++i)
        if (next[i] > 0 && next[i] < floor) next[i] = floor, changed = true;
      if (changed) next /= next.sum();
    }
    r.alpha = next;
    ++r.steps;
  }
  if (final_value || steps == 0) r.value = loss.Value(r.alpha);
  return r;
}

}  // namespace bandit::mixture
