// The grid behind ArgmaxProbability (argmax_probability.h, whose header comment describes the
// method): each arm's log F as a piecewise Chebyshev series on the cells of a dyadic grid
// (Curve), built and summed over the arms in argmax_grid.cc, and the distribution functions the
// grid and the quadratures (argmax_probability.cc) share. Internal to ArgmaxProbability.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace bandit::argmax {

inline constexpr double kSqrt2 = 1.4142135623730950488;
inline constexpr double kInvSqrt2Pi = 0.39894228040143267794;

// Nodes of one Gauss-Kronrod panel of the quadratures; the grid takes a panel's nodes in
// increasing order for its cell lookups.
inline constexpr int kKronrodPoints = 31;

// z with Phi(-z) = ArgmaxProbability::kTailMass, for the Normal quantiles of the tail mass.
double NormalTailZ();
// z with Phi(-z) = ArgmaxProbability::kZoneTail: the Normal zone in standard deviations.
double NormalZoneZ();
// log B(a, b), accurate for large shapes too.
double LogBeta(double a, double b);
// log F(x) and 1 - F(x) of Beta(a, b), each accurate in its small tail (the exact evaluation,
// the anchors of the cached curves, and the fallback for arms without one).
double BetaLogCdf(double a, double b, double x);
double BetaCcdf(double a, double b, double x);
// x with 1 - F(x) = tail for Beta(a, b).
double BetaUpperQuantile(double a, double b, double tail);

inline double NormalLogCdf(double m, double s, double x) {
  const double z = (x - m) / (s * kSqrt2);
  return z > 0 ? std::log1p(-0.5 * std::erfc(z)) : std::log(0.5 * std::erfc(-z));
}

inline double Logit(double x) { return std::log(x) - std::log1p(-x); }

// log F_j as a piecewise Chebyshev series on [lo, hi]: for an arm, the cells
// first_cell .. first_cell + pieces - 1 of grid level `level` (lo = first_cell 2^-level,
// scale = 2^level); for the shared Normal curve, equal pieces of any width.
struct Curve {
  double lo = 0, hi = 0, scale = 0;  // scale = pieces / (hi - lo)
  int pieces = 0;
  int degree = 0;  // kCurveDegree (arms), lower for the shared Normal curve
  int level = 0;
  int64_t first_cell = 0;
  std::vector<double> coef;  // pieces x (degree + 1)
  double operator()(double x) const;
};

}  // namespace bandit::argmax
