#include "core/classic/argmax_probability.h"

#include <algorithm>
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

struct Posterior {
  double first, second;
};

double BetaCdf(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  return bm::ibeta(a, b, x, Pol());
}
double NormalCdf(double m, double s, double x) { return 0.5 * std::erfc((m - x) / (s * kSqrt2)); }

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

}  // namespace

ArgmaxProbability::ArgmaxProbability(Family family, const Vector& first, const Vector& second)
    : family_(family), first_(first), second_(second) {
  const int k = size();
  if (family_ == Family::kBeta) {
    log_beta_.resize(k);
    for (int j = 0; j < k; ++j)
      log_beta_[j] =
          std::lgamma(first_[j]) + std::lgamma(second_[j]) - std::lgamma(first_[j] + second_[j]);
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
    if (Ccdf(j, lower) > skip_per_arm_) contenders_.push_back(j);
}

double ArgmaxProbability::Cdf(int j, double x) const {
  return family_ == Family::kBeta ? BetaCdf(first_[j], second_[j], x)
                                  : NormalCdf(first_[j], second_[j], x);
}

double ArgmaxProbability::Ccdf(int j, double x) const {
  if (family_ == Family::kNormal) return 0.5 * std::erfc((x - first_[j]) / (second_[j] * kSqrt2));
  if (x <= 0) return 1;
  if (x >= 1) return 0;
  return bm::ibetac(first_[j], second_[j], x, Pol());
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
  std::vector<Posterior> active;
  active.reserve(contenders_.size());
  for (int j : contenders_)
    if (j != a && Ccdf(j, lo) > skip_per_arm_) active.push_back({first_[j], second_[j]});
  std::sort(active.begin(), active.end(), [](const Posterior& x, const Posterior& y) {
    return std::tie(x.first, x.second) < std::tie(y.first, y.second);
  });
  struct Factor {
    double first, second;
    int power;
  };
  std::vector<Factor> factors;
  for (const auto& p : active) {
    if (!factors.empty() && factors.back().first == p.first && factors.back().second == p.second)
      ++factors.back().power;
    else
      factors.push_back({p.first, p.second, 1});
  }
  const bool beta = family_ == Family::kBeta;
  auto integrand = [&](double x) {
    ++evaluations_;
    double v = Pdf(a, x);
    for (const auto& f : factors) {
      if (v < 1e-300) return 0.0;
      const double c = beta ? BetaCdf(f.first, f.second, x) : NormalCdf(f.first, f.second, x);
      v *= f.power == 1 ? c : std::pow(c, f.power);
    }
    return v;
  };
  // Panels. A competitor much narrower than the region turns its factor into a near step,
  // which a Gauss-Kronrod rule whose nodes straddle it can miss with both rules agreeing; its
  // central range (mean +- 6 sd) becomes a panel of its own, so every panel either resolves
  // the step or sees the factor constant (~0 or ~1).
  std::vector<double> cuts = {lo, hi};
  const double narrow = (hi - lo) / 4;
  for (const auto& f : factors) {
    double mean = f.first, sd = f.second;
    if (beta) {
      const double n = f.first + f.second;
      mean = f.first / n;
      sd = std::sqrt(f.first * f.second / (n * n * (n + 1)));
    }
    if (12 * sd >= narrow) continue;
    for (double c : {mean - 6 * sd, mean + 6 * sd})
      if (c > lo && c < hi) cuts.push_back(c);
  }
  // A Beta density with a shape below 1 is unbounded at that end: there the panel is
  // integrated in y = x^alpha (or z = (1-x)^beta), where the integrand is smooth.
  const bool singular_low = beta && first_[a] < 1, singular_high = beta && second_[a] < 1;
  if ((singular_low || singular_high) && lo < 0.5 && hi > 0.5) cuts.push_back(0.5);
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
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
