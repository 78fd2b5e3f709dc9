// Exponentiated-gradient descent on the simplex (eq. 13, Algorithm 1 lines 5-10):
//   a~_i = a_i exp(-eta g_i),  a = a~ / ||a~||_1.
// Arms with a_i = 0 at the start stay at 0 (used to restrict the support to arms with samples).
// After each step the positive entries are floored at `floor` and renormalized (a numerical guard
// so that an underflowing weight can recover; floor = 0 is the paper's exact iteration).
#pragma once

#include "core/mixture/objective.h"

namespace bandit::mixture {

struct EgResult {
  Vector alpha;
  double value = 0;  // loss at the returned alpha (evaluated once more only if requested)
  int steps = 0;
};

// S steps from alpha0 (on the simplex). Returns alpha^(S). When `final_value` is true, also
// evaluates the loss at alpha^(S).
EgResult ExponentiatedGradient(const BoundLoss& loss, const Vector& alpha0, int steps, double eta,
                               double floor = 0.0, bool final_value = false);

// Projects a nonnegative vector onto the simplex by normalization (uniform over `support` if the
// sum is 0).
Vector Normalize(const Vector& a);

}  // namespace bandit::mixture
