// The grid (see argmax_probability.h): the arms' log F curves, built on first need, and their
// coefficients' integer sums per cell of each dyadic level, kept exact under Set() and evaluated
// at the quadratures' nodes (GridLogProducts).
#include "core/classic/argmax_grid.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include <boost/math/policies/policy.hpp>
#include <boost/math/special_functions/beta.hpp>
#include <boost/math/special_functions/erf.hpp>

#include "core/classic/argmax_probability.h"

namespace bandit {
namespace argmax {

namespace bm = boost::math;
// Double precision throughout (Boost's default promotes to long double, ~10x slower) and no
// exceptions on the data path: a domain error yields NaN, which the caller sees as NaN.
using Pol = bm::policies::policy<bm::policies::promote_double<false>,
                                 bm::policies::domain_error<bm::policies::ignore_error>,
                                 bm::policies::pole_error<bm::policies::ignore_error>,
                                 bm::policies::overflow_error<bm::policies::ignore_error>,
                                 bm::policies::evaluation_error<bm::policies::ignore_error>>;

// z with Phi(-z) = eps, for the Normal quantiles of the tail mass.
double NormalTailZ() {
  static const double z = kSqrt2 * bm::erfc_inv(2 * ArgmaxProbability::kTailMass, Pol());
  return z;
}

// z with Phi(-z) = kZoneTail: the Normal zone in standard deviations.
double NormalZoneZ() {
  static const double z = kSqrt2 * bm::erfc_inv(2 * ArgmaxProbability::kZoneTail, Pol());
  return z;
}

// log B(a, b). For large shapes the lgamma values are large and their difference loses digits:
// there Stirling's series, ln Γ(z) = (z - 1/2) ln z - z + ln(2π)/2 + δ(z) with
// δ(z) = 1/(12z) - 1/(360z^3) + 1/(1260z^5) - 1/(1680z^7) (Abramowitz & Stegun 6.1.41), regrouped
// as ln B = ln(2π)/2 - ln(a+b)/2 + (a - 1/2) ln(a/(a+b)) + (b - 1/2) ln(b/(a+b)) + δ(a) + δ(b) -
// δ(a+b).
namespace {
double StirlingCorrection(double z) {
  const double r = 1 / z, r2 = r * r;
  return r * (1.0 / 12 - r2 * (1.0 / 360 - r2 * (1.0 / 1260 - r2 / 1680)));
}
}  // namespace

double LogBeta(double a, double b) {
  if (std::min(a, b) < 10) return std::lgamma(a) + std::lgamma(b) - std::lgamma(a + b);
  const double n = a + b;
  return 0.91893853320467274178 - 0.5 * std::log(n) - (a - 0.5) * std::log1p(b / a) -
         (b - 0.5) * std::log1p(a / b) + StirlingCorrection(a) + StirlingCorrection(b) -
         StirlingCorrection(n);
}

// log F(x) and 1 - F(x) of Beta(a, b) by Boost's ibeta/ibetac, each accurate in its small tail
// (the exact evaluation, the anchors of the cached curves, and the fallback for arms without
// one).
double BetaLogCdf(double a, double b, double x) {
  if (x <= 0) return -INFINITY;
  if (x >= 1) return 0;
  const double upper = bm::ibetac(a, b, x, Pol());
  return upper < 0.5 ? std::log1p(-upper) : std::log(bm::ibeta(a, b, x, Pol()));
}
double BetaCcdf(double a, double b, double x) {
  if (x <= 0) return 1;
  if (x >= 1) return 0;
  return bm::ibetac(a, b, x, Pol());
}

double BetaUpperQuantile(double a, double b, double tail) {
  return bm::ibetac_inv(a, b, tail, Pol());
}

double Curve::operator()(double x) const {
  // Clenshaw's recurrence for Σ c_j T_j(t) on the piece holding x (Trefethen ATAP ch. 3).
  const double u = (x - lo) * scale;
  const int i = std::clamp(static_cast<int>(u), 0, pieces - 1);
  const double t = 2 * (u - i) - 1;
  const double* c = coef.data() + static_cast<size_t>(i) * (degree + 1);
  double b1 = 0, b2 = 0;
  for (int j = degree; j >= 1; --j) {
    const double b0 = 2 * t * b1 - b2 + c[j];
    b2 = b1, b1 = b0;
  }
  return t * b1 - b2 + c[0];
}

}  // namespace argmax

namespace {

namespace bm = boost::math;
using argmax::BetaLogCdf;
using argmax::Curve;
using argmax::kInvSqrt2Pi;
using argmax::kKronrodPoints;
using argmax::kSqrt2;
using argmax::Logit;
using argmax::NormalLogCdf;
using argmax::NormalZoneZ;
using argmax::Pol;

// Spectral integration on the N + 1 Chebyshev-Lobatto points t_k = cos(pi k / N) of [-1, 1]:
// (Q f)_k = ∫_{-1}^{t_k} p(t) dt with p the interpolant of f, and the coefficient matrix
// (T f)_j = c_j of p = Σ c_j T_j (the discrete cosine transform, Trefethen ATAP ch. 3). The
// antiderivative of the Chebyshev series term by term: ∫T_0 = T_1, ∫T_1 = T_2 / 4,
// ∫T_j = (T_{j+1}/(j+1) - T_{j-1}/(j-1)) / 2 (Mason & Handscomb, Chebyshev Polynomials, 2.4.4).
template <int N>
struct SpectralMatrices {
  Eigen::Matrix<double, N + 1, N + 1> coefficients, integral;
  SpectralMatrices() {
    for (int m = 0; m <= N; ++m) {
      double c[N + 2] = {};
      for (int j = 0; j <= N; ++j) {
        const double w = (m == 0 || m == N) ? 0.5 : 1.0;
        c[j] = 2.0 / N * w * std::cos(M_PI * j * m / N);
        if (j == 0 || j == N) c[j] *= 0.5;
        coefficients(j, m) = c[j];
      }
      double big[N + 3] = {};  // antiderivative coefficients, degree N + 1
      big[1] += c[0];
      for (int j = 1; j <= N; ++j) {
        big[j + 1] += c[j] / (2.0 * (j + 1));
        if (j >= 2) big[j - 1] -= c[j] / (2.0 * (j - 1));
        if (j == 1) big[0] -= c[1] / 4;  // T_2 / 4 - T_0 / 4 = t^2 / 2 - 1/4
      }
      double at_minus_one = 0;
      for (int j = 0; j <= N + 1; ++j) at_minus_one += (j % 2 ? -1 : 1) * big[j];
      for (int k = 0; k <= N; ++k) {
        double v = -at_minus_one;
        for (int j = 0; j <= N + 1; ++j) v += big[j] * std::cos(M_PI * j * k / N);
        integral(k, m) = v;
      }
    }
  }
};

template <int kN>
const SpectralMatrices<kN>& CurveSpectral() {
  static const SpectralMatrices<kN> m;
  return m;
}

// The cells a curve covers: equal pieces of [lo, hi] (the shared Normal curve), or the cells of
// a dyadic grid level covering [lo, hi] (an arm's curve; see the header).
struct CurveLayout {
  double lo = 0, hi = 0;
  int pieces = 0;
  int level = 0;
  int64_t first_cell = 0;
};

// Cells of width 2^-level covering [lo, hi]; false when there are too many or the indices are
// too large for exact arithmetic (the arm is then evaluated exactly).
bool DyadicLayout(double lo, double hi, int level, CurveLayout* out) {
  constexpr double kMaxIndex = 0x1p50;
  const double a = std::floor(std::ldexp(lo, level)), b = std::floor(std::ldexp(hi, level)) + 1;
  if (!(std::abs(a) < kMaxIndex && std::abs(b) < kMaxIndex && b - a <= (1 << 12))) return false;
  out->level = level;
  out->first_cell = static_cast<int64_t>(a);
  out->pieces = static_cast<int>(b - a);
  out->lo = std::ldexp(a, -level);
  out->hi = std::ldexp(b, -level);
  return true;
}

// The level whose cells are the widest power of two <= width.
int LevelFor(double width) { return static_cast<int>(std::ceil(-std::log2(width))); }

// Rounds a curve's coefficients to multiples of 2^-bits (the grid's unit: their integer sums are
// exact); false when one exceeds kMaxCoefficient (the sums could overflow).
bool Quantize(int bits, std::vector<double>* coef) {
  const double up = std::ldexp(1.0, bits), down = std::ldexp(1.0, -bits);
  for (double& c : *coef) {
    if (!(std::abs(c) <= ArgmaxProbability::kMaxCoefficient)) return false;
    c = std::nearbyint(c * up) * down;
  }
  return true;
}

// log F as a function of a coordinate v (Beta: v = logit x; Normal: v = z, standardized) from
// the density in v (f(x(v)) dx/dv, up to a constant factor near 1): `pdf` fills it at the
// kN + 1 Chebyshev-Lobatto points of a piece. Per piece the density's interpolant is integrated
// spectrally (Trefethen ATAP ch. 3, 19); the integrals are scaled to span exactly
// cdf(hi) - cdf(lo) (F at the outer ends, exact), which absorbs the rounding of the density's
// normalizer at large shapes and checks it (the factor must be 1 within kCurveScaleTolerance);
// then log F is interpolated at the same points. Accepted when each piece's density series
// ends below kCurveTolerance (absolute error on F) and its log F series below kCurveTolerance
// relative to F at the piece's upper end (an absolute error on F again: log F needs no more
// accuracy where F is tiny). Else the pieces are halved (the next `layout`), up to
// kCurveRefinements times; false then. bits > 0: coefficients quantized (Quantize).
template <int kN, class Pdf, class Cdf, class Layout>
bool BuildCurve(const Pdf& pdf, const Cdf& cdf_at, const Layout& layout, int bits, Curve* out) {
  using AP = ArgmaxProbability;
  constexpr double kCurveScaleTolerance = 1e-8;
  using CurveVector = Eigen::Matrix<double, kN + 1, 1>;
  const auto& spectral = CurveSpectral<kN>();
  static const CurveVector lobatto = [] {  // cos(pi k / kN)
    CurveVector t;
    for (int k = 0; k <= kN; ++k) t[k] = std::cos(M_PI * k / kN);
    return t;
  }();
  std::vector<CurveVector> integrals;
  for (int attempt = 0; attempt <= AP::kCurveRefinements; ++attempt) {
    CurveLayout cells;
    if (!layout(attempt, &cells)) break;
    const double lo = cells.lo, hi = cells.hi, anchor_lo = cdf_at(lo), anchor_hi = cdf_at(hi);
    if (!(lo < hi) || !(anchor_lo > 0) || !(anchor_hi > anchor_lo)) break;
    const int pieces = cells.pieces;
    const double width = (hi - lo) / pieces, half = 0.5 * width;
    integrals.resize(pieces);
    // Pass 1: ∫ from the piece's left end to each of its points, unscaled.
    bool ok = true;
    double total = 0;
    CurveVector x, density;
    for (int i = 0; i < pieces && ok; ++i) {
      const double left = lo + i * width, mid = left + half;
      for (int k = 0; k <= kN; ++k) x[k] = mid + half * lobatto[k];
      x[kN] = left;  // exactly (x[0] is the next piece's left end up to rounding)
      pdf(x, &density);
      if (!density.allFinite()) ok = false;
      const CurveVector coef = spectral.coefficients * density;
      const double tail =
          2 * half * (std::abs(coef[kN - 2]) + std::abs(coef[kN - 1]) + std::abs(coef[kN]));
      if (!(tail <= AP::kCurveTolerance)) ok = false;
      integrals[i] = half * (spectral.integral * density);
      total += integrals[i][0];  // x_0: the right end
    }
    if (!ok) continue;
    const double scale = (anchor_hi - anchor_lo) / total;
    if (!(std::abs(scale - 1) <= kCurveScaleTolerance)) continue;
    // Pass 2: F at the points, and log F's series.
    out->coef.resize(static_cast<size_t>(pieces) * (kN + 1));
    double cdf_left = anchor_lo;
    for (int i = 0; i < pieces && ok; ++i) {
      const CurveVector cdf = (cdf_left + scale * integrals[i].array()).matrix();
      if (!(cdf.minCoeff() > 0)) {
        ok = false;
        break;
      }
      const CurveVector log_cdf = cdf.array().log().min(0.0).matrix();
      const CurveVector log_coef = spectral.coefficients * log_cdf;
      const double tail =
          std::abs(log_coef[kN - 2]) + std::abs(log_coef[kN - 1]) + std::abs(log_coef[kN]);
      if (!(tail * std::min(cdf[0], 1.0) <= AP::kCurveTolerance)) {
        ok = false;
        break;
      }
      std::copy(log_coef.data(), log_coef.data() + kN + 1,
                out->coef.data() + static_cast<size_t>(i) * (kN + 1));
      cdf_left = cdf[0];
    }
    if (ok && bits > 0 && !Quantize(bits, &out->coef)) break;
    if (ok) {
      out->lo = lo, out->hi = hi, out->pieces = pieces, out->scale = pieces / (hi - lo);
      out->degree = kN;
      out->level = cells.level, out->first_cell = cells.first_cell;
      return true;
    }
  }
  out->coef.clear();
  out->pieces = 0;
  return false;
}

// Up to this alpha + beta a Beta curve's density takes its exponent's logarithm directly (see
// Zone()); above it by log1p and expm1, whose rounding does not grow with the shapes.
constexpr double kShortExponentShapes = 1000;

// log Phi on [-NormalZoneZ(), NormalZoneZ()], shared by all Normal arms: built once, so its
// pieces can be short and of low degree (a cheaper Clenshaw sum per evaluation); the arms'
// own curves on the grid are interpolated from it.
constexpr int kNormalCurveDegree = 8;
constexpr double kNormalCurvePieceSds = 0.3;

const Curve& StandardNormalCurve() {
  static const Curve curve = [] {
    Curve c;
    const double z = NormalZoneZ();
    const bool built = BuildCurve<kNormalCurveDegree>(
        [](const auto& x, auto* f) {
          *f = (kInvSqrt2Pi * (-0.5 * x.array().square()).exp()).matrix();
        },
        [](double x) { return 0.5 * std::erfc(-x / kSqrt2); },
        [z](int attempt, CurveLayout* out) {
          out->lo = -z, out->hi = z;
          out->pieces = static_cast<int>(std::ceil(2 * z / kNormalCurvePieceSds)) << attempt;
          return true;
        },
        0, &c);
    if (!built) std::abort();  // a fixed, smooth function: cannot fail
    return c;
  }();
  return curve;
}

// log Phi((u - mean) / sd) on the cells of `layout` (see BuildCurve), from the shared curve
// inside its range and erfc outside, interpolated per cell (degree kN) and accepted as
// BuildCurve accepts log F's series.
template <int kN, class Layout>
bool BuildNormalArmCurve(double mean, double sd, const Layout& layout, int bits, Curve* out) {
  using AP = ArgmaxProbability;
  using CurveVector = Eigen::Matrix<double, kN + 1, 1>;
  const auto& spectral = CurveSpectral<kN>();
  const Curve& standard = StandardNormalCurve();
  const double zone = NormalZoneZ();
  static const CurveVector lobatto = [] {  // cos(pi k / kN)
    CurveVector t;
    for (int k = 0; k <= kN; ++k) t[k] = std::cos(M_PI * k / kN);
    return t;
  }();
  for (int attempt = 0; attempt <= AP::kCurveRefinements; ++attempt) {
    CurveLayout cells;
    if (!layout(attempt, &cells)) break;
    const double width = (cells.hi - cells.lo) / cells.pieces, half = 0.5 * width;
    out->coef.resize(static_cast<size_t>(cells.pieces) * (kN + 1));
    bool ok = true;
    CurveVector log_cdf;
    for (int i = 0; i < cells.pieces && ok; ++i) {
      const double mid = cells.lo + i * width + half;
      for (int k = 0; k <= kN; ++k) {
        const double z = (mid + half * lobatto[k] - mean) / sd;
        log_cdf[k] = std::abs(z) < zone ? standard(z) : NormalLogCdf(0, 1, z);
      }
      if (!log_cdf.allFinite()) ok = false;
      const CurveVector log_coef = spectral.coefficients * log_cdf;
      const double tail =
          std::abs(log_coef[kN - 2]) + std::abs(log_coef[kN - 1]) + std::abs(log_coef[kN]);
      if (!(tail * std::min(std::exp(log_cdf[0]), 1.0) <= AP::kCurveTolerance)) ok = false;
      std::copy(log_coef.data(), log_coef.data() + kN + 1,
                out->coef.data() + static_cast<size_t>(i) * (kN + 1));
    }
    if (!ok) continue;
    if (!Quantize(bits, &out->coef)) break;
    out->lo = cells.lo, out->hi = cells.hi, out->pieces = cells.pieces;
    out->scale = cells.pieces / (cells.hi - cells.lo);
    out->degree = kN, out->level = cells.level, out->first_cell = cells.first_cell;
    return true;
  }
  out->coef.clear();
  out->pieces = 0;
  return false;
}

}  // namespace

void ArgmaxProbability::ApplyToGrid(int j, int sign) const {
  Arm& arm = arms_[j];
  arm.in_grid = sign > 0;
  if (sign > 0) {
    grid_tops_.insert({arm.top, j});
  } else {
    grid_tops_.erase({arm.top, j});
  }
  if (!arm.has_curve) {
    if (sign > 0) {
      exact_arms_.insert(j);
    } else {
      exact_arms_.erase(j);
    }
    return;
  }
  const Curve& curve = arm.curve;
  auto [at, created] = levels_.try_emplace(curve.level);
  GridLevel& level = at->second;
  if (created) level.scale = std::ldexp(1.0, curve.level);
  const double up = std::ldexp(1.0, grid_bits_);
  constexpr int n = kCurveDegree + 1;
  for (int i = 0; i < curve.pieces; ++i) {
    const double* coef = curve.coef.data() + static_cast<size_t>(i) * n;
    const int64_t key = curve.first_cell + i;
    // Exact: the coefficients are multiples of 2^-bits (Quantize), the sums integers.
    if (sign > 0) {
      GridCell& cell = level.cells[key];
      for (int k = 0; k < n; ++k) cell.coef[k] += static_cast<int64_t>(coef[k] * up);
      ++cell.arms;
    } else {
      auto it = level.cells.find(key);
      GridCell& cell = it->second;
      for (int k = 0; k < n; ++k) cell.coef[k] -= static_cast<int64_t>(coef[k] * up);
      if (--cell.arms == 0) level.cells.erase(it);  // its sums are 0 again, exactly
    }
  }
  level.arms += sign;
  if (level.arms == 0) levels_.erase(at);
  if (sign > 0) {
    lower_ends_.insert({curve.lo, j});
  } else {
    lower_ends_.erase({curve.lo, j});
  }
}

double ArgmaxProbability::grid_floor() const {
  Prepare();
  return size() >= 2 ? std::min(q_top1_, q_top2_) : -INFINITY;
}

void ArgmaxProbability::Sync(int except) const {
  // Every region lies above the floor (Of(): lo >= the other top arm's Q(eps)): an arm whose
  // top is below it has its factor in [1 - kZoneTail, 1] on every region, and is left out.
  const double floor = grid_floor();
  size_t kept = 0;
  // Arms with identical posteriors (a new instance's arms at the prior) have identical cells:
  // built once per Sync, copied for the others.
  absl::flat_hash_map<std::pair<double, double>, int> built;
  for (int j : pending_) {
    if (j == except) {
      pending_[kept++] = j;
      continue;
    }
    Arm& arm = arms_[j];
    arm.pending = false;
    if (arm.top < floor) {
      arm.deferred = true;
      deferred_.insert({arm.top, j});
      continue;
    }
    const auto [at, first] = built.try_emplace(std::pair{arm.first, arm.second}, j);
    if (!first && !arm.has_zone) {
      const Arm& same = arms_[at->second];
      arm.has_zone = true;
      arm.zone_lo = same.zone_lo, arm.zone_hi = same.zone_hi;
      arm.has_curve = same.has_curve;
      arm.curve = same.curve;
    }
    Zone(j);
    ApplyToGrid(j, +1);
  }
  pending_.resize(kept);
  // The floor moved: the grid holds exactly the arms with top >= floor (so that its content is
  // a function of the parameters alone, as a fresh build's). An arm moving in or out keeps its
  // cells (no rebuild).
  while (!grid_tops_.empty() && grid_tops_.begin()->first < floor) {
    const int j = grid_tops_.begin()->second;
    ApplyToGrid(j, -1);
    arms_[j].deferred = true;
    deferred_.insert({arms_[j].top, j});
  }
  while (!deferred_.empty() && std::prev(deferred_.end())->first >= floor) {
    const int j = std::prev(deferred_.end())->second;
    deferred_.erase(std::prev(deferred_.end()));
    arms_[j].deferred = false;
    Zone(j);
    ApplyToGrid(j, +1);
  }
}

void ArgmaxProbability::GridLogProducts(int a, const double* xs, const double* us, const bool* live,
                                        int count, double* sums) const {
  // A panel's Gauss-Kronrod nodes (GaussKronrod: the centre, then pairs at -+ its abscissae)
  // in increasing order, so that consecutive nodes mostly share a cell (one lookup per cell).
  static const std::array<int, kKronrodPoints> sorted = [] {
    std::array<int, kKronrodPoints> order;
    int at = 0;
    for (int i = kKronrodPoints - 1; i >= 2; i -= 2)
      order[at++] = i;  // mid - abscissa, outer first
    order[at++] = 0;
    for (int i = 1; i < kKronrodPoints; i += 2) order[at++] = i;  // mid + abscissa
    return order;
  }();
  const bool panel = count == kKronrodPoints;
  static const Arm kNoArm;
  const Arm& own = a >= 0 ? arms_[a] : kNoArm;  // a = -1: every arm's log F, none subtracted
  const bool own_cells = a >= 0 && own.has_curve && own.in_grid;
  const double up = std::ldexp(1.0, grid_bits_), down = std::ldexp(1.0, -grid_bits_);
  constexpr int n = kCurveDegree + 1;
  // Per level, the nodes are taken in runs that share a cell: the cell's integer sums are
  // turned into doubles once per run, and the run's Clenshaw recurrences advance in lockstep,
  // independent chains the compiler vectorizes (one recurrence per node is a chain of dependent
  // multiply-adds, latency-bound). Each node's arithmetic is the same as alone, bit for bit.
  int run_nodes[kKronrodPoints];
  double run_t[kKronrodPoints], b1[kKronrodPoints], b2[kKronrodPoints];
  double coef[n];
  for (const auto& level_cells : levels_) {
    // Named, not a structured binding: the lambda below captures it (C++20 allows capturing
    // structured bindings, clang 14 does not).
    const int level = level_cells.first;
    const GridLevel& grid = level_cells.second;
    const bool own_level = own_cells && own.curve.level == level;
    int run = 0;
    int64_t run_key = 0;
    auto flush = [&] {
      if (run == 0) return;
      const auto it = grid.cells.find(run_key);
      const int size = run;
      run = 0;
      if (it == grid.cells.end()) return;
      const int64_t* c = it->second.coef.data();
      // Arm a's own coefficients leave its cell's sums as integers: the others' sum, exactly.
      if (own_level && run_key >= own.curve.first_cell &&
          run_key < own.curve.first_cell + own.curve.pieces) {
        const double* mine =
            own.curve.coef.data() + static_cast<size_t>(run_key - own.curve.first_cell) * n;
        for (int k = 0; k < n; ++k)
          coef[k] = static_cast<double>(c[k] - static_cast<int64_t>(mine[k] * up));
      } else {
        for (int k = 0; k < n; ++k) coef[k] = static_cast<double>(c[k]);
      }
      // Clenshaw's recurrence in units of 2^-bits (Trefethen ATAP ch. 3).
      for (int r = 0; r < size; ++r) b1[r] = b2[r] = 0;
      for (int k = n - 1; k >= 1; --k) {
        const double ck = coef[k];
        for (int r = 0; r < size; ++r) {
          const double b0 = 2 * run_t[r] * b1[r] - b2[r] + ck;
          b2[r] = b1[r], b1[r] = b0;
        }
      }
      for (int r = 0; r < size; ++r)
        sums[run_nodes[r]] += (run_t[r] * b1[r] - b2[r] + coef[0]) * down;
    };
    for (int o = 0; o < count; ++o) {
      const int i = panel ? sorted[o] : o;
      if (!live[i]) continue;
      const double d = us[i] * grid.scale;  // in cells of this level
      if (!(std::abs(d) < 0x1p62)) continue;
      const double cell_start = std::floor(d);
      const int64_t key = static_cast<int64_t>(cell_start);
      if (run > 0 && key != run_key) flush();
      run_key = key;
      run_nodes[run] = i;
      run_t[run] = 2 * (d - cell_start) - 1;
      ++run;
    }
    flush();
  }
  for (int j : exact_arms_)
    if (j != a)
      for (int i = 0; i < count; ++i)
        if (live[i]) sums[i] += LogCdfExact(j, xs[i]);
}

double ArgmaxProbability::LowerEndOfOthers(int a) const {
  for (auto it = lower_ends_.rbegin(); it != lower_ends_.rend(); ++it)
    if (it->second != a) return it->first;
  return -INFINITY;
}

double ArgmaxProbability::LogProductOfOthersForTesting(int a, double x) const {
  Sync();
  const double u = family_ == Family::kBeta ? Logit(x) : x;
  if (!(u >= LowerEndOfOthers(a))) return -INFINITY;
  const bool live = true;
  double sum = 0;
  GridLogProducts(a, &x, &u, &live, 1, &sum);
  return sum;
}

std::vector<std::pair<std::array<int64_t, 3>, std::vector<int64_t>>>
ArgmaxProbability::GridSnapshotForTesting() const {
  Sync();
  std::vector<std::pair<std::array<int64_t, 3>, std::vector<int64_t>>> out;
  for (const auto& [level, grid] : levels_)
    for (const auto& [key, cell] : grid.cells)
      out.push_back({{level, key, cell.arms}, {cell.coef.begin(), cell.coef.end()}});
  std::sort(out.begin(), out.end());
  return out;
}

const ArgmaxProbability::Arm& ArgmaxProbability::Zone(int j) const {
  Arm& arm = arms_[j];
  if (arm.has_zone) return arm;
  arm.has_zone = true;
  if (family_ == Family::kNormal) {
    arm.zone_lo = arm.mean - NormalZoneZ() * arm.sd;
    arm.zone_hi = arm.mean + NormalZoneZ() * arm.sd;
    // On the grid in u = x, cells of at most kCurvePieceSds sd.
    const int level = LevelFor(kCurvePieceSds * arm.sd);
    ++curve_builds_;
    arm.has_curve = BuildNormalArmCurve<kCurveDegree>(
        arm.mean, arm.sd,
        [&](int attempt, CurveLayout* out) {
          return DyadicLayout(arm.zone_lo, arm.zone_hi, level + attempt, out);
        },
        grid_bits_, &arm.curve);
    return arm;
  }
  const double a = arm.first, b = arm.second;
  // Bounds, not quantiles (no inverse incomplete beta): the sub-Gaussian tail bound
  // exp(-2 (alpha + beta + 1) t^2) (see header) and, tighter for skewed posteriors,
  // F(x) <= x^alpha / (alpha B) (for beta >= 1) and 1 - F(x) <= (1 - x)^beta / (beta B)
  // (alpha >= 1), from (1 - t)^(beta - 1) <= 1 resp. t^(alpha - 1) <= 1 under the integral.
  const double t = std::sqrt(std::log(1 / kZoneTail) / (2 * (a + b + 1)));
  arm.zone_lo = std::max(0.0, arm.mean - t);
  arm.zone_hi = std::min(1.0, arm.mean + t);
  // A density unbounded at 0 or 1 has no polynomial interpolant there: exact evaluation.
  if (a < 1 || b < 1) return arm;
  arm.zone_lo = std::max(arm.zone_lo, std::exp((std::log(kZoneTail * a) + arm.log_beta) / a));
  arm.zone_hi = std::min(arm.zone_hi, -std::expm1((std::log(kZoneTail * b) + arm.log_beta) / b));
  // In v = logit x = log(x / (1 - x)) the density f(x) x (1 - x) = x^alpha (1 - x)^beta / B
  // is smooth with exponential tails, and log F is nearly linear towards x = 0 (alpha log x)
  // and decays like exp(-beta v) towards 1. Its exponent psi, about v_c = logit(m) (the mode
  // in v), m the mean, d = v - v_c: with L = log1p(m expm1(d)) = log((1 - x) / (1 - m)) + d
  // and log(x / m) = d - L,
  //   psi = alpha d - (alpha + beta) L + [alpha log m + beta log(1 - m) - log B],
  // so that the terms of size alpha + beta cancel in the constant (whose rounding the curve's
  // scaling absorbs) and to first order in d (alpha = (alpha + beta) m), not at every point.
  const double m = arm.mean, v_c = std::log(m) - std::log1p(-m);
  const double constant = a * std::log(m) + b * std::log1p(-m) - arm.log_beta;
  auto psi = [&](double d) { return a * d - (a + b) * std::log1p(m * std::expm1(d)) + constant; };
  // The zone, tighter: psi is concave (a sum of alpha log sigma(v) and beta log sigma(-v)), so
  // beyond the mode the tail mass past v is at most exp(psi(v)) / |psi'(v)|, with
  // psi'(v) = alpha - (alpha + beta) sigma(v). Walk out from the mode in steps of the sd (in v)
  // until the bound is below kZoneTail, then bisect.
  const double sd_v = arm.sd / (m * (1 - m));
  auto log_tail_bound = [&](double d) {
    const double sigma = 1 / (1 + std::exp(-(v_c + d)));
    return psi(d) - std::log(std::abs(a - (a + b) * sigma));
  };
  auto zone_end = [&](double side, double outer) {
    const double limit = side * (Logit(outer) - v_c);  // > 0
    double inside = 0, beyond = 4 * sd_v;
    while (beyond < limit && log_tail_bound(side * beyond) > std::log(kZoneTail)) {
      inside = beyond;
      beyond *= 1.5;
    }
    if (beyond >= limit) return outer;
    for (int i = 0; i < 12; ++i) {
      const double mid = 0.5 * (inside + beyond);
      (log_tail_bound(side * mid) > std::log(kZoneTail) ? inside : beyond) = mid;
    }
    return 1 / (1 + std::exp(-(v_c + side * beyond)));
  };
  if (arm.zone_lo > 0) arm.zone_lo = zone_end(-1, arm.zone_lo);
  if (arm.zone_hi < 1) arm.zone_hi = zone_end(1, arm.zone_hi);
  if (!(arm.zone_lo < arm.zone_hi)) return arm;
  // On the grid in u = v, cells of at most kCurvePieceSds sd (in v); F at the cells' outer
  // ends by Boost, each in its accurate tail.
  const double v_lo = Logit(arm.zone_lo), v_hi = Logit(arm.zone_hi);
  const int level = LevelFor(kCurvePieceSds * sd_v);
  ++curve_builds_;
  arm.has_curve = BuildCurve<kCurveDegree>(
      [&](const auto& v, auto* f) {
        const auto d = v.array() - v_c;
        if (a + b <= kShortExponentShapes) {
          // log(1 - m + m e^d) with Eigen's vectorized exp and log: an absolute rounding of
          // about 1e-16 in the logarithm, (alpha + beta) 1e-16 <= 1e-13 in the exponent.
          *f = (a * d - (a + b) * ((1 - m) + m * d.exp()).log() + constant).exp().matrix();
        } else {
          *f = (a * d - (a + b) * (m * d.expm1()).log1p() + constant).exp().matrix();
        }
      },
      [&](double v) {
        const double x = 1 / (1 + std::exp(-v));
        return v <= v_c ? bm::ibeta(a, b, x, Pol()) : 1 - bm::ibetac(a, b, x, Pol());
      },
      [&](int attempt, CurveLayout* out) { return DyadicLayout(v_lo, v_hi, level + attempt, out); },
      grid_bits_, &arm.curve);
  return arm;
}
double ArgmaxProbability::LogCdfExact(int j, double x) const {
  const Arm& arm = arms_[j];
  return family_ == Family::kBeta ? BetaLogCdf(arm.first, arm.second, x)
                                  : NormalLogCdf(arm.first, arm.second, x);
}

}  // namespace bandit
