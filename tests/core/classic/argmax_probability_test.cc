#include "core/classic/argmax_probability.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>
#include <vector>

#include <boost/math/special_functions/beta.hpp>
#include <gtest/gtest.h>

#include "core/rng.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using Family = ArgmaxProbability::Family;

// Accuracy the propensity promises against exact references.
constexpr double kExact = 1e-6;

double LogBeta(double a, double b) { return std::lgamma(a) + std::lgamma(b) - std::lgamma(a + b); }

// Closed form for two Beta arms (needs an integer alpha_b): P(X_b > X_a) =
//   Σ_{i=0}^{alpha_b - 1} B(alpha_a + i, beta_a + beta_b) / ((beta_b + i) B(1 + i, beta_b) B(alpha_a, beta_a)).
double BetaBeatsClosedForm(double ab, double bb, double aa, double ba) {
  double p = 0;
  for (int i = 0; i < static_cast<int>(ab); ++i)
    p += std::exp(LogBeta(aa + i, ba + bb) - std::log(bb + i) - LogBeta(1 + i, bb) -
                  LogBeta(aa, ba));
  return p;
}

double Phi(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

Vector Vec(std::initializer_list<double> v) {
  Vector out(v.size());
  int i = 0;
  for (double x : v) out[i++] = x;
  return out;
}

TEST(ArgmaxProbability, TwoBetaArmsMatchTheClosedForm) {
  struct Case {
    const char* what;
    double a0, b0, a1, b1;
  };
  const Case grid[] = {
      {"flat tie", 1, 1, 1, 1},
      {"flat vs one success", 2, 1, 1, 1},
      {"small counts", 3, 2, 2, 3},
      {"peaked tie", 500, 500, 500, 500},
      {"peaked close", 520, 480, 500, 500},
      {"peaked vs flat", 300, 700, 1, 1},
      {"one far ahead", 900, 100, 100, 900},
      {"far ahead, huge counts", 60000, 40000, 40000, 60000},
      {"fractional alpha_0", 3.3, 4.7, 4, 4},
      {"shape below one", 0.5, 0.5, 2, 1},
      {"skewed", 1, 40, 2, 60},
  };
  for (const auto& c : grid) {
    ArgmaxProbability p(Family::kBeta, Vec({c.a0, c.a1}), Vec({c.b0, c.b1}));
    const double exact1 = BetaBeatsClosedForm(c.a1, c.b1, c.a0, c.b0);
    EXPECT_NEAR(p.Of(1), exact1, kExact) << c.what;
    EXPECT_NEAR(p.Of(0), 1 - exact1, kExact) << c.what;
    const Vector all = p.All();
    EXPECT_NEAR(all[1], exact1, kExact) << c.what;
    EXPECT_NEAR(all.sum(), 1.0, 2 * kExact) << c.what;
  }
}

TEST(ArgmaxProbability, TwoNormalArmsMatchTheClosedForm) {
  // P(X_1 > X_0) = Phi((m1 - m0) / sqrt(s0^2 + s1^2)).
  const double grid[][4] = {{0, 1, 0, 1},     {0.98, 0.28, 1.1, 0.47}, {0, 1, 0.01, 0.001},
                            {5, 0.1, 0, 0.1}, {0, 1e-3, 0, 10},        {-3, 2, 4, 0.5}};
  for (const auto& c : grid) {
    ArgmaxProbability p(Family::kNormal, Vec({c[0], c[2]}), Vec({c[1], c[3]}));
    const double exact1 = Phi((c[2] - c[0]) / std::hypot(c[1], c[3]));
    EXPECT_NEAR(p.Of(1), exact1, kExact) << c[0] << " " << c[1] << " " << c[2] << " " << c[3];
    EXPECT_NEAR(p.Of(0), 1 - exact1, kExact);
  }
}

// Against 10^7 joint posterior draws from the sampler the policy uses (core/rng.h, independent
// of the quadrature's Boost functions). A 10^7-draw estimate has standard error up to 1.6e-4
// (at p = 0.5), so it is compared within 4.5 standard errors (plus the 1e-4 the propensity
// promises); the closed-form tests above check the 1e-4 (indeed 1e-6) accuracy itself.
TEST(ArgmaxProbability, MatchesTenMillionPosteriorDraws) {
  struct Case {
    Family family;
    Vector first, second;
  };
  const Case cases[] = {
      // ties, mixed widths, a shape below 1, one arm far behind
      {Family::kBeta, Vec({30, 3, 3, 2.5, 20}), Vec({20, 2, 2, 0.5, 80})},
      {Family::kNormal, Vec({0.98, 1.1, 0.5, 1.0}), Vec({0.28, 0.47, 1.4, 0.05})},  // Gaussian
  };
  const int draws = 10000000;
  Rng rng(20261123);
  for (const auto& c : cases) {
    const int k = static_cast<int>(c.first.size());
    Vector wins = Vector::Zero(k);
    for (int s = 0; s < draws; ++s) {
      int best = 0;
      double best_value = -INFINITY;
      for (int j = 0; j < k; ++j) {
        const double v = c.family == Family::kBeta ? rng.Beta(c.first[j], c.second[j])
                                                   : rng.Normal(c.first[j], c.second[j]);
        if (v > best_value) best = j, best_value = v;
      }
      wins[best] += 1;
    }
    ArgmaxProbability p(c.family, c.first, c.second);
    const Vector all = p.All();
    for (int j = 0; j < k; ++j) {
      const double mc = wins[j] / draws;
      const double se = std::sqrt(std::max(mc * (1 - mc), 1.0 / draws) / draws);
      EXPECT_NEAR(p.Of(j), mc, 1e-4 + 4.5 * se) << "arm " << j << " of " << c.first.transpose();
      // All() integrates every arm on shared nodes, Of() one arm on its own: both within the
      // quadrature's error of the truth.
      EXPECT_NEAR(all[j], mc, 1e-4 + 4.5 * se) << "arm " << j;
      EXPECT_NEAR(all[j], p.Of(j), 1e-7);
    }
    EXPECT_NEAR(all.sum(), 1.0, 1e-6);
  }
}

// Reference for many Beta arms in a few distinct groups: midpoint rule on a fine grid, each
// group's CDF accumulated from its density (no incomplete beta function involved).
TEST(ArgmaxProbability, ThousandBetaArmsMatchABruteForceIntegral) {
  // 600 x Beta(2, 5), 399 x Beta(3, 4), 1 x Beta(30, 20): many ties, one arm ahead.
  const double ga[] = {2, 3, 30}, gb[] = {5, 4, 20};
  const int gn[] = {600, 399, 1};
  Vector first(1000), second(1000);
  int at = 0;
  for (int g = 0; g < 3; ++g)
    for (int i = 0; i < gn[g]; ++i) first[at] = ga[g], second[at++] = gb[g];
  const int n = 400000;
  const double h = 1.0 / n;
  double cdf[3] = {0, 0, 0}, ref[3] = {0, 0, 0};
  for (int i = 0; i < n; ++i) {
    const double x = (i + 0.5) * h;
    double f[3], F[3];
    for (int g = 0; g < 3; ++g) {
      f[g] = std::exp((ga[g] - 1) * std::log(x) + (gb[g] - 1) * std::log1p(-x) -
                      LogBeta(ga[g], gb[g]));
      F[g] = cdf[g] + 0.5 * f[g] * h;  // CDF at the midpoint
    }
    for (int g = 0; g < 3; ++g) {
      double others = 1;
      for (int o = 0; o < 3; ++o) others *= std::pow(F[o], gn[o] - (o == g ? 1 : 0));
      ref[g] += f[g] * others * h;
    }
    for (int g = 0; g < 3; ++g) cdf[g] += f[g] * h;
  }
  ArgmaxProbability p(Family::kBeta, first, second);
  EXPECT_NEAR(p.Of(999), ref[2], 1e-5);
  EXPECT_NEAR(p.Of(0), ref[0], 1e-5);
  EXPECT_NEAR(p.Of(600), ref[1], 1e-5);
  const Vector all = p.All();
  EXPECT_NEAR(all[999], ref[2], 1e-5);
  EXPECT_NEAR(all[5], ref[0], 1e-5);
  EXPECT_NEAR(all[700], ref[1], 1e-5);
  EXPECT_NEAR(all.sum(), 1.0, 1e-5);

  // 1000 flat arms: 1/1000 each by symmetry; their identical cells are built once (a new
  // instance's arms at the prior).
  ArgmaxProbability flat(Family::kBeta, Vector::Ones(1000), Vector::Ones(1000));
  EXPECT_NEAR(flat.Of(17), 1e-3, 1e-7);
  EXPECT_EQ(flat.CurveBuildsForTesting(), 1);
  EXPECT_NEAR(flat.All().sum(), 1.0, 1e-6);
}

// 1000 Gaussian arms with distinct posteriors against a brute-force trapezoid over a fine grid
// (log Π F_j summed once, each arm's factor removed).
TEST(ArgmaxProbability, ThousandNormalArmsMatchABruteForceIntegral) {
  const int k = 1000;
  Vector mean(k), sd(k);
  Rng rng(5);
  for (int j = 0; j < k; ++j) {
    mean[j] = 0.3 + 0.4 * j / k + 0.02 * rng.Normal();
    sd[j] = 0.01 + 0.05 * rng.Uniform();
  }
  const double lo = mean.minCoeff() - 0.4, hi = mean.maxCoeff() + 0.4;
  const int n = 40000;
  const double h = (hi - lo) / n;
  Vector ref = Vector::Zero(k);
  for (int i = 0; i <= n; ++i) {
    const double x = lo + i * h, w = (i == 0 || i == n) ? 0.5 * h : h;
    double log_all = 0;
    Vector logF(k);
    for (int j = 0; j < k; ++j) {
      logF[j] = std::log(std::max(Phi((x - mean[j]) / sd[j]), 1e-300));
      log_all += logF[j];
    }
    if (log_all < -700) continue;
    for (int j = 0; j < k; ++j) {
      const double z = (x - mean[j]) / sd[j];
      ref[j] += w * std::exp(-0.5 * z * z + log_all - logF[j]) / (sd[j] * std::sqrt(2 * M_PI));
    }
  }
  ArgmaxProbability p(Family::kNormal, mean, sd);
  const Vector all = p.All();
  int checked = 0;
  for (int j = 0; j < k; ++j) {
    EXPECT_NEAR(all[j], ref[j], 1e-5) << "arm " << j;
    if (ref[j] > 1e-3) ++checked;
  }
  EXPECT_GE(checked, 3);  // several arms share the win: not a one-arm trivial case
  EXPECT_NEAR(all.sum(), 1.0, 1e-6);
  int leader = 0;
  ref.maxCoeff(&leader);
  EXPECT_NEAR(p.Of(leader), ref[leader], 1e-5);
}

// The shortcuts (the interpolant of the wide factors, the 0/1 zones of the narrow ones) against
// the exact evaluation of every factor at every node, on posteriors shaped like a running
// bandit's: true means 0.3 + 0.4 i / K, pull counts from 0 to 10^5 (log-uniform), many arms
// within reach of the leader. Each arm's probability, and the chosen arm's in the policy's path;
// and every arm's from the fast All().
TEST(ArgmaxProbability, ShortcutsMatchTheExactEvaluation) {
  Rng rng(42);
  for (Family family : {Family::kBeta, Family::kNormal}) {
    for (int k : {2, 10, 100, 300}) {
      for (int trial = 0; trial < 3; ++trial) {
        Vector first(k), second(k);
        for (int i = 0; i < k; ++i) {
          const double mu = 0.3 + 0.4 * i / k;
          const double n = std::floor(std::exp(rng.Uniform() * std::log(1e5)) - 1);
          if (family == Family::kBeta) {
            const double wins = std::clamp(
                std::round(n * mu + rng.Normal() * std::sqrt(n * mu * (1 - mu))), 0.0, n);
            first[i] = 1 + wins;
            second[i] = 1 + n - wins;
          } else {
            const double v = 1 / (1 + n / 0.25);
            first[i] = mu + rng.Normal() * 0.5 / std::sqrt(n + 1);
            second[i] = std::sqrt(v);
          }
        }
        ArgmaxProbability fast(family, first, second);
        ArgmaxProbability exact(family, first, second);
        exact.SetExactForTesting(true);
        const Vector all = exact.All();
        int leader = 0;
        all.maxCoeff(&leader);
        std::vector<int> arms = {leader, 0, k - 1, k / 2};
        for (int r = 0; r < 4; ++r) arms.push_back(static_cast<int>(rng.Uniform() * k) % k);
        for (int a : arms)
          EXPECT_NEAR(fast.Of(a), all[a], 1e-6)
              << (family == Family::kBeta ? "beta" : "normal") << " K=" << k << " arm " << a;
        EXPECT_NEAR(all.sum(), 1.0, 1e-5);
        // Every arm at once on shared nodes (the fast All()) against the exact per-arm one.
        const Vector fast_all = fast.All();
        for (int a = 0; a < k; ++a)
          EXPECT_NEAR(fast_all[a], all[a], 1e-6)
              << (family == Family::kBeta ? "beta" : "normal") << " K=" << k << " arm " << a
              << " (All)";
      }
    }
  }
}

// Set() drops exactly the changed arm's cached data: after a sequence of Sets the result equals
// a fresh object's (bit for bit: the cache is a function of each arm's parameters), an arm set
// to new parameters is rebuilt once when next needed, and one set to its current ones not at all.
TEST(ArgmaxProbability, SetRebuildsOnlyTheChangedArm) {
  for (Family family : {Family::kBeta, Family::kNormal}) {
    const bool beta = family == Family::kBeta;
    Vector first = beta ? Vec({20, 35, 28, 5}) : Vec({0.5, 0.62, 0.58, 0.3});
    Vector second = beta ? Vec({30, 25, 30, 9}) : Vec({0.07, 0.05, 0.06, 0.2});
    ArgmaxProbability cached(family, first, second);
    cached.All();
    const int64_t builds = cached.CurveBuildsForTesting();
    for (int step = 0; step < 20; ++step) {
      const int j = step % 4;
      first[j] += beta ? 1 : 0.01;
      if (beta) second[j] += step % 3;
      cached.Set(j, first[j], second[j]);
      cached.Set((j + 1) % 4, first[(j + 1) % 4], second[(j + 1) % 4]);  // unchanged
      ArgmaxProbability fresh(family, first, second);
      const Vector got = cached.All(), want = fresh.All();
      for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i], want[i]) << "step " << step << " arm " << i;
    }
    // Each Set with new parameters costs one build (the arm's cells on the grid; Normal arms'
    // from the shared log Phi curve).
    EXPECT_EQ(cached.CurveBuildsForTesting() - builds, 20);
  }
}

// The grid's sum Σ_j log F_j is updated by one arm's difference per Set(). After thousands of
// bandit-like updates (one arm's posterior moves per round, sometimes to the same parameters),
// the sums equal a fresh build's bit for bit (integer sums: no drift), and Σ_{j≠a} log F_j read
// from the grid matches the exact CDFs (Boost's ibeta, erfc) wherever the product matters.
TEST(ArgmaxProbability, GridSumsEqualAFreshBuildAfterThousandsOfUpdates) {
  Rng rng(7);
  for (Family family : {Family::kBeta, Family::kNormal}) {
    const bool beta = family == Family::kBeta;
    const int k = 40;
    Vector first(k), second(k), pulls = Vector::Zero(k), sums = Vector::Zero(k);
    auto shape = [&](int i) {
      if (beta) return std::pair<double, double>{1 + sums[i], 1 + pulls[i] - sums[i]};
      const double v = 1 / (1 + pulls[i] / 0.25);
      return std::pair<double, double>{v * sums[i] / 0.25, std::sqrt(v)};
    };
    for (int i = 0; i < k; ++i) std::tie(first[i], second[i]) = shape(i);
    ArgmaxProbability cached(family, first, second);
    for (int round = 0; round < 4000; ++round) {
      // Mostly the better arms, as a bandit would; every 50th round a burst of 200 pulls, so
      // some arms become narrow (sd ~ 1e-3) and their curves move to finer levels.
      const int i = std::min(k - 1, static_cast<int>(k * std::sqrt(rng.Uniform())));
      const double mu = 0.3 + 0.4 * i / k;
      const int n = round % 50 == 0 ? 200 : 1;
      for (int r = 0; r < n; ++r) {
        pulls[i] += 1;
        sums[i] += beta ? (rng.Uniform() < mu ? 1.0 : 0.0) : mu + 0.5 * rng.Normal();
      }
      std::tie(first[i], second[i]) = shape(i);
      cached.Set(i, first[i], second[i]);
      if (round % 7 == 0) cached.Set((i + 3) % k, first[(i + 3) % k], second[(i + 3) % k]);
      if (round % 400 == 0) cached.Of(static_cast<int>(rng.Uniform() * k) % k);  // syncs
    }
    ArgmaxProbability fresh(family, first, second);
    const auto got = cached.GridSnapshotForTesting(), want = fresh.GridSnapshotForTesting();
    // Arms wholly below every region are left out of the grid (some are, here), the same ones
    // as in a fresh build. Below the floor the product of the others is <= eps anyway, so the
    // comparison with the exact CDFs below holds there too.
    EXPECT_GT(cached.DeferredArmsForTesting(), 0);
    EXPECT_EQ(cached.DeferredArmsForTesting(), fresh.DeferredArmsForTesting());
    ASSERT_EQ(got.size(), want.size()) << (beta ? "beta" : "normal");
    for (size_t c = 0; c < got.size(); ++c) {
      EXPECT_EQ(got[c].first, want[c].first) << "cell " << c;
      EXPECT_EQ(got[c].second, want[c].second) << "cell " << c;
    }
    // Σ_{j≠a} log F_j along each arm's central range, against the exact CDFs.
    int compared = 0;
    for (int a = 0; a < k; ++a) {
      const double mean = beta ? first[a] / (first[a] + second[a]) : first[a];
      const double sd = beta ? std::sqrt(first[a] * second[a] /
                                         std::pow(first[a] + second[a], 2) /
                                         (first[a] + second[a] + 1))
                             : second[a];
      for (double z = -4; z <= 4; z += 0.25) {
        const double x = mean + z * sd;
        if (beta && !(x > 0 && x < 1)) continue;
        const double grid = cached.LogProductOfOthersForTesting(a, x);
        EXPECT_EQ(grid, fresh.LogProductOfOthersForTesting(a, x));
        double exact = 0;
        for (int j = 0; j < k; ++j) {
          if (j == a) continue;
          exact += beta ? std::log(boost::math::ibeta(first[j], second[j], x))
                        : std::log(Phi((x - first[j]) / second[j]));
        }
        EXPECT_NEAR(std::exp(grid), std::exp(exact), 1e-9)
            << (beta ? "beta" : "normal") << " arm " << a << " x " << x;
        if (exact > -20) ++compared;
      }
    }
    EXPECT_GT(compared, 200);  // not a comparison of zeros
  }
}

// The arm updated every round (at large t the leader, also the chosen arm) is not needed by its
// own integral: its cells are built once another arm's integral needs them, and it is listed
// once however many rounds pass (no growth), with the result of a fresh build.
TEST(ArgmaxProbability, TheChosenArmUpdatedEveryRoundIsBuiltOnlyWhenAnotherNeedsIt) {
  for (Family family : {Family::kBeta, Family::kNormal}) {
    const bool beta = family == Family::kBeta;
    Vector first = beta ? Vec({200, 35, 28}) : Vec({0.7, 0.62, 0.58});
    Vector second = beta ? Vec({100, 25, 30}) : Vec({0.01, 0.05, 0.06});
    ArgmaxProbability cached(family, first, second);
    cached.Of(0);
    const int64_t builds = cached.CurveBuildsForTesting();
    for (int round = 0; round < 1000; ++round) {
      first[0] += beta ? 1 : 1e-5;
      cached.Set(0, first[0], second[0]);
      cached.Of(0);
    }
    EXPECT_EQ(cached.CurveBuildsForTesting(), builds);
    EXPECT_EQ(cached.PendingArmsForTesting(), 1);
    ArgmaxProbability fresh(family, first, second);
    EXPECT_EQ(cached.Of(1), fresh.Of(1));  // builds arm 0 once
    EXPECT_EQ(cached.CurveBuildsForTesting(), builds + 1);
    EXPECT_EQ(cached.PendingArmsForTesting(), 0);
  }
}

TEST(ArgmaxProbability, SingleArmAndHopelessArms) {
  ArgmaxProbability one(Family::kBeta, Vec({3}), Vec({4}));
  EXPECT_EQ(one.Of(0), 1.0);
  // An arm far below the leader: its probability is below the skip bound (about 1e-8).
  ArgmaxProbability far(Family::kBeta, Vec({5000, 10}), Vec({10, 5000}));
  EXPECT_LT(far.Of(1), 1e-8);
  EXPECT_NEAR(far.Of(0), 1.0, 1e-8);
  const Vector all = far.All();
  EXPECT_EQ(all[1], 0.0);
  EXPECT_NEAR(all[0], 1.0, 1e-8);
}

// A decision log read in order: each call equals a fresh ArgmaxProbability's All() exactly,
// through single-arm changes (Thompson's rounds), several at once, a new arm count and the other
// family (each a rebuild).
TEST(ArgmaxProbabilities, ARunOfPosteriorsEqualsFreshEvaluationsExactly) {
  Rng rng(17);
  ArgmaxProbabilities run;
  ArgmaxPosteriors q{true, Vec({1, 1, 1, 1, 1, 1}), Vec({1, 1, 1, 1, 1, 1})};
  auto check = [&](int step) {
    SCOPED_TRACE(step);
    const absl::StatusOr<Vector> got = run.Of(q);
    ASSERT_TRUE(got.ok()) << got.status();
    const Vector want =
        ArgmaxProbability(q.beta ? Family::kBeta : Family::kNormal, q.first, q.second).All();
    ASSERT_EQ(got->size(), want.size());
    for (int j = 0; j < want.size(); ++j) EXPECT_EQ((*got)[j], want[j]) << "arm " << j;
    EXPECT_NEAR(got->sum(), 1.0, 1e-5);
  };
  for (int step = 0; step < 120; ++step) {
    // Bernoulli rewards on the arm Thompson would choose: one arm changes per step.
    const int arm = static_cast<int>(rng.UniformInt(static_cast<uint64_t>(q.first.size())));
    (rng.Uniform() < 0.3 + 0.08 * arm ? q.first : q.second)[arm] += 1;
    if (step % 40 == 39) q.second[0] += 3, q.first[2] += 2;  // two at once
    check(step);
  }
  q = ArgmaxPosteriors{true, Vec({30, 12, 9}), Vec({20, 14, 9})};  // fewer arms: rebuilt
  check(200);
  q = ArgmaxPosteriors{false, Vec({0.4, 0.45, 0.2}), Vec({0.1, 0.05, 0.3})};  // Normal
  check(201);
  for (int step = 0; step < 30; ++step) {
    const int arm = step % 3;
    q.first[arm] += 0.01 * rng.Normal();
    q.second[arm] *= 0.97;
    check(300 + step);
  }
}

TEST(ArgmaxProbabilities, RefusesPosteriorsOutOfRangeNamingThem) {
  ArgmaxProbabilities run;
  auto refused = [&](const ArgmaxPosteriors& q, const std::string& expected) {
    const absl::StatusOr<Vector> p = run.Of(q);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(p.status().message(), expected);
  };
  refused(ArgmaxPosteriors{true, Vector(), Vector()},
          "posteriors have no action, expected at least one");
  refused(ArgmaxPosteriors{true, Vec({1, 2}), Vec({1})},
          "posteriors have 2 first parameters and 1 second ones, expected one of each per action");
  refused(ArgmaxPosteriors{true, Vec({1, 0}), Vec({1, 1})},
          "posterior 1 is Beta(0, 1), expected finite shapes above 0");
  refused(ArgmaxPosteriors{false, Vec({-3, NAN}), Vec({1, 1})},
          "posterior 1 is Normal(nan, 1), expected a finite mean and a finite sd above 0");
  refused(ArgmaxPosteriors{false, Vec({-3, 1}), Vec({1, INFINITY})},
          "posterior 1 is Normal(1, inf), expected a finite mean and a finite sd above 0");
  // A negative mean is a valid Normal posterior.
  EXPECT_TRUE(run.Of(ArgmaxPosteriors{false, Vec({-3, 1}), Vec({1, 1})}).ok());
}

}  // namespace
}  // namespace bandit
