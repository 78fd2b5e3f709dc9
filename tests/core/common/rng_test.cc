// The hand-written distributions of Rng against their exact distribution functions
// (Kolmogorov-Smirnov), Lemire's bounded integers against uniformity, and save/restore.
// Seeds are fixed: each test is deterministic, and a wrong formula (a shifted Marsaglia-Tsang
// constant, a missing boost for shape < 1, a biased bound) moves the statistic far past the
// threshold.
#include "core/rng.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>
#include <vector>

namespace bandit {
namespace BANDIT_UNITY_ID {

constexpr int kDraws = 20000;
// Kolmogorov-Smirnov critical value at significance 1e-6: sqrt(-ln(alpha / 2) / (2 n)).
const double kCritical = std::sqrt(-std::log(0.5e-6) / (2.0 * kDraws));

// sup_x |F_n(x) - F(x)| of the empirical distribution of `draw` against `cdf`.
double KolmogorovSmirnov(const std::function<double()>& draw,
                         const std::function<double(double)>& cdf) {
  std::vector<double> x(kDraws);
  for (double& v : x) v = draw();
  std::sort(x.begin(), x.end());
  double d = 0;
  for (int i = 0; i < kDraws; ++i) {
    const double f = cdf(x[i]);
    d = std::max({d, f - static_cast<double>(i) / kDraws, static_cast<double>(i + 1) / kDraws - f});
  }
  return d;
}

TEST(Rng, NormalMatchesTheStandardNormal) {
  Rng rng(1);
  const double d = KolmogorovSmirnov([&] { return rng.Normal(); },
                                     [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); });
  EXPECT_LT(d, kCritical);
}

TEST(Rng, UniformAndUniformOpenAreUniform) {
  Rng rng(2);
  EXPECT_LT(KolmogorovSmirnov([&] { return rng.Uniform(); }, [](double x) { return x; }),
            kCritical);
  EXPECT_LT(KolmogorovSmirnov([&] { return rng.UniformOpen(); }, [](double x) { return x; }),
            kCritical);
  for (int i = 0; i < 100000; ++i) {
    const double u = rng.UniformOpen();
    ASSERT_GT(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
}

// Gamma(k, 1) for integer k has CDF 1 - e^-x sum_{j<k} x^j / j!; Gamma(1/2, 1) is Z^2 / 2 with
// CDF erf(sqrt(x)). Shapes below 1 take the boost branch, the others Marsaglia-Tsang directly.
TEST(Rng, GammaMatchesItsDistributionFunction) {
  const auto integer_shape = [](int k) {
    return [k](double x) {
      if (x <= 0) return 0.0;
      double term = 1, sum = 0;
      for (int j = 0; j < k; ++j) {
        sum += term;
        term *= x / (j + 1);
      }
      return 1.0 - std::exp(-x) * sum;
    };
  };
  Rng rng(3);
  for (int k : {1, 2, 3, 7}) {
    SCOPED_TRACE(k);
    EXPECT_LT(KolmogorovSmirnov([&] { return rng.Gamma(k); }, integer_shape(k)), kCritical);
  }
  EXPECT_LT(KolmogorovSmirnov([&] { return rng.Gamma(0.5); },
                              [](double x) { return x <= 0 ? 0.0 : std::erf(std::sqrt(x)); }),
            kCritical);
}

// Beta(1, 1) is uniform, Beta(2, 1) has CDF x^2, Beta(1, 3) 1 - (1 - x)^3, and Beta(1/2, 1/2) is
// the arcsine law (2 / pi) asin(sqrt(x)).
TEST(Rng, BetaMatchesItsDistributionFunction) {
  Rng rng(4);
  struct Case {
    double a, b;
    std::function<double(double)> cdf;
  };
  const std::vector<Case> cases = {
      {1, 1, [](double x) { return x; }},
      {2, 1, [](double x) { return x * x; }},
      {1, 3, [](double x) { return 1 - std::pow(1 - x, 3); }},
      {0.5, 0.5, [](double x) { return 2 / std::numbers::pi * std::asin(std::sqrt(x)); }},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(testing::Message() << "Beta(" << c.a << ", " << c.b << ")");
    EXPECT_LT(KolmogorovSmirnov([&] { return rng.Beta(c.a, c.b); }, c.cdf), kCritical);
  }
}

// Moments of a shape far from the closed forms above: mean a / (a + b), variance
// ab / ((a + b)^2 (a + b + 1)).
TEST(Rng, BetaMomentsForAnAsymmetricShape) {
  Rng rng(5);
  const double a = 3.5, b = 0.7;
  double sum = 0, sq = 0;
  for (int i = 0; i < kDraws; ++i) {
    const double x = rng.Beta(a, b);
    sum += x;
    sq += x * x;
  }
  const double mean = sum / kDraws, var = sq / kDraws - mean * mean;
  const double want_mean = a / (a + b);
  const double want_var = a * b / ((a + b) * (a + b) * (a + b + 1));
  EXPECT_NEAR(mean, want_mean, 6 * std::sqrt(want_var / kDraws));
  EXPECT_NEAR(var, want_var, 0.05 * want_var);
}

// Pearson's chi-square over 7 values (6 degrees of freedom; 35 is far beyond the 1e-5 tail).
TEST(Rng, UniformIntIsUniformAndInRange) {
  Rng rng(6);
  constexpr int kN = 7;
  std::vector<int> counts(kN, 0);
  for (int i = 0; i < 70000; ++i) {
    const uint64_t v = rng.UniformInt(kN);
    ASSERT_LT(v, static_cast<uint64_t>(kN));
    ++counts[v];
  }
  double chi2 = 0;
  for (int c : counts) chi2 += (c - 10000.0) * (c - 10000.0) / 10000.0;
  EXPECT_LT(chi2, 35.0);
  // A bound that is not a power of two near 2^64 exercises the rejection branch.
  const uint64_t big = (uint64_t{1} << 63) + 12345;
  for (int i = 0; i < 1000; ++i) ASSERT_LT(rng.UniformInt(big), big);
}

TEST(Rng, RestoreContinuesTheSameSequenceAndRefusesGarbage) {
  Rng a(7);
  for (int i = 0; i < 10; ++i) a.Normal();
  Rng b(99);
  ASSERT_TRUE(b.Restore(a.Save()).ok());
  for (int i = 0; i < 100; ++i) ASSERT_EQ(a.Gamma(0.3), b.Gamma(0.3));
  EXPECT_EQ(b.Restore("not an engine").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a.NextU64(), b.NextU64());  // a refused restore changed nothing
}

}  // namespace
}  // namespace bandit
