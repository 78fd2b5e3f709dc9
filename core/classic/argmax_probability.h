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
// Speed: each arm's posterior changes only when that arm is updated, so everything per arm is
// kept between calls and rebuilt lazily for the arms Set() changed (the policy keeps one
// ArgmaxProbability for its lifetime); the cache is a pure function of each arm's parameters,
// so a rebuilt one gives bit-identical results:
//  * its moments and log B (at Set);
//  * its zone [lo_j, hi_j] outside which the factor is taken as 0 or 1, an error of at most
//    kZoneTail per arm and side: Normal, mean -+ z sd; Beta, the tightest of three bounds (no
//    inverse incomplete beta): the sub-Gaussian tail (Beta(alpha, beta) is
//    1/(4(alpha+beta+1))-sub-Gaussian, Marchal & Arbel 2017), F(x) <= x^alpha / (alpha B) and
//    its mirror, and the log-concave tail bound in v = logit x (see Zone());
//  * inside the zone, log F_j as a piecewise Chebyshev series in v (Beta: v = logit x, where
//    the density is smooth with exponential tails and log F nearly linear towards 0; Normal:
//    the standardized z, one curve shared by all arms): equal pieces of about kCurvePieceSds
//    standard deviations, degree kCurveDegree each, from the density integrated spectrally
//    piece by piece and scaled to the exact F at the zone's ends (Boost's ibeta, twice per
//    build) (Trefethen, Approximation Theory and Approximation Practice, ch. 3 and 19). A piece
//    is accepted when the tail coefficients of the density's series are below kCurveTolerance
//    (absolute on F) and those of log F's below kCurveTolerance / F (absolute on F again);
//    else the pieces are halved, and after kCurveRefinements the arm is evaluated exactly
//    (also a density unbounded at 0 or 1, shapes below 1). An evaluation is one Clenshaw sum of
//    kCurveDegree + 1 terms, whatever alpha + beta is: the cost is flat in the counts;
//  * its region ends Q(eps), Q(1 - eps) (Boost's inverse, needed for the chosen arm and the
//    two arms bounding the region from below; no curve needed for them).
// Per call (after a Set), over cached doubles: the two highest lower-tail proxies bound the
// region from below, the contender scan uses the sub-Gaussian tail bound, and the curve only
// near the threshold.
// The competitors' factors are then split by width against the region [lo, hi]:
//  * wide ones (sd >= (hi - lo) / kSmoothWidths, else / (kSmoothWidths / 3)) are smooth on the
//    region: the sum of their log F_j is replaced by its Chebyshev interpolant on nested
//    Chebyshev-Lobatto points (9, 17, 33), accepted when the last three coefficients sum to
//    <= kSmoothTolerance;
//  * narrow ones are summed in logs at each node, only those whose zone contains the node,
//    factor by factor over a panel's 31 nodes (each arm's curve stays in cache).
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

  // eps above; 1000 arms' cuts of 1 eps each stay below 1e-6 in all.
  static constexpr double kTailMass = 1e-10;
  static constexpr double kSkipTotal = 1e-8;            // Σ over skipped arms
  static constexpr double kQuadratureTolerance = 1e-5;  // absolute, over the whole region
  static constexpr int kMaxDepth = 18;                  // panel halvings
  static constexpr double kSmoothWidths = 8;            // wide: sd >= region width / this
  static constexpr double kSmoothTolerance = 1e-9;      // on the interpolated Σ log F_j
  static constexpr double kZoneTail = 1e-11;            // per arm and side
  static constexpr int kCurveDegree = 16;               // per piece of an arm's log F
  static constexpr double kCurvePieceSds = 1.25;        // initial piece width, in sd
  static constexpr double kCurveTolerance = 1e-12;      // on F, per piece (see above)
  static constexpr int kCurveRefinements = 4;           // piece halvings before exact fallback

  // Beta: first = alpha_j, second = beta_j (both > 0). Normal: first = mean, second = standard
  // deviation (> 0). Both vectors have one entry per arm.
  ArgmaxProbability(Family family, const Vector& first, const Vector& second);
  explicit ArgmaxProbability(Family family) : family_(family) {}

  // Exact evaluation only (no curves, no 0/1 zones, no smooth interpolant): the slow reference
  // the tests compare the shortcuts with.
  void set_exact(bool exact) {
    exact_ = exact;
    prepared_ = false;
  }

  // Arm j's posterior is now (first, second), 0 <= j < size(): its cached data is dropped
  // (rebuilt when next needed). Unchanged parameters keep it.
  void Set(int j, double first, double second);

  int size() const { return static_cast<int>(arms_.size()); }
  // P(arm a is the argmax), 0 <= a < size().
  double Of(int a) const;
  // Every arm's probability. Arms that cannot win by more than the error bound get 0; arms
  // with identical posteriors are computed once.
  Vector All() const;

  // Number of integrand evaluations of the last Of() (for tests and benchmarks).
  int64_t evaluations() const { return evaluations_; }
  // Curve builds since construction (for tests: a Set with new parameters causes one when the
  // arm is next needed, an unchanged arm none).
  int64_t curve_builds() const { return curve_builds_; }

  // log F_j as a piecewise Chebyshev series on [lo, hi] (see above).
  struct Curve {
    double lo = 0, hi = 0, scale = 0;  // scale = pieces / (hi - lo)
    int pieces = 0;
    int degree = 0;            // kCurveDegree (Beta arms), lower for the shared Normal curve
    std::vector<double> coef;  // pieces x (degree + 1)
    double operator()(double x) const;
  };

 private:
  struct Arm {
    double first = 0, second = 0;
    double mean = 0, sd = 0;  // of the posterior
    double proxy = 0;         // lower-tail proxy for the region's lower end
    // Built on first need (Zone()):
    bool has_zone = false;
    double log_beta = 0;  // Beta: log B(alpha, beta)
    double zone_lo = 0, zone_hi = 0;
    bool has_curve = false;  // Beta; Normal arms use the shared curve
    Curve curve;
    // Built on first need (RegionEnds()):
    bool has_region = false;
    double q_lo = 0, q_hi = 0;  // Q(eps), Q(1 - eps)
  };
  const Arm& Zone(int j) const;
  const Arm& RegionEnds(int j) const;
  void Prepare() const;
  double LogCdfExact(int j, double x) const;
  // sums[i] += weight * log F_j(xs[i]) for the i < count with active(i) (logits[i] =
  // logit xs[i] for Beta): LogCdf over many points, the arm's data looked up once.
  template <class Active>
  void AccumulateLogCdf(int j, double weight, const double* xs, const double* logits, int count,
                        double* sums, const Active& active) const;
  // 1 - F_j(x) or an upper bound on it: decides "1 - F_j(x) > the per-arm skip threshold".
  double TailAbove(int j, double x) const;
  double Pdf(int j, double x) const;

  Family family_;
  mutable std::vector<Arm> arms_;
  // The two arms with the highest lower quantile proxy and their exact Q(eps): for any a, at
  // least one of them is a competitor j != a, whose Q_j(eps) bounds the region from below.
  mutable bool prepared_ = false;
  mutable int top1_ = -1, top2_ = -1;
  mutable double q_top1_ = 0, q_top2_ = 0;
  // Arms that can matter to anyone: 1 - F_j(min(q_top1_, q_top2_)) > per-arm skip threshold.
  mutable std::vector<int> contenders_;
  mutable double skip_per_arm_ = 0;
  bool exact_ = false;
  mutable int64_t evaluations_ = 0;
  mutable int64_t curve_builds_ = 0;
};

}  // namespace bandit
