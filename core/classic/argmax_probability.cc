#include "core/classic/argmax_probability.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <tuple>

#include <boost/math/policies/policy.hpp>
#include <boost/math/quadrature/gauss.hpp>
#include <boost/math/quadrature/gauss_kronrod.hpp>
#include <boost/math/special_functions/beta.hpp>
#include <boost/math/special_functions/erf.hpp>

namespace bandit {

namespace {

namespace bm = boost::math;
// Double precision throughout (Boost's default promotes to long double, ~10x slower) and no
// exceptions on the data path: a domain error yields NaN, which the caller sees as NaN.
using Pol = bm::policies::policy<bm::policies::promote_double<false>,
                                 bm::policies::domain_error<bm::policies::ignore_error>,
                                 bm::policies::pole_error<bm::policies::ignore_error>,
                                 bm::policies::overflow_error<bm::policies::ignore_error>,
                                 bm::policies::evaluation_error<bm::policies::ignore_error>>;

constexpr double kSqrt2 = 1.4142135623730950488;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

// z with Phi(-z) = eps, for the Normal quantiles of the tail mass.
double NormalTailZ() {
  static const double z = kSqrt2 * bm::erfc_inv(2 * ArgmaxProbability::kTailMass, Pol());
  return z;
}

// log B(a, b). For large shapes the lgamma values are large and their difference loses digits:
// there Stirling's series, ln Γ(z) = (z - 1/2) ln z - z + ln(2π)/2 + δ(z) with
// δ(z) = 1/(12z) - 1/(360z^3) + 1/(1260z^5) - 1/(1680z^7) (Abramowitz & Stegun 6.1.41), regrouped
// as ln B = ln(2π)/2 - ln(a+b)/2 + (a - 1/2) ln(a/(a+b)) + (b - 1/2) ln(b/(a+b)) + δ(a) + δ(b) -
// δ(a+b).
double StirlingCorrection(double z) {
  const double r = 1 / z, r2 = r * r;
  return r * (1.0 / 12 - r2 * (1.0 / 360 - r2 * (1.0 / 1260 - r2 / 1680)));
}
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

double NormalLogCdf(double m, double s, double x) {
  const double z = (x - m) / (s * kSqrt2);
  return z > 0 ? std::log1p(-0.5 * std::erfc(z)) : std::log(0.5 * std::erfc(-z));
}

// Chebyshev interpolant of a smooth function on [lo, hi] from its values at the nested
// Chebyshev-Lobatto points x_k = mid + half cos(pi k / n), n = 8, 16, 32; the coefficients are the
// discrete cosine transform of the values (Trefethen, Approximation Theory and Approximation
// Practice, ch. 3). Evaluated by Clenshaw's recurrence.
class ChebyshevInterpolant {
 public:
  static constexpr int kMaxN = 32;
  // From the values at the points x_i = mid + half cos(pi i / kMaxN), i a multiple of
  // kMaxN / n (the n + 1 points of level n = 8, 16 or 32; the levels are nested). False when a
  // value is not finite or the last three coefficients still sum to more than tol.
  bool Fit(const double* values, int n, double lo, double hi, double tol) {
    mid_ = 0.5 * (lo + hi), half_ = 0.5 * (hi - lo);
    const int step = kMaxN / n;
    for (int k = 0; k <= n; ++k)
      if (!std::isfinite(values[k * step])) return false;
    for (int j = 0; j <= n; ++j) {
      double c = 0;
      for (int k = 0; k <= n; ++k) {
        const double w = (k == 0 || k == n) ? 0.5 : 1.0;
        c += w * values[k * step] * Cosines()[((j * k) % (2 * n)) * step];
      }
      c *= 2.0 / n;
      if (j == 0 || j == n) c *= 0.5;
      coef_[j] = c;
    }
    const double tail = std::abs(coef_[n - 2]) + std::abs(coef_[n - 1]) + std::abs(coef_[n]);
    if (!(tail <= tol)) return false;
    size_ = n + 1;
    // Trailing coefficients far below the tolerance do not change any value.
    while (size_ > 1 && std::abs(coef_[size_ - 1]) < 1e-3 * tol) --size_;
    return true;
  }
  double operator()(double x) const {
    const double t = (x - mid_) / half_;
    double b1 = 0, b2 = 0;
    for (int j = size_ - 1; j >= 1; --j) {
      const double b0 = 2 * t * b1 - b2 + coef_[j];
      b2 = b1, b1 = b0;
    }
    return t * b1 - b2 + coef_[0];
  }

  // cos(pi i / kMaxN), i = 0 .. 2 kMaxN - 1.
  static const double* Cosines() {
    static const auto table = [] {
      std::array<double, 2 * kMaxN> t;
      for (int i = 0; i < 2 * kMaxN; ++i) t[i] = std::cos(M_PI * i / kMaxN);
      return t;
    }();
    return table.data();
  }

 private:
  double mid_ = 0, half_ = 1;
  double coef_[kMaxN + 1] = {};
  int size_ = 1;
};

// Adaptive Gauss-Kronrod 15/31 with an absolute tolerance: a panel whose |K15 - G7| exceeds its
// share of the tolerance is halved, each half getting half the share (so the estimated errors
// of the accepted panels sum to at most tol). Nodes and weights from Boost.Math. f(xs, n, out)
// evaluates the integrand at a panel's n nodes at once (factor by factor, for locality).
constexpr int kKronrodPoints = 31;

template <class F>
double GaussKronrod(const F& f, double lo, double hi, double tol, int depth) {
  using GK = bm::quadrature::gauss_kronrod<double, kKronrodPoints>;
  using G = bm::quadrature::gauss<double, kKronrodPoints / 2>;
  const auto& x = GK::abscissa();  // x[0] = 0, x[1..7] > 0; Gauss nodes at even indices
  const auto& wk = GK::weights();
  const auto& wg = G::weights();
  const double mid = 0.5 * (lo + hi), half = 0.5 * (hi - lo);
  double nodes[kKronrodPoints], values[kKronrodPoints];
  nodes[0] = mid;
  for (size_t i = 1; i < x.size(); ++i) {
    nodes[2 * i - 1] = mid + half * x[i];
    nodes[2 * i] = mid - half * x[i];
  }
  f(nodes, kKronrodPoints, values);
  const double f0 = values[0];
  double kronrod = f0 * wk[0], gauss = f0 * wg[0];
  for (size_t i = 1; i < x.size(); ++i) {
    const double sum = values[2 * i - 1] + values[2 * i];
    kronrod += sum * wk[i];
    if (i % 2 == 0) gauss += sum * wg[i / 2];
  }
  // QUADPACK's error estimate (qk31): |K31 - G15| rescaled by the integrand's variation on the
  // panel, (200 |K - G| / resasc)^1.5, since K31 is far more accurate than the G15 it is
  // compared with (Piessens et al. 1983, QUADPACK, section 2.2.2).
  const double mean_value = kronrod * 0.5;
  double resasc = wk[0] * std::abs(f0 - mean_value);
  for (size_t i = 1; i < x.size(); ++i)
    resasc +=
        wk[i] * (std::abs(values[2 * i - 1] - mean_value) + std::abs(values[2 * i] - mean_value));
  resasc *= half;
  kronrod *= half;
  gauss *= half;
  double error = std::abs(kronrod - gauss);
  if (resasc != 0 && error != 0)
    error = resasc * std::min(1.0, std::pow(200 * error / resasc, 1.5));
  if (error <= tol || depth == 0) return kronrod;
  return GaussKronrod(f, lo, mid, tol / 2, depth - 1) +
         GaussKronrod(f, mid, hi, tol / 2, depth - 1);
}

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

// log F as a function of a coordinate v (Beta: v = logit x; Normal: v = z, standardized) on
// [lo, hi] from the density in v (f(x(v)) dx/dv, up to a constant factor near 1): `pdf` fills
// it at the kN + 1 Chebyshev-Lobatto points of a piece. Per piece the density's interpolant is
// integrated spectrally (Trefethen ATAP ch. 3, 19); the integrals are scaled to span exactly
// anchor_hi - anchor_lo (F at the ends, exact), which absorbs the rounding of the density's
// normalizer at large shapes and checks it (the factor must be 1 within kCurveScaleTolerance);
// then log F is interpolated at the same points. Accepted when each piece's density series
// ends below kCurveTolerance (absolute error on F) and its log F series below kCurveTolerance
// relative to F at the piece's upper end (an absolute error on F again: log F needs no more
// accuracy where F is tiny). Else the pieces (initially `piece` wide) are halved, up to
// kCurveRefinements times; false then.
template <int kN, class Pdf>
bool BuildCurve(const Pdf& pdf, double lo, double hi, double anchor_lo, double anchor_hi,
                double piece, ArgmaxProbability::Curve* out) {
  using AP = ArgmaxProbability;
  constexpr double kCurveScaleTolerance = 1e-8;
  if (!(lo < hi) || !(anchor_lo > 0) || !(anchor_hi > anchor_lo)) return false;
  using CurveVector = Eigen::Matrix<double, kN + 1, 1>;
  const auto& spectral = CurveSpectral<kN>();
  static const CurveVector lobatto = [] {  // cos(pi k / kN)
    CurveVector t;
    for (int k = 0; k <= kN; ++k) t[k] = std::cos(M_PI * k / kN);
    return t;
  }();
  int pieces = std::clamp(static_cast<int>(std::ceil((hi - lo) / piece)), 1, 1 << 12);
  std::vector<CurveVector> integrals;
  for (int attempt = 0; attempt <= AP::kCurveRefinements; ++attempt, pieces *= 2) {
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
    if (ok) {
      out->lo = lo, out->hi = hi, out->pieces = pieces, out->scale = pieces / (hi - lo);
      out->degree = kN;
      return true;
    }
  }
  out->coef.clear();
  out->pieces = 0;
  return false;
}

double Logit(double x) { return std::log(x) - std::log1p(-x); }

// z with Phi(-z) = kZoneTail: the Normal zone in standard deviations.
double NormalZoneZ() {
  static const double z = kSqrt2 * bm::erfc_inv(2 * ArgmaxProbability::kZoneTail, Pol());
  return z;
}

// log Phi on [-NormalZoneZ(), NormalZoneZ()], shared by all Normal arms: built once, so its
// pieces can be short and of low degree (a cheaper Clenshaw sum per evaluation).
constexpr int kNormalCurveDegree = 8;
constexpr double kNormalCurvePieceSds = 0.3;

const ArgmaxProbability::Curve& StandardNormalCurve() {
  static const ArgmaxProbability::Curve curve = [] {
    ArgmaxProbability::Curve c;
    const double z = NormalZoneZ();
    const bool built = BuildCurve<kNormalCurveDegree>(
        [](const auto& x, auto* f) {
          *f = (kInvSqrt2Pi * (-0.5 * x.array().square()).exp()).matrix();
        },
        -z, z, 0.5 * std::erfc(z / kSqrt2), 1 - 0.5 * std::erfc(z / kSqrt2),
        kNormalCurvePieceSds, &c);
    if (!built) std::abort();  // a fixed, smooth function: cannot fail
    return c;
  }();
  return curve;
}

}  // namespace

double ArgmaxProbability::Curve::operator()(double x) const {
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

ArgmaxProbability::ArgmaxProbability(Family family, const Vector& first, const Vector& second)
    : family_(family) {
  arms_.resize(first.size());
  for (int j = 0; j < size(); ++j) Set(j, first[j], second[j]);
}

void ArgmaxProbability::Set(int j, double first, double second) {
  Arm& arm = arms_[j];
  if (arm.sd > 0 && arm.first == first && arm.second == second) return;  // still valid
  arm = Arm();
  arm.first = first, arm.second = second;
  if (family_ == Family::kNormal) {
    arm.mean = first, arm.sd = second;
    arm.proxy = first - NormalTailZ() * second;
  } else {
    const double n = first + second;
    arm.mean = first / n;
    arm.sd = std::sqrt(first * second / (n * n * (n + 1)));
    arm.proxy = arm.mean - 4.0 * arm.sd;
    arm.log_beta = LogBeta(first, second);
  }
  prepared_ = false;
}

const ArgmaxProbability::Arm& ArgmaxProbability::Zone(int j) const {
  Arm& arm = arms_[j];
  if (arm.has_zone) return arm;
  arm.has_zone = true;
  if (family_ == Family::kNormal) {
    arm.zone_lo = arm.mean - NormalZoneZ() * arm.sd;
    arm.zone_hi = arm.mean + NormalZoneZ() * arm.sd;
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
  ++curve_builds_;
  arm.has_curve = BuildCurve<kCurveDegree>(
      [&](const auto& v, auto* f) {
        const auto d = v.array() - v_c;
        *f = (a * d - (a + b) * (m * d.expm1()).log1p() + constant).exp().matrix();
      },
      Logit(arm.zone_lo), Logit(arm.zone_hi), bm::ibeta(a, b, arm.zone_lo, Pol()),
      1 - bm::ibetac(a, b, arm.zone_hi, Pol()), kCurvePieceSds * sd_v, &arm.curve);
  return arm;
}

const ArgmaxProbability::Arm& ArgmaxProbability::RegionEnds(int j) const {
  Arm& arm = arms_[j];
  if (arm.has_region) return arm;
  arm.has_region = true;
  if (family_ == Family::kNormal) {
    arm.q_lo = arm.mean - NormalTailZ() * arm.sd;
    arm.q_hi = arm.mean + NormalTailZ() * arm.sd;
    return arm;
  }
  // Boost's inverse, not the curve: the chosen arm (often the one just updated, at large t the
  // leader almost every round) then needs no curve unless it is someone's competitor. Q_{a,b}(u)
  // = 1 - Q_{b,a}(1 - u): Boost's upper-tail inverse is much faster than its lower-tail one
  // for tiny u.
  arm.q_lo = 1 - bm::ibetac_inv(arm.second, arm.first, kTailMass, Pol());
  arm.q_hi = bm::ibetac_inv(arm.first, arm.second, kTailMass, Pol());
  return arm;
}

double ArgmaxProbability::LogCdfExact(int j, double x) const {
  const Arm& arm = arms_[j];
  return family_ == Family::kBeta ? BetaLogCdf(arm.first, arm.second, x)
                                  : NormalLogCdf(arm.first, arm.second, x);
}

template <class Active>
void ArgmaxProbability::AccumulateLogCdf(int j, double weight, const double* xs,
                                         const double* logits, int count, double* sums,
                                         const Active& active) const {
  if (exact_) {
    for (int i = 0; i < count; ++i)
      if (active(i)) sums[i] += weight * LogCdfExact(j, xs[i]);
    return;
  }
  const Arm& arm = Zone(j);
  const double lo = arm.zone_lo, hi = arm.zone_hi;
  auto each = [&](auto&& inside) {
    for (int i = 0; i < count; ++i) {
      if (!active(i)) continue;
      const double x = xs[i];
      sums[i] += x >= hi ? 0.0 : weight * (x <= lo ? -INFINITY : inside(i));
    }
  };
  if (family_ == Family::kNormal) {
    const Curve& curve = StandardNormalCurve();
    each([&](int i) { return curve((xs[i] - arm.mean) / arm.sd); });
  } else if (arm.has_curve) {
    each([&](int i) { return arm.curve(logits[i]); });
  } else {
    each([&](int i) { return LogCdfExact(j, xs[i]); });
  }
}

double ArgmaxProbability::TailAbove(int j, double x) const {
  const Arm& arm = arms_[j];
  if (family_ == Family::kNormal) return 0.5 * std::erfc((x - arm.mean) / (arm.sd * kSqrt2));
  // Beta: the sub-Gaussian bound P(X - mu >= t) <= exp(-2 (alpha + beta + 1) t^2) (see header),
  // where it decides either way (the bound is within a factor 1e4 of the tail for means in
  // 0.1..0.9 at these depths); the tail itself only in between.
  const double t = x - arm.mean;
  if (t <= 0) return 1;
  const double bound = std::exp(-2 * (arm.first + arm.second + 1) * t * t);
  if (bound <= skip_per_arm_ || bound > 1e4 * skip_per_arm_) return bound;
  if (exact_) return BetaCcdf(arm.first, arm.second, x);
  const Arm& zoned = Zone(j);
  if (x >= zoned.zone_hi) return std::min(bound, kZoneTail);
  if (!zoned.has_curve) return BetaCcdf(arm.first, arm.second, x);
  // 1 - F from the curve, plus its error: still an upper bound.
  return -std::expm1(zoned.curve(Logit(x))) + 2 * kCurveTolerance;
}

double ArgmaxProbability::Pdf(int j, double x) const {
  const Arm& arm = arms_[j];
  if (family_ == Family::kNormal) {
    const double z = (x - arm.mean) / arm.sd;
    return kInvSqrt2Pi / arm.sd * std::exp(-0.5 * z * z);
  }
  if (x <= 0 || x >= 1) return 0;
  return std::exp((arm.first - 1) * std::log(x) + (arm.second - 1) * std::log1p(-x) -
                  arm.log_beta);
}

void ArgmaxProbability::Prepare() const {
  if (prepared_) return;
  prepared_ = true;
  contenders_.clear();
  const int k = size();
  top1_ = top2_ = -1;
  if (k <= 1) return;
  // The two highest lower-tail proxies. Any competitor's exact Q_j(eps) is a valid lower end of
  // the region; the proxy only picks one that makes the region short.
  double p1 = -INFINITY, p2 = -INFINITY;
  for (int j = 0; j < k; ++j) {
    const double v = arms_[j].proxy;
    if (top1_ < 0 || v > p1) {
      top2_ = top1_, p2 = p1;
      top1_ = j, p1 = v;
    } else if (top2_ < 0 || v > p2) {
      top2_ = j, p2 = v;
    }
  }
  q_top1_ = RegionEnds(top1_).q_lo;
  q_top2_ = RegionEnds(top2_).q_lo;
  const double lower = std::min(q_top1_, q_top2_);
  skip_per_arm_ = kSkipTotal / k;
  contenders_.reserve(k);
  for (int j = 0; j < k; ++j)
    if (TailAbove(j, lower) > skip_per_arm_) contenders_.push_back(j);
}

double ArgmaxProbability::Of(int a) const {
  evaluations_ = 0;
  const int k = size();
  if (k == 1) return 1.0;
  Prepare();
  // Region (see header): arm a's central 1 - 2 eps, above the best other competitor's Q(eps).
  const double competitor_floor = a == top1_ ? q_top2_ : q_top1_;
  const Arm& arm_a = RegionEnds(a);
  const double lo = std::max(arm_a.q_lo, competitor_floor);
  const double hi = arm_a.q_hi;
  if (!(lo < hi)) return 0.0;  // at most 3 eps of probability lies there
  // The arms that matter on [lo, hi], identical posteriors merged into one factor F^n.
  std::vector<int> active;
  active.reserve(contenders_.size());
  for (int j : contenders_)
    if (j != a && TailAbove(j, lo) > skip_per_arm_) active.push_back(j);
  std::sort(active.begin(), active.end(), [&](int x, int y) {
    return std::tie(arms_[x].first, arms_[x].second) < std::tie(arms_[y].first, arms_[y].second);
  });
  const bool beta = family_ == Family::kBeta;
  struct Factor {
    int arm, power;
    double sd, mean;
    double lower, upper;  // the zone: log F = -inf below, 0 above
  };
  std::vector<Factor> factors;
  for (int j : active) {
    const Arm& arm = arms_[j];
    if (!factors.empty() && arms_[factors.back().arm].first == arm.first &&
        arms_[factors.back().arm].second == arm.second) {
      ++factors.back().power;
      continue;
    }
    if (exact_) {
      factors.push_back({j, 1, arm.sd, arm.mean, -INFINITY, INFINITY});
    } else {
      const Arm& zoned = Zone(j);
      factors.push_back({j, 1, arm.sd, arm.mean, zoned.zone_lo, zoned.zone_hi});
    }
  }
  // Wide factors into the interpolant of their Σ log F_j on the region, narrow ones at every
  // node. If the interpolant of the wide ones does not converge, a stricter width criterion is
  // tried, then none.
  const double width = hi - lo;
  std::vector<Factor> smooth, narrow;
  ChebyshevInterpolant smooth_log;
  size_t tried = 0;  // the size of the wide set that failed last
  // The fit's points, and Σ log F_j over the last wide set evaluated there: a stricter set is a
  // subset, whose sum is the previous one minus the factors that left it.
  constexpr int kFitPoints = ChebyshevInterpolant::kMaxN + 1;
  double xs[kFitPoints], logits[kFitPoints], values[kFitPoints];
  for (int i = 0; i < kFitPoints; ++i) {
    xs[i] = 0.5 * (lo + hi) + 0.5 * (hi - lo) * ChebyshevInterpolant::Cosines()[i];
    logits[i] = beta ? Logit(xs[i]) : 0;
  }
  std::vector<Factor> evaluated;  // the set `values` sums over
  int level = 0;                  // `values` holds the points of levels up to this one
  auto add = [&](const Factor& f, double sign, int from_level, int to_level) {
    // The points of levels (from_level, to_level]: multiples of kMaxN / to_level that are not
    // multiples of kMaxN / from_level.
    constexpr int kN32 = ChebyshevInterpolant::kMaxN;
    const int step = kN32 / to_level, skip = from_level > 0 ? kN32 / from_level : 0;
    AccumulateLogCdf(f.arm, f.power * sign, xs, logits, kFitPoints, values,
                     [&](int i) { return i % step == 0 && (skip == 0 || i % skip != 0); });
  };
  for (double widths : {kSmoothWidths, kSmoothWidths / 3, 0.0}) {
    smooth.clear(), narrow.clear();
    for (const auto& f : factors)
      (!exact_ && f.sd * widths >= width ? smooth : narrow).push_back(f);
    if (smooth.empty()) break;
    if (smooth.size() == tried) continue;  // the same set as the failed attempt
    tried = smooth.size();
    // Below a factor's zone log F = -inf: no interpolant.
    bool inside = true;
    for (const auto& f : smooth) inside = inside && lo > f.lower;
    if (!inside) continue;
    // Factor by factor (each arm's curve stays in cache), level by level (the fit may converge
    // on 9 or 17 points).
    if (level > 0) {
      for (const auto& f : evaluated)  // a stricter set: subtract the factors that left it
        if (f.sd * widths < width) add(f, -1, 0, level);
    } else {
      std::fill(values, values + kFitPoints, 0.0);
    }
    evaluated = smooth;
    bool fitted = false;
    for (int n = 8; n <= ChebyshevInterpolant::kMaxN && !fitted; n *= 2) {
      if (n > level) {
        for (const auto& f : smooth) add(f, 1, level, n);
        level = n;
      }
      fitted = smooth_log.Fit(values, n, lo, hi, kSmoothTolerance);
    }
    if (fitted) break;
  }
  // Narrow factors by upper end, highest first: at x only those with upper > x are below 1.
  std::sort(narrow.begin(), narrow.end(),
            [](const Factor& x, const Factor& y) { return x.upper > y.upper; });
  double floor = -INFINITY;
  for (const auto& f : narrow) floor = std::max(floor, f.lower);
  const bool has_smooth = !smooth.empty();
  // At a panel's nodes: log Π F_j summed factor by factor (each arm's curve stays in cache),
  // a factor only where its zone does not make it 1; then times f_a.
  auto integrand = [&](const double* xs, int count, double* out) {
    evaluations_ += count;
    double log_product[kKronrodPoints], logits[kKronrodPoints];
    for (int i = 0; i < count; ++i) {
      const double x = xs[i];
      log_product[i] = x <= floor ? -INFINITY : has_smooth ? smooth_log(x) : 0.0;
      logits[i] = beta && x > 0 && x < 1 ? Logit(x) : 0;
    }
    for (const auto& f : narrow)
      AccumulateLogCdf(f.arm, f.power, xs, logits, count, log_product, [&](int i) {
        return xs[i] < f.upper && log_product[i] > -745;  // else 1, or exp underflows anyway
      });
    for (int i = 0; i < count; ++i)
      out[i] = log_product[i] > -745 ? Pdf(a, xs[i]) * std::exp(log_product[i]) : 0.0;
  };
  // Panels. A competitor much narrower than the region turns its factor into a near step,
  // which a Gauss-Kronrod rule whose nodes straddle it can miss with both rules agreeing; its
  // central range (mean +- 6 sd) becomes a panel of its own, so every panel either resolves
  // the step or sees the factor constant (~0 or ~1).
  std::vector<double> cuts = {lo, hi};
  const double narrow_sd = (hi - lo) / 4;
  for (const auto& f : narrow) {
    if (12 * f.sd >= narrow_sd) continue;
    for (double c : {f.mean - 6 * f.sd, f.mean + 6 * f.sd})
      if (c > lo && c < hi) cuts.push_back(c);
  }
  // A Beta density with a shape below 1 is unbounded at that end: there the panel is
  // integrated in y = x^alpha (or z = (1-x)^beta), where the integrand is smooth.
  const bool singular_low = beta && arm_a.first < 1, singular_high = beta && arm_a.second < 1;
  if ((singular_low || singular_high) && lo < 0.5 && hi > 0.5) cuts.push_back(0.5);
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  // A panel spanning more than 6 sd of arm a's density is too wide for one 31-point rule to
  // resolve it (the adaptive step would halve it after 31 wasted evaluations): halve it first.
  {
    const size_t count = cuts.size();
    for (size_t i = 0; i + 1 < count; ++i)
      if (cuts[i + 1] - cuts[i] > 6 * arm_a.sd) cuts.push_back(0.5 * (cuts[i] + cuts[i + 1]));
    std::sort(cuts.begin(), cuts.end());
  }
  const double panel_tol = kQuadratureTolerance / static_cast<double>(cuts.size() - 1);
  double p = 0;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    const double l = cuts[i], r = cuts[i + 1];
    if (singular_low && r <= 0.5) {
      const double al = arm_a.first;
      auto in_y = [&](const double* ys, int count, double* out) {
        double xs[kKronrodPoints];
        for (int i = 0; i < count; ++i) xs[i] = std::pow(ys[i], 1 / al);
        integrand(xs, count, out);
        for (int i = 0; i < count; ++i) out[i] = ys[i] > 0 ? out[i] * xs[i] / (al * ys[i]) : 0.0;
      };
      p += GaussKronrod(in_y, std::pow(l, al), std::pow(r, al), panel_tol, kMaxDepth);
    } else if (singular_high && l >= 0.5) {
      const double be = arm_a.second;
      auto in_z = [&](const double* zs, int count, double* out) {
        double xs[kKronrodPoints], one_minus_x[kKronrodPoints];
        for (int i = 0; i < count; ++i) {
          one_minus_x[i] = std::pow(zs[i], 1 / be);
          xs[i] = 1 - one_minus_x[i];
        }
        integrand(xs, count, out);
        for (int i = 0; i < count; ++i)
          out[i] = zs[i] > 0 ? out[i] * one_minus_x[i] / (be * zs[i]) : 0.0;
      };
      p += GaussKronrod(in_z, std::pow(1 - r, be), std::pow(1 - l, be), panel_tol, kMaxDepth);
    } else {
      p += GaussKronrod(integrand, l, r, panel_tol, kMaxDepth);
    }
  }
  return std::clamp(p, 0.0, 1.0);
}

Vector ArgmaxProbability::All() const {
  const int k = size();
  Vector p = Vector::Zero(k);
  if (k == 1) {
    p[0] = 1.0;
    return p;
  }
  Prepare();
  // Non-contenders cannot win with probability above skip + eps: they keep 0. Contenders with
  // the same posterior have the same probability and are computed once.
  std::vector<int> order = contenders_;
  std::sort(order.begin(), order.end(), [&](int x, int y) {
    return std::tie(arms_[x].first, arms_[x].second) < std::tie(arms_[y].first, arms_[y].second);
  });
  int64_t evaluations = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const int a = order[i];
    if (i > 0 && arms_[a].first == arms_[order[i - 1]].first &&
        arms_[a].second == arms_[order[i - 1]].second) {
      p[a] = p[order[i - 1]];
      continue;
    }
    p[a] = Of(a);
    evaluations += evaluations_;
  }
  evaluations_ = evaluations;
  return p;
}

}  // namespace bandit
