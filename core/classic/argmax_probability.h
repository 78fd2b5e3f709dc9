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
//    Σ (1 - F_j(lo)), kept <= kSkipTotal; these are the arms "far below the leader". All()
//    gives 0 to arms that cannot win by more than that, and the exact evaluation (set_exact)
//    leaves them out; the fast path needs no skipping (below);
//  * the quadrature itself: the Gauss-Kronrod error estimate (QUADPACK's, from |K31 - G15|) summed
//    over panels is kept <= kQuadratureTolerance.
// Arms with identical posteriors (flat priors, small integer counts) are computed once in All().
//
// Speed: each arm's posterior changes only when that arm is updated, so everything per arm is
// kept between calls (the policy keeps one ArgmaxProbability for its lifetime) and so is the sum
// of all arms' log F, which Set() updates by the one arm's difference:
//  * per arm (rebuilt when Set() changes it): its moments and log B; its zone [lo_j, hi_j]
//    outside which the factor is taken as 0 or 1, an error of at most kZoneTail per arm and
//    side: Normal, mean -+ z sd; Beta, the tightest of three bounds (no inverse incomplete
//    beta): the sub-Gaussian tail (Beta(alpha, beta) is 1/(4(alpha+beta+1))-sub-Gaussian,
//    Marchal & Arbel 2017), F(x) <= x^alpha / (alpha B) and its mirror, and the log-concave
//    tail bound in v = logit x (see Zone());
//  * per arm, log F_j on the cells of a dyadic grid covering its zone, in a coordinate u (Beta:
//    u = logit x, where the density is smooth with exponential tails and log F nearly linear
//    towards 0; Normal: u = x): cells [i 2^-l, (i+1) 2^-l] of the level l whose width is the
//    largest power of two <= kCurvePieceSds standard deviations (in u), one Chebyshev series
//    of degree kCurveDegree per cell (Trefethen, Approximation Theory and Approximation
//    Practice, ch. 3 and 19). Beta: from the density integrated spectrally cell by cell and
//    scaled to the exact F at the cells' outer ends (Boost's ibeta, twice per build); Normal:
//    from one shared curve of log Phi. A cell is accepted when the tail coefficients of the
//    density's series are below kCurveTolerance (absolute on F) and those of log F's below
//    kCurveTolerance / F (absolute on F again); else the next finer level is tried, and after
//    kCurveRefinements the arm is evaluated exactly (also a density unbounded at 0 or 1,
//    shapes below 1). The coefficients are rounded to multiples of 2^-grid_bits (about 1e-12);
//  * the grid's sum: per level and cell, the sum of the coefficients of all arms with that
//    cell, held as integers in units of 2^-grid_bits, so adding and removing an arm is exact
//    (integer addition is associative): after any sequence of Set() calls the sums equal
//    those of a fresh build bit for bit, with no drift and no recomputation. Below the lowest
//    cell of arm j its factor is taken as 0; the largest such lower end among j != a (kept
//    in an ordered set) is where the product over the others vanishes. Arms wholly below the
//    grid's floor (grid_floor(): no region reaches below it) are left out until it falls to
//    them; identical posteriors are built once per Sync(); an arm changed by Set() is built
//    only when an integral other than its own needs it.
// Per call, Σ_{j≠a} log F_j(u) at a node is one Clenshaw sum of kCurveDegree + 1 terms per
// grid level with a cell there (a handful), arm a's own coefficients subtracted as integers
// from its level's cell first: the cost does not depend on K, nor on the counts. Plus the
// chosen arm's region ends Q(eps), Q(1 - eps) (Boost's inverse, cached per arm), a scan of the
// arms' cached lower-tail proxies for the competitor floor, and one of their means and sds for
// the panel cuts around competitors much narrower than the region (a few ns per arm).
// Total absolute error <= 3 eps + kQuadratureTolerance + 2 K kZoneTail + K kCurveTolerance +
// the rounding of the coefficients (<= (kCurveDegree + 1) 2^-grid_bits per arm in log), about
// 1e-5 by QUADPACK's (pessimistic) estimate; tested to 1e-6 against closed forms, brute-force
// integrals and the exact evaluation without these shortcuts (set_exact).
//
// The regularized incomplete beta function, its inverse and the Gauss-Kronrod nodes come from
// Boost.Math (header-only, Debian's libboost-dev).
//
// Two files hold the two ideas: argmax_grid.{h,cc} the grid (the arms' zones and curves, the
// integer sums per cell, their evaluation at a node, the distribution functions),
// argmax_probability.cc the quadratures (the regions, the panels, Gauss-Kronrod, Of(), All(),
// the exact evaluation).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/classic/argmax_grid.h"
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
  static constexpr double kZoneTail = 1e-11;            // per arm and side
  static constexpr int kCurveDegree = 16;               // per cell of an arm's log F
  static constexpr double kCurvePieceSds = 1.25;        // largest cell width, in sd
  static constexpr double kCurveTolerance = 1e-12;      // on F, per cell (see above)
  static constexpr int kCurveRefinements = 4;           // finer levels before exact fallback
  // Coefficients are multiples of 2^-kGridBits (fewer bits above 2^16 arms, so that the
  // integer sums cannot overflow: |coefficient| <= kMaxCoefficient, else the arm is exact).
  static constexpr int kGridBits = 40;
  static constexpr double kMaxCoefficient = 64;

  // Beta: first = alpha_j, second = beta_j (both > 0). Normal: first = mean, second = standard
  // deviation (> 0). Both vectors have one entry per arm.
  ArgmaxProbability(Family family, const Vector& first, const Vector& second);
  explicit ArgmaxProbability(Family family) : family_(family) {}

  // Arm j's posterior is now (first, second), 0 <= j < size(): its contribution leaves the
  // grid's sum at once, its new one is built and added when next needed. Unchanged parameters
  // keep it.
  void Set(int j, double first, double second);

  int size() const { return static_cast<int>(arms_.size()); }
  // P(arm a is the argmax), 0 <= a < size().
  double Of(int a) const;
  // Every arm's probability. Arms that cannot win by more than the error bound get 0; arms
  // with identical posteriors are computed once. The arms on the grid are integrated together,
  // on shared nodes (see SharedIntegrals): Σ_j log F_j from the grid once per node for all of
  // them, then per arm its density and its own log F, instead of one adaptive quadrature per
  // arm; each result is within the same error bound as Of(a), though not equal to it bit for
  // bit. The others (the exact evaluation, arms without a curve, Beta densities unbounded at an
  // end) take Of(a).
  Vector All() const;

  // ---- For tests only: hooks into the method's internals, not part of the API. ----

  // Exact evaluation only (no curves, no grid, no 0/1 zones): the slow reference the tests
  // compare the fast path with.
  void SetExactForTesting(bool exact) {
    exact_ = exact;
    prepared_ = false;
  }
  // Σ_{j≠a} log F_j(x) as the fast path evaluates it from the grid (-inf below a competitor's
  // lowest cell).
  double LogProductOfOthersForTesting(int a, double x) const;
  // The grid's sums, cell by cell: (level, cell, arms, integer coefficients), sorted (equal to
  // a fresh build's after any sequence of Set() calls).
  std::vector<std::pair<std::array<int64_t, 3>, std::vector<int64_t>>> GridSnapshotForTesting()
      const;
  // Number of integrand evaluations of the last Of() or All().
  int64_t EvaluationsForTesting() const { return evaluations_; }
  // Curve builds since construction (a Set with new parameters causes one when the arm is next
  // needed, an unchanged arm none).
  int64_t CurveBuildsForTesting() const { return curve_builds_; }
  // Arms changed since their contribution was last added to the grid.
  int64_t PendingArmsForTesting() const { return static_cast<int64_t>(pending_.size()); }
  // Arms left out of the grid because their posterior lies wholly below its floor (see
  // grid_floor()).
  int64_t DeferredArmsForTesting() const { return static_cast<int64_t>(deferred_.size()); }

 private:
  using Curve = argmax::Curve;
  // The lowest lower end any region can have, min over the two arms bounding regions of their
  // Q(eps); arms whose posterior lies wholly below it (1 - F_j(floor) <= kZoneTail) are left
  // out of the grid until it falls to them: their factor is 1 on every region.
  double grid_floor() const;

  struct Arm {
    double first = 0, second = 0;
    double mean = 0, sd = 0;  // of the posterior
    double proxy = 0;         // lower-tail proxy for the region's lower end
    double log_beta = 0;      // Beta: log B(alpha, beta)
    // Built on first need (Zone()):
    bool has_zone = false;
    double zone_lo = 0, zone_hi = 0;
    bool has_curve = false;  // else evaluated exactly
    Curve curve;
    bool in_grid = false;  // its curve is in the grid's sums (or it is in exact_arms_)
    bool pending = false;  // listed in pending_
    // An upper end with 1 - F(top) <= kZoneTail (Normal: the zone's; Beta: the sub-Gaussian
    // bound), and whether the arm is left out of the grid because top < the grid's floor.
    double top = 0;
    bool deferred = false;
    // Built on first need (RegionEnds()):
    bool has_region = false;
    double q_lo = 0, q_hi = 0;  // Q(eps), Q(1 - eps)
  };
  // One cell of one level: the sums of its arms' coefficients, in units of 2^-grid_bits_.
  struct GridCell {
    std::array<int64_t, kCurveDegree + 1> coef{};
    int arms = 0;
  };
  struct GridLevel {
    absl::flat_hash_map<int64_t, GridCell> cells;
    int arms = 0;
    double scale = 1;  // 2^level: cells are [i, i + 1] / scale
  };
  const Arm& Zone(int j) const;
  const Arm& RegionEnds(int j) const;
  // Adds (sign +1) or removes (-1) arm j's contribution to the grid's sums.
  void ApplyToGrid(int j, int sign) const;
  // Builds and adds every arm not yet in the grid, except `except`.
  void Sync(int except = -1) const;
  void Prepare() const;
  const std::vector<int>& Contenders() const;
  double OfExact(int a) const;
  // P(a) for the given arms (distinct, in the grid, with curves, densities bounded), as one
  // vector-valued integral on shared nodes (All()).
  Vector SharedIntegrals(const std::vector<int>& arms) const;
  double LogCdfExact(int j, double x) const;
  // The largest lower end of a competitor's cells (in u): below it the others' product is 0.
  double LowerEndOfOthers(int a) const;
  // sums[i] += Σ_{j≠a} log F_j at the points xs[i] (us[i] in the grid's coordinate) with
  // live[i]: from the grid, level by level, arm a's own coefficients subtracted; count <= 31.
  void GridLogProducts(int a, const double* xs, const double* us, const bool* live, int count,
                       double* sums) const;
  // 1 - F_j(x) or an upper bound on it: decides "1 - F_j(x) > the per-arm skip threshold".
  double TailAbove(int j, double x) const;
  double Pdf(int j, double x) const;

  Family family_;
  int grid_bits_ = kGridBits;
  bool exact_ = false;
  mutable std::vector<Arm> arms_;
  // The grid's sums by level, the arms' lowest cells' lower ends (u, arm), and the arms
  // without a curve (evaluated exactly at each node).
  mutable std::map<int, GridLevel> levels_;
  mutable std::set<std::pair<double, int>> lower_ends_;
  mutable std::set<int> exact_arms_;
  mutable std::vector<int> pending_;  // arms to build and add at the next Sync(), once each
  // (top, arm) of the arms in the grid and of those left out below its floor.
  mutable std::set<std::pair<double, int>> grid_tops_, deferred_;
  // The two arms with the highest lower quantile proxy and their exact Q(eps): for any a, at
  // least one of them is a competitor j != a, whose Q_j(eps) bounds the region from below.
  mutable bool prepared_ = false;
  mutable int top1_ = -1, top2_ = -1;
  mutable double q_top1_ = 0, q_top2_ = 0;
  // Arms that can matter to anyone: 1 - F_j(min(q_top1_, q_top2_)) > per-arm skip threshold
  // (for All() and the exact evaluation).
  mutable bool has_contenders_ = false;
  mutable std::vector<int> contenders_;
  mutable double skip_per_arm_ = 0;
  mutable int64_t evaluations_ = 0;
  mutable int64_t curve_builds_ = 0;
};

// Every action's probability (All()) for a run of posteriors in which consecutive ones differ
// in an arm or two, such as a Thompson sampling instance's decision log read in order: one
// ArgmaxProbability is kept across calls and only the arms that changed are Set(), so each call
// costs All() without rebuilding every arm's curve. The result equals a fresh
// ArgmaxProbability's All() (the grid equals a fresh build's after any sequence of Set()).
class ArgmaxProbabilities {
 public:
  // INVALID_ARGUMENT naming what is wrong: no action, first and second of different lengths,
  // no family, or a parameter out of its range (Beta: both finite and > 0; Normal: a finite
  // mean and a finite sd > 0).
  static absl::Status Validate(const ArgmaxPosteriors& posteriors);
  absl::StatusOr<Vector> Of(const ArgmaxPosteriors& posteriors);

 private:
  std::optional<ArgmaxProbability> current_;
  bool beta_ = true;
};

}  // namespace bandit
