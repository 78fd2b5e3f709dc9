// Probability that arm a holds the largest of K independent posterior draws:
//
//   P(a) = P(theta_a > theta_j for all j != a) = ∫ f_a(x) Π_{j≠a} F_j(x) dx,
//
// f_a the density and F_j the CDFs of the arms' posteriors: Beta(alpha_j, beta_j) for Bernoulli
// Thompson sampling, N(m_j, s_j^2) for Gaussian (the quantity Thompson 1933 samples from, and the
// propensity a Thompson decision is logged with).
//
// Computed deterministically by adaptive Gauss-Kronrod (15/31) quadrature on the region where the
// integrand is not negligible, which every error term below bounds:
//  * x outside [Q_a(eps), Q_a(1-eps)] (Q_a the quantile of arm a): mass <= 2 eps, since F <= 1;
//  * x below Q_j(eps) for some j != a: Π F_j(x) <= F_j(x) <= eps there;
//  * arms j with 1 - F_j(lo) <= skip at the region's lower end lo: their factor lies in
//    [F_j(lo), 1] over the whole region, so leaving them out changes the integral by at most
//    Σ (1 - F_j(lo)), kept <= kSkipTotal; these are the arms "far below the leader";
//  * the quadrature itself: the Gauss-Kronrod error estimate (QUADPACK's, from |K31 - G15|) summed
//    over panels is kept <= kQuadratureTolerance.
// Arms with identical posteriors (flat priors, small integer counts) share one factor F^n.
//
// Speed: the competitors' factors are split by width against the region [lo, hi].
//  * Wide ones (sd >= (hi - lo) / kSmoothWidths, else / (kSmoothWidths / 3)) are smooth on the
//    region: the sum of their log F_j is replaced by its Chebyshev interpolant on nested
//    Chebyshev-Lobatto points (9, 17, 33), accepted when the last three coefficients sum to
//    <= kSmoothTolerance (the integrand's relative error is then about that much). Their F_j at
//    the 33 points come preferably from integrating their densities spectrally (one exp per arm
//    and point, the logs shared) from an anchor: F_j = 0 or 1 beyond the kZoneTail bounds below,
//    else one exact CDF; each density's interpolant must have converged to kSpectralTolerance.
//    If nothing converges, they are evaluated exactly at every node.
//  * Narrow ones are near steps: outside [mu_j - t_j, mu_j + t_j], where t_j is a tail bound of
//    mass kZoneTail (Normal: the Chernoff bound exp(-z^2/2); Beta: Beta(alpha, beta) is
//    1/(4(alpha+beta+1))-sub-Gaussian, Marchal & Arbel 2017), the factor is taken as 0 or 1, an
//    error of at most kZoneTail per arm and side; inside it is evaluated exactly.
//  * The skip test above uses the same sub-Gaussian bound where it decides, the exact tail only
//    near the threshold.
//  * The Beta CDF is the continued fraction of Numerical Recipes (3rd ed., eq. 6.4.5, modified
//    Lentz) with log B(alpha, beta) once per arm, for alpha + beta <= 1000; above, or where it
//    does not converge within kMaxFractionTerms terms, Boost's ibeta.
// Total absolute error <= 3 eps + kSkipTotal + kQuadratureTolerance + 2 K kZoneTail + the
// interpolants', about 1e-5 by QUADPACK's (pessimistic) estimate; tested to 1e-6 against closed
// forms, brute-force integrals and the exact evaluation without these shortcuts (set_exact).
//
// The regularized incomplete beta function, its inverse and the Gauss-Kronrod nodes come from
// Boost.Math (header-only, Debian's libboost-dev).
#pragma once

#include <cstdint>
#include <vector>

#include "core/policy.h"

namespace bandit {

class ArgmaxProbability {
 public:
  enum class Family { kBeta, kNormal };

  static constexpr double kTailMass = 1e-9;             // eps above
  static constexpr double kSkipTotal = 1e-8;            // Σ over skipped arms
  static constexpr double kQuadratureTolerance = 1e-5;  // absolute, over the whole region
  static constexpr int kMaxDepth = 18;                  // panel halvings
  static constexpr double kSmoothWidths = 8;            // wide: sd >= region width / this
  static constexpr double kSmoothTolerance = 1e-9;      // on the interpolated Σ log F_j
  static constexpr double kZoneTail = 1e-11;            // per narrow arm and side
  static constexpr double kSpectralTolerance = 1e-10;   // on each wide F_j by integration
  static constexpr int kMaxFractionTerms = 300;

  // Exact evaluation only (no interpolant, no 0/1 zones): the slow reference the tests compare
  // the shortcuts with.
  void set_exact(bool exact) { exact_ = exact; }

  // Beta: first = alpha_j, second = beta_j (both > 0). Normal: first = mean, second = standard
  // deviation (> 0). Both vectors have one entry per arm.
  ArgmaxProbability(Family family, const Vector& first, const Vector& second);

  int size() const { return static_cast<int>(first_.size()); }
  // P(arm a is the argmax), 0 <= a < size().
  double Of(int a) const;
  // Every arm's probability. Arms that cannot win by more than the error bound get 0; arms
  // with identical posteriors are computed once.
  Vector All() const;

  // Number of integrand evaluations of the last Of() (for tests and benchmarks).
  int64_t evaluations() const { return evaluations_; }

 private:
  double Cdf(int j, double x) const;
  double Ccdf(int j, double x) const;  // 1 - F_j(x), accurate in the upper tail
  // 1 - F_j(x) or an upper bound on it: decides "1 - F_j(x) > the per-arm skip threshold"
  // exactly.
  double TailAbove(int j, double x) const;
  double Pdf(int j, double x) const;
  double Quantile(int j, double u) const;       // Q_j(u), u small (lower tail)
  double UpperQuantile(int j, double u) const;  // Q_j(1 - u), u small

  Family family_;
  Vector first_, second_;
  Vector log_beta_;  // Beta: log B(alpha_j, beta_j), the density's normalizer
  // The two arms with the highest lower quantile proxy and their exact Q(eps): for any a, at
  // least one of them is a competitor j != a, whose Q_j(eps) bounds the region from below.
  int top1_ = -1, top2_ = -1;
  double q_top1_ = 0, q_top2_ = 0;
  // Arms that can matter to anyone: 1 - F_j(min(q_top1_, q_top2_)) > per-arm skip threshold.
  std::vector<int> contenders_;
  double skip_per_arm_ = 0;
  bool exact_ = false;
  mutable int64_t evaluations_ = 0;
};

}  // namespace bandit
