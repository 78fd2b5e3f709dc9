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

// The continued fraction of I_x(a, b) (Numerical Recipes, 3rd ed., eq. 6.4.5 and betacf, by the
// modified Lentz method): I_x(a, b) = x^a (1-x)^b / (a B(a, b)) * fraction, fast for
// x < (a + 1) / (a + b + 2). NaN when it has not converged within kMaxFractionTerms terms.
double BetaFraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300, kEps = 1e-15;
  const double qab = a + b, qap = a + 1, qam = a - 1;
  double c = 1, d = 1 - qab * x / qap;
  if (std::abs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= ArgmaxProbability::kMaxFractionTerms; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (std::abs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (std::abs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::abs(del - 1) < kEps) return h;
  }
  return NAN;
}

// Above this alpha + beta the fraction needs more terms (about sqrt(alpha + beta) near the mean)
// than Boost's asymptotic expansion costs (measured: equal near 2000, Boost 1.5x faster at 20000).
constexpr double kFractionMaxShapes = 1000;

// A Beta(a, b) factor with its normalizer, evaluated at x given log x and log(1 - x) (shared by
// all factors at one node).
struct BetaShape {
  double a, b, log_beta;
};

// F(x) and 1 - F(x), each with full relative accuracy in its small tail.
void BetaCdfPair(const BetaShape& s, double x, double log_x, double log_1mx, double* cdf,
                 double* ccdf) {
  if (x <= 0) {
    *cdf = 0, *ccdf = 1;
    return;
  }
  if (x >= 1) {
    *cdf = 1, *ccdf = 0;
    return;
  }
  if (s.a + s.b > kFractionMaxShapes) {
    *cdf = bm::ibeta(s.a, s.b, x, Pol());
    *ccdf = bm::ibetac(s.a, s.b, x, Pol());
    return;
  }
  const double log_front = s.a * log_x + s.b * log_1mx - s.log_beta;
  if (x < (s.a + 1) / (s.a + s.b + 2)) {
    const double f = BetaFraction(s.a, s.b, x);
    if (!std::isnan(f)) {
      *cdf = std::exp(log_front) * f / s.a;
      *ccdf = 1 - *cdf;
      return;
    }
  } else {
    const double f = BetaFraction(s.b, s.a, 1 - x);
    if (!std::isnan(f)) {
      *ccdf = std::exp(log_front) * f / s.b;
      *cdf = 1 - *ccdf;
      return;
    }
  }
  *cdf = bm::ibeta(s.a, s.b, x, Pol());
  *ccdf = bm::ibetac(s.a, s.b, x, Pol());
}

double BetaCdf(const BetaShape& s, double x) {
  double cdf, ccdf;
  BetaCdfPair(s, x, x > 0 ? std::log(x) : 0, x < 1 ? std::log1p(-x) : 0, &cdf, &ccdf);
  return cdf;
}

// log F(x), finite where F underflows (below the mean it is computed in logs).
double BetaLogCdf(const BetaShape& s, double x, double log_x, double log_1mx) {
  if (x <= 0) return -INFINITY;
  if (x >= 1) return 0;
  if (s.a + s.b <= kFractionMaxShapes && x < (s.a + 1) / (s.a + s.b + 2)) {
    const double f = BetaFraction(s.a, s.b, x);
    if (!std::isnan(f) && f > 0)
      return s.a * log_x + s.b * log_1mx - s.log_beta + std::log(f / s.a);
  }
  double cdf, ccdf;
  BetaCdfPair(s, x, log_x, log_1mx, &cdf, &ccdf);
  return ccdf < 0.5 ? std::log1p(-ccdf) : std::log(cdf);
}

double NormalCdf(double m, double s, double x) { return 0.5 * std::erfc((m - x) / (s * kSqrt2)); }
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
  // False when f is not finite at a point or the last three coefficients of the n = 32
  // interpolant still sum to more than tol.
  template <class F>
  bool Fit(const F& f, double lo, double hi, double tol) {
    mid_ = 0.5 * (lo + hi), half_ = 0.5 * (hi - lo);
    double values[kMaxN + 1];
    for (int n = 8; n <= kMaxN; n *= 2) {
      const int step = kMaxN / n;
      for (int k = 0; k <= n; ++k) {
        if (n > 8 && k % 2 == 0) continue;  // known from the coarser level
        const double v = f(mid_ + half_ * Cosines()[k * step]);
        if (!std::isfinite(v)) return false;
        values[k * step] = v;
      }
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
      // Far from converging at n = 16: n = 32 would not reach tol either (Chebyshev
      // coefficients of functions analytic near the interval decay geometrically; from 1e6 tol
      // at degree 16 to tol by 32 needs a ratio below 0.42 per degree, which a function this
      // slow to converge does not have). Only saves time: the caller evaluates exactly then.
      if (n == 16 && tail > 1e6 * tol) return false;
      if (tail <= tol) {
        size_ = n + 1;
        // Trailing coefficients far below the tolerance do not change any value.
        while (size_ > 1 && std::abs(coef_[size_ - 1]) < 1e-3 * tol) --size_;
        return true;
      }
    }
    return false;
  }
  // From values at the n = kMaxN points (values[k] at mid + half cos(pi k / kMaxN)).
  bool FitValues(const double* values, double lo, double hi, double tol) {
    int k = 0;
    return Fit([&](double) { return values[LevelIndex(k++)]; }, lo, hi, tol);
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
  // The index on the finest level of the c-th point Fit asks for (levels 8, 16, 32 in order,
  // the coarser levels' points skipped), so that FitValues can serve precomputed values.
  static int LevelIndex(int c) {
    if (c <= 8) return c * 4;
    c -= 9;
    if (c < 8) return (2 * c + 1) * 2;
    return 2 * (c - 8) + 1;
  }
  double mid_ = 0, half_ = 1;
  double coef_[kMaxN + 1] = {};
  int size_ = 1;
};

// Adaptive Gauss-Kronrod 15/31 with an absolute tolerance: a panel whose |K15 - G7| exceeds its
// share of the tolerance is halved, each half getting half the share (so the estimated errors
// of the accepted panels sum to at most tol). Nodes and weights from Boost.Math.
constexpr int kKronrodPoints = 31;

template <class F>
double GaussKronrod(const F& f, double lo, double hi, double tol, int depth) {
  using GK = bm::quadrature::gauss_kronrod<double, kKronrodPoints>;
  using G = bm::quadrature::gauss<double, kKronrodPoints / 2>;
  const auto& x = GK::abscissa();  // x[0] = 0, x[1..7] > 0; Gauss nodes at even indices
  const auto& wk = GK::weights();
  const auto& wg = G::weights();
  const double mid = 0.5 * (lo + hi), half = 0.5 * (hi - lo);
  double f0 = f(mid);
  double kronrod = f0 * wk[0], gauss = f0 * wg[0];
  double values[kKronrodPoints];
  for (size_t i = 1; i < x.size(); ++i) {
    values[2 * i - 1] = f(mid + half * x[i]);
    values[2 * i] = f(mid - half * x[i]);
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

// Spectral integration on the kMaxN + 1 Chebyshev-Lobatto points t_k = cos(pi k / n) of
// [-1, 1]: (Q f)_k = ∫_{-1}^{t_k} p(t) dt with p the interpolant of f, and the coefficient matrix
// (T f)_j = c_j of p = Σ c_j T_j (the discrete cosine transform). The antiderivative of the
// Chebyshev series term by term: ∫T_0 = T_1, ∫T_1 = T_2 / 4, ∫T_j = (T_{j+1}/(j+1) -
// T_{j-1}/(j-1)) / 2 (Mason & Handscomb, Chebyshev Polynomials, 2.4.4).
struct SpectralMatrices {
  static constexpr int kN = ChebyshevInterpolant::kMaxN;
  Eigen::Matrix<double, kN + 1, kN + 1> coefficients, integral;
  SpectralMatrices() {
    for (int m = 0; m <= kN; ++m) {
      double c[kN + 2] = {};
      for (int j = 0; j <= kN; ++j) {
        const double w = (m == 0 || m == kN) ? 0.5 : 1.0;
        c[j] = 2.0 / kN * w * std::cos(M_PI * j * m / kN);
        if (j == 0 || j == kN) c[j] *= 0.5;
        coefficients(j, m) = c[j];
      }
      double big[kN + 3] = {};  // antiderivative coefficients, degree kN + 1
      big[1] += c[0];
      for (int j = 1; j <= kN; ++j) {
        big[j + 1] += c[j] / (2.0 * (j + 1));
        if (j >= 2) big[j - 1] -= c[j] / (2.0 * (j - 1));
        if (j == 1) big[0] -= c[1] / 4;  // T_2 / 4 - T_0 / 4 = t^2 / 2 - 1/4
      }
      double at_minus_one = 0;
      for (int j = 0; j <= kN + 1; ++j) at_minus_one += (j % 2 ? -1 : 1) * big[j];
      for (int k = 0; k <= kN; ++k) {
        double v = -at_minus_one;
        for (int j = 0; j <= kN + 1; ++j) v += big[j] * std::cos(M_PI * j * k / kN);
        integral(k, m) = v;
      }
    }
  }
};

const SpectralMatrices& Spectral() {
  static const SpectralMatrices m;
  return m;
}

}  // namespace

ArgmaxProbability::ArgmaxProbability(Family family, const Vector& first, const Vector& second)
    : family_(family), first_(first), second_(second) {
  const int k = size();
  if (family_ == Family::kBeta) {
    log_beta_.resize(k);
    for (int j = 0; j < k; ++j) log_beta_[j] = LogBeta(first_[j], second_[j]);
  }
  if (k <= 1) return;
  // The two highest lower-tail proxies. Any competitor's exact Q_j(eps) is a valid lower end of
  // the region; the proxy only picks one that makes the region short.
  auto proxy = [&](int j) {
    if (family_ == Family::kNormal) return first_[j] - NormalTailZ() * second_[j];
    const double a = first_[j], b = second_[j], n = a + b;
    return a / n - 4.0 * std::sqrt(a * b / (n * n * (n + 1)));
  };
  double p1 = -INFINITY, p2 = -INFINITY;
  for (int j = 0; j < k; ++j) {
    const double v = proxy(j);
    if (top1_ < 0 || v > p1) {
      top2_ = top1_, p2 = p1;
      top1_ = j, p1 = v;
    } else if (top2_ < 0 || v > p2) {
      top2_ = j, p2 = v;
    }
  }
  q_top1_ = Quantile(top1_, kTailMass);
  q_top2_ = Quantile(top2_, kTailMass);
  const double lower = std::min(q_top1_, q_top2_);
  skip_per_arm_ = kSkipTotal / k;
  contenders_.reserve(k);
  for (int j = 0; j < k; ++j)
    if (TailAbove(j, lower) > skip_per_arm_) contenders_.push_back(j);
}

double ArgmaxProbability::Cdf(int j, double x) const {
  return family_ == Family::kBeta ? BetaCdf({first_[j], second_[j], log_beta_[j]}, x)
                                  : NormalCdf(first_[j], second_[j], x);
}

double ArgmaxProbability::Ccdf(int j, double x) const {
  if (family_ == Family::kNormal) return 0.5 * std::erfc((x - first_[j]) / (second_[j] * kSqrt2));
  if (x <= 0) return 1;
  if (x >= 1) return 0;
  double cdf, ccdf;
  BetaCdfPair({first_[j], second_[j], log_beta_[j]}, x, std::log(x), std::log1p(-x), &cdf, &ccdf);
  return ccdf;
}

double ArgmaxProbability::TailAbove(int j, double x) const {
  if (family_ == Family::kNormal) return Ccdf(j, x);
  // Beta: the sub-Gaussian bound P(X - mu >= t) <= exp(-2 (alpha + beta + 1) t^2) (see header),
  // where it decides either way (the bound is within a factor 1e4 of the tail for means in
  // 0.1..0.9 at these depths); the exact tail only in between.
  const double n = first_[j] + second_[j], t = x - first_[j] / n;
  if (t <= 0) return 1;
  const double bound = std::exp(-2 * (n + 1) * t * t);
  return bound <= skip_per_arm_ || bound > 1e4 * skip_per_arm_ ? bound : Ccdf(j, x);
}

double ArgmaxProbability::Pdf(int j, double x) const {
  if (family_ == Family::kNormal) {
    const double z = (x - first_[j]) / second_[j];
    return kInvSqrt2Pi / second_[j] * std::exp(-0.5 * z * z);
  }
  if (x <= 0 || x >= 1) return 0;
  return std::exp((first_[j] - 1) * std::log(x) + (second_[j] - 1) * std::log1p(-x) - log_beta_[j]);
}

double ArgmaxProbability::Quantile(int j, double u) const {
  if (family_ == Family::kNormal)
    return first_[j] -
           (u == kTailMass ? NormalTailZ() : kSqrt2 * bm::erfc_inv(2 * u, Pol())) * second_[j];
  // Q_{a,b}(u) = 1 - Q_{b,a}(1 - u): Boost's upper-tail inverse is much faster than its
  // lower-tail one for the tiny u used here.
  return 1 - bm::ibetac_inv(second_[j], first_[j], u, Pol());
}

double ArgmaxProbability::UpperQuantile(int j, double u) const {
  if (family_ == Family::kNormal)
    return first_[j] +
           (u == kTailMass ? NormalTailZ() : kSqrt2 * bm::erfc_inv(2 * u, Pol())) * second_[j];
  return bm::ibetac_inv(first_[j], second_[j], u, Pol());
}

double ArgmaxProbability::Of(int a) const {
  evaluations_ = 0;
  const int k = size();
  if (k == 1) return 1.0;
  // Region (see header): arm a's central 1 - 2 eps, above the best other competitor's Q(eps).
  const double competitor_floor = a == top1_ ? q_top2_ : q_top1_;
  const double lo = std::max(Quantile(a, kTailMass), competitor_floor);
  const double hi = UpperQuantile(a, kTailMass);
  if (!(lo < hi)) return 0.0;  // at most 3 eps of probability lies there
  // The arms that matter on [lo, hi], identical posteriors merged into one factor F^n.
  std::vector<int> active;
  active.reserve(contenders_.size());
  for (int j : contenders_)
    if (j != a && TailAbove(j, lo) > skip_per_arm_) active.push_back(j);
  std::sort(active.begin(), active.end(), [&](int x, int y) {
    return std::tie(first_[x], second_[x]) < std::tie(first_[y], second_[y]);
  });
  const bool beta = family_ == Family::kBeta;
  struct Factor {
    double first, second, log_beta;
    int power;
    double mean, sd;
    double lower, upper;  // narrow factors: 0 below, 1 above (a kZoneTail bound each side)
  };
  std::vector<Factor> factors;
  for (int j : active) {
    if (!factors.empty() && factors.back().first == first_[j] &&
        factors.back().second == second_[j]) {
      ++factors.back().power;
      continue;
    }
    Factor f{first_[j], second_[j], beta ? log_beta_[j] : 0, 1, first_[j], second_[j], 0, 0};
    if (beta) {
      const double n = f.first + f.second;
      f.mean = f.first / n;
      f.sd = std::sqrt(f.first * f.second / (n * n * (n + 1)));
    }
    factors.push_back(f);
  }
  // Wide factors into the interpolant, narrow ones with their 0/1 zones. If the interpolant of
  // the wide ones does not converge, a stricter width criterion is tried, then none.
  const double width = hi - lo;
  for (auto& f : factors) {
    if (exact_) {
      f.lower = -INFINITY, f.upper = INFINITY;
      continue;
    }
    // P(X <= mu - t) and P(X >= mu + t) are <= kZoneTail / power.
    const double log_tail = std::log(f.power / kZoneTail);
    const double t = beta ? std::sqrt(log_tail / (2 * (f.first + f.second + 1)))
                          : kSqrt2 * std::sqrt(log_tail) * f.sd;  // Chernoff: exp(-z^2/2)
    f.lower = f.mean - t, f.upper = f.mean + t;
  }
  std::vector<Factor> smooth, narrow;
  ChebyshevInterpolant smooth_log;
  // The wide factors' F_j at the Chebyshev-Lobatto points x_k of [lo, hi] without a CDF per
  // point: their densities (one exp per factor and point, the logs shared) are integrated
  // spectrally from an anchor, F_j(lo) = 0 or F_j(hi) = 1 where the region reaches past the
  // arm's kZoneTail bounds, else one exact CDF at the end farther from the arm's mean. Each
  // density's interpolant must have converged (tail coefficients, times the width, <=
  // kSpectralTolerance: the error of F_j); then log Π F_j is interpolated as above.
  auto SpectralFit = [&](const std::vector<Factor>& wide) {
    constexpr int n = ChebyshevInterpolant::kMaxN;
    if (beta && (lo <= 0 || hi >= 1)) return false;
    // Anchored at F_j(lo) = 0, log F_j is -inf at lo: no interpolant.
    for (const auto& f : wide)
      if (lo <= f.lower) return false;
    const int m = static_cast<int>(wide.size());
    const double mid = 0.5 * (lo + hi), half = 0.5 * (hi - lo);
    Eigen::MatrixXd density(n + 1, m);
    for (int k = 0; k <= n; ++k) {
      const double x = mid + half * ChebyshevInterpolant::Cosines()[k];
      const double lx = beta ? std::log(x) : 0, l1x = beta ? std::log1p(-x) : 0;
      for (int j = 0; j < m; ++j) {
        const Factor& f = wide[j];
        if (beta) {
          if (f.first < 1 || f.second < 1) return false;  // unbounded density
          density(k, j) = std::exp((f.first - 1) * lx + (f.second - 1) * l1x - f.log_beta);
        } else {
          const double z = (x - f.first) / f.second;
          density(k, j) = kInvSqrt2Pi / f.second * std::exp(-0.5 * z * z);
        }
      }
    }
    const auto& spectral = Spectral();
    const Eigen::MatrixXd coef = spectral.coefficients * density;
    for (int j = 0; j < m; ++j)
      if (2 * half * (std::abs(coef(n - 2, j)) + std::abs(coef(n - 1, j)) + std::abs(coef(n, j))) >
          kSpectralTolerance)
        return false;
    const Eigen::MatrixXd cumulative = half * (spectral.integral * density);  // ∫_lo^{x_k} f_j
    // log Π F_j per point, the product taken in doubles and logged when it gets small.
    double values[n + 1] = {}, product[n + 1];
    std::fill(product, product + n + 1, 1.0);
    for (int j = 0; j < m; ++j) {
      const Factor& f = wide[j];
      const double total = cumulative(0, j);  // x_0 = hi
      double below_lo = NAN, above_hi = NAN;  // the anchor: F_j(lo) or 1 - F_j(hi)
      if (lo <= f.lower) {
        below_lo = 0;
      } else if (hi >= f.upper) {
        above_hi = 0;
      } else if (f.mean - lo > hi - f.mean) {
        below_lo =
            beta ? BetaCdf({f.first, f.second, f.log_beta}, lo) : NormalCdf(f.first, f.second, lo);
      } else if (beta) {
        double cdf;
        BetaCdfPair({f.first, f.second, f.log_beta}, hi, std::log(hi), std::log1p(-hi), &cdf,
                    &above_hi);
      } else {
        above_hi = 0.5 * std::erfc((hi - f.first) / (f.second * kSqrt2));
      }
      for (int k = 0; k <= n; ++k) {
        const double cdf = std::isnan(below_lo) ? 1 - above_hi - (total - cumulative(k, j))
                                                : below_lo + cumulative(k, j);
        if (!(cdf > 0)) return false;
        if (f.power == 1) {
          product[k] *= std::min(cdf, 1.0);
          if (product[k] < 1e-200) values[k] += std::log(product[k]), product[k] = 1;
        } else {
          values[k] += f.power * std::log(std::min(cdf, 1.0));
        }
      }
    }
    for (int k = 0; k <= n; ++k) values[k] += std::log(product[k]);
    return smooth_log.FitValues(values, lo, hi, kSmoothTolerance);
  };
  size_t tried = 0;  // the size of the wide set that failed last
  for (double widths : {kSmoothWidths, kSmoothWidths / 3, 0.0}) {
    smooth.clear(), narrow.clear();
    for (const auto& f : factors)
      (!exact_ && f.sd * widths >= width ? smooth : narrow).push_back(f);
    if (smooth.empty()) break;
    if (smooth.size() == tried) continue;  // the same set as the failed attempt
    tried = smooth.size();
    auto sum_log = [&](double x) {
      double s = 0;
      const double lx = beta ? std::log(x) : 0, l1x = beta ? std::log1p(-x) : 0;
      for (const auto& f : smooth)
        s += f.power * (beta ? BetaLogCdf({f.first, f.second, f.log_beta}, x, lx, l1x)
                             : NormalLogCdf(f.first, f.second, x));
      return s;
    };
    if (SpectralFit(smooth)) break;
    // The CDF at up to 33 points per arm: worth trying for a few arms only (for many, a failed
    // fit costs more than it can save).
    if (smooth.size() <= 16 && smooth_log.Fit(sum_log, lo, hi, kSmoothTolerance)) break;
  }
  // Narrow factors by upper end, highest first: at x only those with upper > x are below 1.
  std::sort(narrow.begin(), narrow.end(),
            [](const Factor& x, const Factor& y) { return x.upper > y.upper; });
  double floor = -INFINITY;
  for (const auto& f : narrow) floor = std::max(floor, f.lower);
  const bool has_smooth = !smooth.empty();
  auto integrand = [&](double x) {
    ++evaluations_;
    if (x < floor) return 0.0;
    double v = Pdf(a, x);
    if (has_smooth) v *= std::exp(smooth_log(x));
    const double lx = beta && x > 0 ? std::log(x) : 0, l1x = beta && x < 1 ? std::log1p(-x) : 0;
    for (const auto& f : narrow) {
      if (f.upper <= x) break;
      if (v < 1e-300) return 0.0;
      double c;
      if (beta) {
        double ccdf;
        BetaCdfPair({f.first, f.second, f.log_beta}, x, lx, l1x, &c, &ccdf);
      } else {
        c = NormalCdf(f.first, f.second, x);
      }
      v *= f.power == 1 ? c : std::pow(c, f.power);
    }
    return v;
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
  const bool singular_low = beta && first_[a] < 1, singular_high = beta && second_[a] < 1;
  if ((singular_low || singular_high) && lo < 0.5 && hi > 0.5) cuts.push_back(0.5);
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  // A panel spanning more than 6 sd of arm a's density is too wide for one 31-point rule to
  // resolve it (the adaptive step would halve it after 31 wasted evaluations): halve it first.
  {
    double sd_a = second_[a];
    if (beta) {
      const double n = first_[a] + second_[a];
      sd_a = std::sqrt(first_[a] * second_[a] / (n * n * (n + 1)));
    }
    const size_t count = cuts.size();
    for (size_t i = 0; i + 1 < count; ++i)
      if (cuts[i + 1] - cuts[i] > 6 * sd_a) cuts.push_back(0.5 * (cuts[i] + cuts[i + 1]));
    std::sort(cuts.begin(), cuts.end());
  }
  const double panel_tol = kQuadratureTolerance / static_cast<double>(cuts.size() - 1);
  double p = 0;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    const double l = cuts[i], r = cuts[i + 1];
    if (singular_low && r <= 0.5) {
      const double al = first_[a];
      auto in_y = [&](double y) {
        const double x = std::pow(y, 1 / al);
        return y > 0 ? integrand(x) * x / (al * y) : 0.0;
      };
      p += GaussKronrod(in_y, std::pow(l, al), std::pow(r, al), panel_tol, kMaxDepth);
    } else if (singular_high && l >= 0.5) {
      const double be = second_[a];
      auto in_z = [&](double z) {
        const double one_minus_x = std::pow(z, 1 / be);
        return z > 0 ? integrand(1 - one_minus_x) * one_minus_x / (be * z) : 0.0;
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
  // Non-contenders cannot win with probability above skip + eps: they keep 0. Contenders with
  // the same posterior have the same probability and are computed once.
  std::vector<int> order = contenders_;
  std::sort(order.begin(), order.end(), [&](int x, int y) {
    return std::tie(first_[x], second_[x]) < std::tie(first_[y], second_[y]);
  });
  int64_t evaluations = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const int a = order[i];
    if (i > 0 && first_[a] == first_[order[i - 1]] && second_[a] == second_[order[i - 1]]) {
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
