// The quadratures (see argmax_probability.h): each arm's probability as an adaptive
// Gauss-Kronrod integral over its region, the others' log F from the grid (argmax_grid.cc) at
// every node; all arms on shared nodes (SharedIntegrals); and the exact reference evaluation.
#include "core/classic/argmax_probability.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <tuple>

#include <boost/math/quadrature/gauss.hpp>
#include <boost/math/quadrature/gauss_kronrod.hpp>

#include "absl/strings/str_cat.h"

namespace bandit {
namespace {

namespace bm = boost::math;
using argmax::BetaCcdf;
using argmax::kInvSqrt2Pi;
using argmax::kKronrodPoints;
using argmax::kSqrt2;
using argmax::LogBeta;
using argmax::Logit;
using argmax::NormalTailZ;
using argmax::NormalZoneZ;

// Adaptive Gauss-Kronrod 15/31 with an absolute tolerance: a panel whose |K15 - G7| exceeds its
// share of the tolerance is halved, each half getting half the share (so the estimated errors
// of the accepted panels sum to at most tol). Nodes and weights from Boost.Math. f(xs, n, out)
// evaluates the integrand at a panel's n nodes at once (factor by factor, for locality).
// (kKronrodPoints: argmax_grid.h.)

// A panel's nodes: the centre, then pairs at mid -+ half x_i (Boost's Kronrod abscissae, the
// Gauss nodes at even i). Returns half the panel's width.
double KronrodNodes(double lo, double hi, double* nodes) {
  const auto& x = bm::quadrature::gauss_kronrod<double, kKronrodPoints>::abscissa();
  const double mid = 0.5 * (lo + hi), half = 0.5 * (hi - lo);
  nodes[0] = mid;
  for (size_t i = 1; i < x.size(); ++i) {
    nodes[2 * i - 1] = mid + half * x[i];
    nodes[2 * i] = mid - half * x[i];
  }
  return half;
}

// K31 on one panel from the integrand's values at its nodes (values[i * stride]), and QUADPACK's
// error estimate (qk31): |K31 - G15| rescaled by the integrand's variation on the panel,
// (200 |K - G| / resasc)^1.5, since K31 is far more accurate than the G15 it is compared with
// (Piessens et al. 1983, QUADPACK, section 2.2.2).
struct KronrodPanel {
  double integral, error;
};
KronrodPanel KronrodEstimate(const double* values, size_t stride, double half) {
  using GK = bm::quadrature::gauss_kronrod<double, kKronrodPoints>;
  using G = bm::quadrature::gauss<double, kKronrodPoints / 2>;
  const size_t points = GK::abscissa().size();
  const auto& wk = GK::weights();
  const auto& wg = G::weights();
  auto v = [&](size_t i) { return values[i * stride]; };
  const double f0 = v(0);
  double kronrod = f0 * wk[0], gauss = f0 * wg[0];
  for (size_t i = 1; i < points; ++i) {
    const double sum = v(2 * i - 1) + v(2 * i);
    kronrod += sum * wk[i];
    if (i % 2 == 0) gauss += sum * wg[i / 2];
  }
  const double mean_value = kronrod * 0.5;
  double resasc = wk[0] * std::abs(f0 - mean_value);
  for (size_t i = 1; i < points; ++i)
    resasc += wk[i] * (std::abs(v(2 * i - 1) - mean_value) + std::abs(v(2 * i) - mean_value));
  resasc *= half;
  kronrod *= half;
  gauss *= half;
  double error = std::abs(kronrod - gauss);
  if (resasc != 0 && error != 0)
    error = resasc * std::min(1.0, std::pow(200 * error / resasc, 1.5));
  return {kronrod, error};
}

template <class F>
double GaussKronrod(const F& f, double lo, double hi, double tol, int depth) {
  double nodes[kKronrodPoints], values[kKronrodPoints];
  const double half = KronrodNodes(lo, hi, nodes);
  f(nodes, kKronrodPoints, values);
  const KronrodPanel panel = KronrodEstimate(values, 1, half);
  if (panel.error <= tol || depth == 0) return panel.integral;
  const double mid = 0.5 * (lo + hi);
  return GaussKronrod(f, lo, mid, tol / 2, depth - 1) +
         GaussKronrod(f, mid, hi, tol / 2, depth - 1);
}

// The same rule for m integrands at once on shared nodes, f(xs, n, out) filling out[i m + c]:
// a panel is halved while any component's QUADPACK estimate exceeds the panel's share of the
// tolerance, so every component's accepted estimates sum to at most tol. Adds the integrals to
// sums[0..m).
template <class F>
void GaussKronrodVector(const F& f, int m, double lo, double hi, double tol, int depth,
                        double* sums) {
  double nodes[kKronrodPoints];
  const double half = KronrodNodes(lo, hi, nodes);
  std::vector<double> values(static_cast<size_t>(kKronrodPoints) * m), integrals(m);
  f(nodes, kKronrodPoints, values.data());
  bool accept = true;
  for (int c = 0; c < m; ++c) {
    const KronrodPanel panel = KronrodEstimate(values.data() + c, static_cast<size_t>(m), half);
    integrals[c] = panel.integral;
    if (panel.error > tol) accept = false;
  }
  if (accept || depth == 0) {
    for (int c = 0; c < m; ++c) sums[c] += integrals[c];
    return;
  }
  const double mid = 0.5 * (lo + hi);
  GaussKronrodVector(f, m, lo, mid, tol / 2, depth - 1, sums);
  GaussKronrodVector(f, m, mid, hi, tol / 2, depth - 1, sums);
}

// Adaptive Gauss-Kronrod over [lo, hi] split at `cuts`, with the transforms for a Beta density
// unbounded at an end (shape below 1): there a panel is integrated in y = x^alpha (or
// z = (1-x)^beta), where the integrand is smooth. f(xs, n, out) as in GaussKronrod.
template <class F>
double IntegratePanels(const F& integrand, std::vector<double> cuts, double lo, double hi,
                       double sd, bool beta, double alpha_a, double beta_a) {
  // A Beta density with a shape below 1 is unbounded at that end.
  const bool singular_low = beta && alpha_a < 1, singular_high = beta && beta_a < 1;
  if ((singular_low || singular_high) && lo < 0.5 && hi > 0.5) cuts.push_back(0.5);
  cuts.push_back(lo);
  cuts.push_back(hi);
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  // A panel spanning more than 6 sd of arm a's density is too wide for one 31-point rule to
  // resolve it (the adaptive step would halve it after 31 wasted evaluations): halve it first.
  {
    const size_t count = cuts.size();
    for (size_t i = 0; i + 1 < count; ++i)
      if (cuts[i + 1] - cuts[i] > 6 * sd) cuts.push_back(0.5 * (cuts[i] + cuts[i + 1]));
    std::sort(cuts.begin(), cuts.end());
  }
  const double panel_tol =
      ArgmaxProbability::kQuadratureTolerance / static_cast<double>(cuts.size() - 1);
  const int depth = ArgmaxProbability::kMaxDepth;
  double p = 0;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    const double l = cuts[i], r = cuts[i + 1];
    if (singular_low && r <= 0.5) {
      const double al = alpha_a;
      auto in_y = [&](const double* ys, int count, double* out) {
        double xs[kKronrodPoints];
        for (int i = 0; i < count; ++i) xs[i] = std::pow(ys[i], 1 / al);
        integrand(xs, count, out);
        for (int i = 0; i < count; ++i) out[i] = ys[i] > 0 ? out[i] * xs[i] / (al * ys[i]) : 0.0;
      };
      p += GaussKronrod(in_y, std::pow(l, al), std::pow(r, al), panel_tol, depth);
    } else if (singular_high && l >= 0.5) {
      const double be = beta_a;
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
      p += GaussKronrod(in_z, std::pow(1 - r, be), std::pow(1 - l, be), panel_tol, depth);
    } else {
      p += GaussKronrod(integrand, l, r, panel_tol, depth);
    }
  }
  return std::clamp(p, 0.0, 1.0);
}

}  // namespace

ArgmaxProbability::ArgmaxProbability(Family family, const Vector& first, const Vector& second)
    : family_(family) {
  // The grid's integer sums hold at most K arms' coefficients of at most kMaxCoefficient each:
  // K kMaxCoefficient 2^bits <= 2^62.
  int log2_arms = 0;
  while ((int64_t{1} << log2_arms) < first.size()) ++log2_arms;
  grid_bits_ = std::min(kGridBits, 56 - log2_arms);
  arms_.resize(first.size());
  for (int j = 0; j < size(); ++j) Set(j, first[j], second[j]);
}

void ArgmaxProbability::Set(int j, double first, double second) {
  Arm& arm = arms_[j];
  if (arm.sd > 0 && arm.first == first && arm.second == second) return;  // still valid
  if (arm.in_grid) ApplyToGrid(j, -1);  // the old contribution leaves the sums at once
  if (arm.deferred) deferred_.erase({arm.top, j});
  const bool listed = arm.pending;
  arm = Arm();
  arm.first = first, arm.second = second;
  if (family_ == Family::kNormal) {
    arm.mean = first, arm.sd = second;
    arm.proxy = first - NormalTailZ() * second;
    arm.top = first + NormalZoneZ() * second;
  } else {
    const double n = first + second;
    arm.mean = first / n;
    arm.sd = std::sqrt(first * second / (n * n * (n + 1)));
    arm.proxy = arm.mean - 4.0 * arm.sd;
    arm.log_beta = LogBeta(first, second);
    // P(X - mu >= t) <= exp(-2 (alpha + beta + 1) t^2) (see the header) = kZoneTail.
    arm.top = arm.mean + std::sqrt(std::log(1 / kZoneTail) / (2 * (n + 1)));
  }
  arm.pending = true;
  if (!listed) pending_.push_back(j);  // once, however often it changes before the next Sync
  prepared_ = false;
  has_contenders_ = false;
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
  arm.q_lo = 1 - argmax::BetaUpperQuantile(arm.second, arm.first, kTailMass);
  arm.q_hi = argmax::BetaUpperQuantile(arm.first, arm.second, kTailMass);
  return arm;
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
  return std::exp((arm.first - 1) * std::log(x) + (arm.second - 1) * std::log1p(-x) - arm.log_beta);
}

void ArgmaxProbability::Prepare() const {
  if (prepared_) return;
  prepared_ = true;
  has_contenders_ = false;
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
}

const std::vector<int>& ArgmaxProbability::Contenders() const {
  Prepare();
  if (has_contenders_) return contenders_;
  has_contenders_ = true;
  contenders_.clear();
  const int k = size();
  if (k <= 1) return contenders_;
  const double lower = std::min(q_top1_, q_top2_);
  skip_per_arm_ = kSkipTotal / k;
  contenders_.reserve(k);
  for (int j = 0; j < k; ++j)
    if (TailAbove(j, lower) > skip_per_arm_) contenders_.push_back(j);
  return contenders_;
}

double ArgmaxProbability::Of(int a) const {
  evaluations_ = 0;
  const int k = size();
  if (k == 1) return 1.0;
  if (exact_) return OfExact(a);
  // Arm a's own contribution is not needed: when it is the arm just updated (at large t the
  // leader, chosen almost every round) its curve is built only once someone else needs it.
  Sync(a);
  Prepare();
  // Region (see header): arm a's central 1 - 2 eps, above the best other competitor's Q(eps).
  const double competitor_floor = a == top1_ ? q_top2_ : q_top1_;
  const Arm& arm_a = RegionEnds(a);
  const double lo = std::max(arm_a.q_lo, competitor_floor);
  const double hi = arm_a.q_hi;
  if (!(lo < hi)) return 0.0;  // at most 3 eps of probability lies there
  // A competitor much narrower than the region turns its factor into a near step, which a
  // Gauss-Kronrod rule whose nodes straddle it can miss with both rules agreeing; its central
  // range (mean +- 6 sd) becomes a panel of its own, so every panel either resolves the step
  // or sees the factor constant (~0 or ~1). A scan of cached doubles, no curve.
  std::vector<double> cuts;
  const double narrow_sd = (hi - lo) / 48;
  for (int j = 0; j < k; ++j) {
    const Arm& arm = arms_[j];
    if (j == a || arm.sd >= narrow_sd) continue;
    for (double c : {arm.mean - 6 * arm.sd, arm.mean + 6 * arm.sd})
      if (c > lo && c < hi) cuts.push_back(c);
  }
  // At a node: f_a(x) Π_{j≠a} F_j(x) = exp(log f_a(x) + Σ_{j≠a} log F_j(x)), the sum from the
  // grid (0 below the competitors' highest lowest cell).
  const bool beta = family_ == Family::kBeta;
  const double floor_u = LowerEndOfOthers(a);
  const double log_normal = std::log(kInvSqrt2Pi / arm_a.sd);
  auto integrand = [&](const double* xs, int count, double* out) {
    evaluations_ += count;
    double us[kKronrodPoints], log_values[kKronrodPoints];
    bool live[kKronrodPoints];
    for (int i = 0; i < count; ++i) {
      const double x = xs[i];
      live[i] = false;
      if (beta) {
        if (!(x > 0 && x < 1)) continue;
        const double log_x = std::log(x), log_1mx = std::log1p(-x);
        us[i] = log_x - log_1mx;  // logit x
        log_values[i] = (arm_a.first - 1) * log_x + (arm_a.second - 1) * log_1mx - arm_a.log_beta;
      } else {
        const double z = (x - arm_a.mean) / arm_a.sd;
        us[i] = x;
        log_values[i] = log_normal - 0.5 * z * z;
      }
      live[i] = us[i] >= floor_u;
    }
    GridLogProducts(a, xs, us, live, count, log_values);
    for (int i = 0; i < count; ++i)
      out[i] = live[i] && log_values[i] > -745 ? std::exp(log_values[i]) : 0.0;
  };
  return IntegratePanels(integrand, std::move(cuts), lo, hi, arm_a.sd, beta, arm_a.first,
                         arm_a.second);
}

double ArgmaxProbability::OfExact(int a) const {
  const std::vector<int>& contenders = Contenders();
  const double competitor_floor = a == top1_ ? q_top2_ : q_top1_;
  const Arm& arm_a = RegionEnds(a);
  const double lo = std::max(arm_a.q_lo, competitor_floor);
  const double hi = arm_a.q_hi;
  if (!(lo < hi)) return 0.0;
  // The arms that matter on [lo, hi], identical posteriors merged into one factor F^n.
  std::vector<int> active;
  active.reserve(contenders.size());
  for (int j : contenders)
    if (j != a && TailAbove(j, lo) > skip_per_arm_) active.push_back(j);
  std::sort(active.begin(), active.end(), [&](int x, int y) {
    return std::tie(arms_[x].first, arms_[x].second) < std::tie(arms_[y].first, arms_[y].second);
  });
  std::vector<std::pair<int, int>> factors;  // (arm, power)
  for (int j : active) {
    if (!factors.empty() && arms_[factors.back().first].first == arms_[j].first &&
        arms_[factors.back().first].second == arms_[j].second) {
      ++factors.back().second;
      continue;
    }
    factors.push_back({j, 1});
  }
  std::vector<double> cuts;  // as in Of()
  const double narrow_sd = (hi - lo) / 48;
  for (const auto& [j, power] : factors) {
    const Arm& arm = arms_[j];
    if (arm.sd >= narrow_sd) continue;
    for (double c : {arm.mean - 6 * arm.sd, arm.mean + 6 * arm.sd})
      if (c > lo && c < hi) cuts.push_back(c);
  }
  auto integrand = [&](const double* xs, int count, double* out) {
    evaluations_ += count;
    for (int i = 0; i < count; ++i) {
      double log_product = 0;
      for (const auto& [j, power] : factors) {
        log_product += power * LogCdfExact(j, xs[i]);
        if (!(log_product > -745)) break;  // exp underflows anyway
      }
      out[i] = log_product > -745 ? Pdf(a, xs[i]) * std::exp(log_product) : 0.0;
    }
  };
  return IntegratePanels(integrand, std::move(cuts), lo, hi, arm_a.sd, family_ == Family::kBeta,
                         arm_a.first, arm_a.second);
}

Vector ArgmaxProbability::All() const {
  const int k = size();
  Vector p = Vector::Zero(k);
  if (k == 1) {
    p[0] = 1.0;
    return p;
  }
  if (!exact_) Sync();
  // Non-contenders cannot win with probability above skip + eps: they keep 0. Contenders with
  // the same posterior have the same probability and are computed once.
  std::vector<int> order = Contenders();
  std::sort(order.begin(), order.end(), [&](int x, int y) {
    return std::tie(arms_[x].first, arms_[x].second) < std::tie(arms_[y].first, arms_[y].second);
  });
  std::vector<int> distinct;
  for (size_t i = 0; i < order.size(); ++i) {
    const int a = order[i];
    if (i > 0 && arms_[a].first == arms_[order[i - 1]].first &&
        arms_[a].second == arms_[order[i - 1]].second)
      continue;
    distinct.push_back(a);
  }
  // On the grid, every distinct contender at once (SharedIntegrals); the others (the exact
  // evaluation, arms without a curve, Beta densities unbounded at an end) one by one.
  std::vector<int> shared, alone;
  for (int a : distinct) {
    const Arm& arm = arms_[a];
    const bool singular = family_ == Family::kBeta && (arm.first < 1 || arm.second < 1);
    (!exact_ && arm.has_curve && arm.in_grid && !singular ? shared : alone).push_back(a);
  }
  if (shared.size() < 2) alone.insert(alone.end(), shared.begin(), shared.end()), shared.clear();
  int64_t evaluations = 0;
  for (int a : alone) {
    p[a] = Of(a);
    evaluations += evaluations_;
  }
  if (!shared.empty()) {
    const Vector q = SharedIntegrals(shared);
    evaluations += evaluations_;
    for (size_t c = 0; c < shared.size(); ++c) p[shared[c]] = q[static_cast<Eigen::Index>(c)];
  }
  for (size_t i = 1; i < order.size(); ++i) {
    const int a = order[i], b = order[i - 1];
    if (arms_[a].first == arms_[b].first && arms_[a].second == arms_[b].second) p[a] = p[b];
  }
  evaluations_ = evaluations;
  return p;
}

Vector ArgmaxProbability::SharedIntegrals(const std::vector<int>& arms) const {
  // P(a) for each arm a of `arms` (in the grid, with a curve, a density bounded on its
  // region), as one vector-valued integral: at each node S(u) = Σ_j log F_j(u) over every arm
  // once from the grid, then per arm exp(log f_a(x) + S(u) - log F_a(u)), log F_a from arm a's
  // own cell (the integer coefficients the grid holds for it, as doubles). Each arm's integral
  // is taken over the union of the arms' regions (see the header): outside its own region its
  // integrand is at most its own density beyond Q(eps) or Q(1 - eps), or below a competitor's
  // Q(eps) where the product is at most eps, so the wider range only adds true probability
  // mass and every bound of Of() holds. Nodes where arm a's density lies outside its cells
  // (below or above its zone: at most kZoneTail of its mass) add nothing for it.
  evaluations_ = 0;
  const int m = static_cast<int>(arms.size());
  Prepare();
  double lo = INFINITY, hi = -INFINITY;
  for (int a : arms) {
    const double competitor_floor = a == top1_ ? q_top2_ : q_top1_;
    const Arm& arm = RegionEnds(a);
    lo = std::min(lo, std::max(arm.q_lo, competitor_floor));
    hi = std::max(hi, arm.q_hi);
  }
  Vector p = Vector::Zero(m);
  if (!(lo < hi)) return p;
  const bool beta = family_ == Family::kBeta;
  // Panels: competitors much narrower than the range get their central range (mean -+ 6 sd) as
  // panels of their own (as in Of()); then a panel is halved while it is wider than 6 sd of the
  // narrowest arm whose density (mean -+ 8 sd) reaches it, so that every panel resolves every
  // density it holds.
  std::vector<double> cuts = {lo, hi};
  const double narrow_sd = (hi - lo) / 48;
  for (const Arm& arm : arms_) {
    if (arm.sd >= narrow_sd || arm.sd <= 0) continue;
    for (double c : {arm.mean - 6 * arm.sd, arm.mean + 6 * arm.sd})
      if (c > lo && c < hi) cuts.push_back(c);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::vector<double> panels;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    std::vector<std::pair<double, double>> pending = {{cuts[i], cuts[i + 1]}};
    while (!pending.empty()) {
      const auto [l, r] = pending.back();
      pending.pop_back();
      double sd = INFINITY;
      for (int a : arms) {
        const Arm& arm = arms_[a];
        if (arm.mean + 6 * arm.sd > l && arm.mean - 6 * arm.sd < r) sd = std::min(sd, arm.sd);
      }
      if (r - l > 6 * sd && static_cast<int>(panels.size()) < 4096) {
        pending.push_back({0.5 * (l + r), r});
        pending.push_back({l, 0.5 * (l + r)});
      } else {
        panels.push_back(l);
      }
    }
  }
  panels.push_back(hi);
  // The arms' lowest cells: below the highest one (E1, arm e1) the others' product is 0 for
  // everyone but e1, for whom the bound is the second highest (E2).
  double e1 = -INFINITY, e2 = -INFINITY;
  int e1_arm = -1;
  if (!lower_ends_.empty()) {
    auto it = lower_ends_.rbegin();
    e1 = it->first, e1_arm = it->second;
    if (++it != lower_ends_.rend()) e2 = it->first;
  }
  struct Component {
    const double* coef;  // the arm's cells
    double first_cell, cells, scale;
    double a1, b1,
        log_norm;  // Beta: alpha - 1, beta - 1, -log B; Normal: mean, 1/sd, log(1/(sqrt(2 pi) sd))
    double floor_u;
  };
  std::vector<Component> components(m);
  for (int c = 0; c < m; ++c) {
    const Arm& arm = arms_[arms[c]];
    Component& k = components[c];
    k.coef = arm.curve.coef.data();
    k.first_cell = static_cast<double>(arm.curve.first_cell);
    k.cells = arm.curve.pieces;
    k.scale = std::ldexp(1.0, arm.curve.level);
    if (beta) {
      k.a1 = arm.first - 1, k.b1 = arm.second - 1, k.log_norm = -arm.log_beta;
    } else {
      k.a1 = arm.mean, k.b1 = 1 / arm.sd, k.log_norm = std::log(kInvSqrt2Pi / arm.sd);
    }
    k.floor_u = arms[c] == e1_arm ? e2 : e1;
  }
  constexpr int n = kCurveDegree + 1;
  auto integrand = [&](const double* xs, int count, double* out) {
    evaluations_ += count;
    double us[kKronrodPoints], log_x[kKronrodPoints], log_1mx[kKronrodPoints], sums[kKronrodPoints];
    bool live[kKronrodPoints];
    for (int i = 0; i < count; ++i) {
      const double x = xs[i];
      sums[i] = 0;
      live[i] = false;
      if (beta) {
        if (!(x > 0 && x < 1)) continue;
        log_x[i] = std::log(x), log_1mx[i] = std::log1p(-x);
        us[i] = log_x[i] - log_1mx[i];
      } else {
        us[i] = x;
      }
      live[i] = us[i] >= e2;
    }
    GridLogProducts(-1, xs, us, live, count, sums);
    std::fill(out, out + static_cast<size_t>(count) * m, 0.0);
    // Per node, the arms' own log F in lockstep: independent Clenshaw recurrences, in blocks.
    constexpr int kBlock = 256;
    int which[kBlock];
    const double* coef[kBlock];
    double t[kBlock], b1[kBlock], b2[kBlock];
    for (int i = 0; i < count; ++i) {
      if (!live[i]) continue;
      const double u = us[i];
      for (int c0 = 0; c0 < m; c0 += kBlock) {
        const int c1 = std::min(m, c0 + kBlock);
        int held = 0;
        for (int c = c0; c < c1; ++c) {
          const Component& k = components[c];
          if (u < k.floor_u) continue;
          const double d = u * k.scale;  // in cells of the arm's level, as the grid keys them
          const double cell = std::floor(d);
          if (!(cell >= k.first_cell && cell < k.first_cell + k.cells)) continue;
          which[held] = c;
          coef[held] = k.coef + static_cast<size_t>(cell - k.first_cell) * n;
          t[held] = 2 * (d - cell) - 1;
          ++held;
        }
        // Four recurrences at a time in registers (independent chains); the last group padded
        // with copies of its first, whose results are dropped.
        for (int h0 = 0; h0 < held; h0 += 4) {
          const int h1 = std::min(held - 1, h0 + 1), h2 = std::min(held - 1, h0 + 2),
                    h3 = std::min(held - 1, h0 + 3);
          const double t0 = 2 * t[h0], t1 = 2 * t[h1], t2 = 2 * t[h2], t3 = 2 * t[h3];
          const double *c0 = coef[h0], *c1 = coef[h1], *c2 = coef[h2], *c3 = coef[h3];
          double p0 = 0, p1 = 0, p2 = 0, p3 = 0, q0 = 0, q1 = 0, q2 = 0, q3 = 0;
          for (int j = n - 1; j >= 1; --j) {
            const double r0 = t0 * p0 - q0 + c0[j], r1 = t1 * p1 - q1 + c1[j];
            const double r2 = t2 * p2 - q2 + c2[j], r3 = t3 * p3 - q3 + c3[j];
            q0 = p0, q1 = p1, q2 = p2, q3 = p3;
            p0 = r0, p1 = r1, p2 = r2, p3 = r3;
          }
          b1[h0] = p0, b2[h0] = q0;
          b1[h1] = p1, b2[h1] = q1;
          b1[h2] = p2, b2[h2] = q2;
          b1[h3] = p3, b2[h3] = q3;
        }
        for (int h = 0; h < held; ++h) {
          const int c = which[h];
          const Component& k = components[c];
          const double own = t[h] * b1[h] - b2[h] + coef[h][0];
          double log_density;
          if (beta) {
            log_density = k.a1 * log_x[i] + k.b1 * log_1mx[i] + k.log_norm;
          } else {
            const double z = (xs[i] - k.a1) * k.b1;
            log_density = k.log_norm - 0.5 * z * z;
          }
          const double v = log_density + sums[i] - own;
          out[static_cast<size_t>(i) * m + c] = v > -745 ? std::exp(v) : 0.0;
        }
      }
    }
  };
  const double panel_tol = kQuadratureTolerance / static_cast<double>(panels.size() - 1);
  for (size_t i = 0; i + 1 < panels.size(); ++i)
    GaussKronrodVector(integrand, m, panels[i], panels[i + 1], panel_tol, kMaxDepth, p.data());
  for (int c = 0; c < m; ++c) p[c] = std::clamp(p[c], 0.0, 1.0);
  return p;
}

absl::Status ArgmaxProbabilities::Validate(const ArgmaxPosteriors& posteriors) {
  const Vector& first = posteriors.first;
  const Vector& second = posteriors.second;
  if (first.size() == 0)
    return absl::InvalidArgumentError("posteriors have no action, expected at least one");
  if (first.size() != second.size())
    return absl::InvalidArgumentError(
        absl::StrCat("posteriors have ", first.size(), " first parameters and ", second.size(),
                     " second ones, expected one of each per action"));
  for (Eigen::Index j = 0; j < first.size(); ++j) {
    const bool first_ok = std::isfinite(first[j]) && (!posteriors.beta || first[j] > 0);
    const bool second_ok = std::isfinite(second[j]) && second[j] > 0;
    if (!first_ok || !second_ok)
      return absl::InvalidArgumentError(absl::StrCat(
          "posterior ", j, " is ", posteriors.beta ? "Beta(" : "Normal(", first[j], ", ", second[j],
          "), expected ",
          posteriors.beta ? "finite shapes above 0" : "a finite mean and a finite sd above 0"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Vector> ArgmaxProbabilities::Of(const ArgmaxPosteriors& posteriors) {
  if (absl::Status s = Validate(posteriors); !s.ok()) return s;
  if (!current_.has_value() || beta_ != posteriors.beta ||
      current_->size() != posteriors.first.size()) {
    beta_ = posteriors.beta;
    current_.emplace(beta_ ? ArgmaxProbability::Family::kBeta : ArgmaxProbability::Family::kNormal,
                     posteriors.first, posteriors.second);
  } else {
    for (int j = 0; j < current_->size(); ++j)
      current_->Set(j, posteriors.first[j], posteriors.second[j]);  // unchanged ones keep
  }
  return current_->All();
}

}  // namespace bandit
