// Sparse vectors of the diagonal-covariance policies: Coalescer and DiagonalScorer against a slow
// exact form (an ordered map summing repeats in the vector's order), with and without repeated
// indices, and after refused inputs (the bitmap must be left clean for the next vector).
#include "core/common/sparse.h"

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace bandit {
namespace BANDIT_UNITY_ID {

// The slow exact coalesced form: first-appearance order, each value the sum in vector order.
CoalescedTerms SlowCoalesce(const SparseVector& x) {
  CoalescedTerms out;
  std::map<uint32_t, size_t> position;
  for (size_t k = 0; k < x.index.size(); ++k) {
    auto [it, fresh] = position.emplace(x.index[k], out.index.size());
    if (fresh) {
      out.index.push_back(x.index[k]);
      out.value.push_back(x.value[k]);
    } else {
      out.value[it->second] += x.value[k];
    }
  }
  return out;
}

SparseVector RandomVector(std::mt19937_64& rng, uint32_t dimension, int terms, uint32_t range) {
  SparseVector x;
  std::uniform_int_distribution<uint32_t> index(0, std::min(range, dimension) - 1);
  std::normal_distribution<double> value;
  for (int k = 0; k < terms; ++k) {
    x.index.push_back(index(rng));
    x.value.push_back(value(rng));
  }
  return x;
}

TEST(Coalescer, EqualsTheSlowFormWithAndWithoutRepeats) {
  std::mt19937_64 rng(7);
  for (uint32_t dimension : {1u, 64u, 1000u, 1u << 18}) {
    Coalescer coalescer(dimension);
    CoalescedTerms out;
    for (int round = 0; round < 200; ++round) {
      // Ranges from "every index repeats" (8 distinct) to "repeats are rare" (the whole space).
      const uint32_t range = round % 3 == 0 ? 8u : round % 3 == 1 ? 300u : dimension;
      const SparseVector x = RandomVector(rng, dimension, 1 + round % 500, range);
      coalescer.Coalesce(x, &out);
      const CoalescedTerms slow = SlowCoalesce(x);
      ASSERT_EQ(out.index, slow.index) << "dimension " << dimension << " round " << round;
      ASSERT_EQ(out.value, slow.value) << "dimension " << dimension << " round " << round;
    }
  }
}

class DiagonalScorerTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kDimension = 1 << 12;
  DiagonalScorerTest() : scorer_(kDimension, 0.0, 1.0) {
    std::mt19937_64 rng(3);
    std::normal_distribution<double> w;
    std::uniform_real_distribution<double> inv(0.1, 2.0);
    for (uint32_t i = 0; i < kDimension; ++i) {
      weight_.push_back(w(rng));
      inv_precision_.push_back(inv(rng));
      Set(i, weight_[i], inv_precision_[i]);
    }
  }
  // Whether single precision holds v to its relative precision: finite and, unless v is 0,
  // normal once rounded.
  static bool Holds(double v) {
    const float f = std::fabs(static_cast<float>(v));
    return f <= std::numeric_limits<float>::max() &&
           (f >= std::numeric_limits<float>::min() || v == 0);
  }
  // Coordinate i's figures as the scorer holds them: both rounded to single precision, or both
  // kept in double when single precision cannot hold one of them.
  std::pair<double, double> Held(uint32_t i) const {
    const double w = weight_[i], p = inv_precision_[i];
    if (!Holds(w) || !Holds(p)) return {w, p};
    return {static_cast<float>(w), static_cast<float>(p)};
  }
  // The double figures the scorer asks for where single precision does not hold them.
  auto figures() const {
    return [this](uint32_t i) { return DiagonalScorer::Figures{weight_[i], inv_precision_[i]}; };
  }
  void Set(uint32_t i, double weight, double inv_precision) {
    weight_[i] = weight;
    inv_precision_[i] = inv_precision;
    scorer_.Set(i, weight, inv_precision);
  }
  // The dense form's figures, summed over the slow coalesced terms in their order.
  void Slow(const SparseVector& x, double* mean, double* var, double* norm2) const {
    const CoalescedTerms t = SlowCoalesce(x);
    *mean = *var = *norm2 = 0;
    for (size_t q = 0; q < t.index.size(); ++q) {
      const auto [w, p] = Held(t.index[q]);
      *mean += t.value[q] * w;
      *var += t.value[q] * t.value[q] * p;
      *norm2 += t.value[q] * t.value[q];
    }
  }
  void ExpectScoresExactly(const SparseVector& x) {
    double mean = -1, var = -1, norm2 = -1, m, v, n2;
    ASSERT_TRUE(scorer_.Score(x, figures(), &mean, &var, &norm2));
    Slow(x, &m, &v, &n2);
    EXPECT_EQ(mean, m);
    EXPECT_EQ(var, v);
    EXPECT_EQ(norm2, n2);
  }
  DiagonalScorer scorer_;
  std::vector<double> weight_, inv_precision_;
};

TEST_F(DiagonalScorerTest, OnePassEqualsTheCoalescedFormBitForBit) {
  std::mt19937_64 rng(11);
  int with_repeats = 0;
  for (int round = 0; round < 300; ++round) {
    const uint32_t range = round % 2 ? kDimension : 64;
    const SparseVector x = RandomVector(rng, kDimension, 1 + round % 200, range);
    if (SlowCoalesce(x).index.size() < x.index.size()) ++with_repeats;
    ExpectScoresExactly(x);
  }
  EXPECT_GT(with_repeats, 100);  // both paths taken
  EXPECT_LT(with_repeats, 290);
  // 0 to 12 repeats in an otherwise distinct vector, at its start, middle and end: a repeat is
  // found by a scan of the terms so far for the first few, then through the table.
  for (int repeats = 0; repeats <= 12; ++repeats) {
    for (int where = 0; where < 3; ++where) {
      SparseVector x;
      for (uint32_t k = 0; k < 200; ++k) {
        x.index.push_back((k * 97 + 11) % kDimension);  // distinct
        x.value.push_back(std::ldexp(1.0 + k, -3));
      }
      for (int r = 0; r < repeats; ++r) {
        const size_t at = where == 0 ? 1 + r : where == 1 ? 100 + r : 199 - r;
        x.index[at] = x.index[r % (where == 0 ? 1 : 50)];
      }
      ExpectScoresExactly(x);
    }
  }
}

TEST_F(DiagonalScorerTest, RefusesBadInputAndScoresTheNextOneExactly) {
  std::mt19937_64 rng(5);
  const SparseVector good = RandomVector(rng, kDimension, 100, kDimension);
  SparseVector bad_index = good;
  bad_index.index[60] = kDimension;  // after 60 terms already marked in the bitmap
  SparseVector not_finite = good;
  not_finite.value[70] = std::numeric_limits<double>::quiet_NaN();
  SparseVector infinite_after_repeat = good;
  infinite_after_repeat.index[10] = infinite_after_repeat.index[5];
  infinite_after_repeat.value[90] = std::numeric_limits<double>::infinity();
  SparseVector bad_index_after_repeat = infinite_after_repeat;
  bad_index_after_repeat.value[90] = 1;
  bad_index_after_repeat.index[80] = kDimension;
  // Finite, but beyond the input bound (IsInputNumber): refused as SparseIsValid refuses it,
  // with and without a repeat before it.
  SparseVector too_large = good;
  too_large.value[50] = 1e200;
  SparseVector too_large_after_repeat = infinite_after_repeat;
  too_large_after_repeat.value[90] = -1e101;
  SparseVector too_large_before_repeat = good;  // in the terms read before the repeat
  too_large_before_repeat.value[3] = 2e100;
  too_large_before_repeat.index[10] = too_large_before_repeat.index[5];
  SparseVector mismatched = good;
  mismatched.value.pop_back();
  for (const SparseVector* x : {&bad_index, &not_finite, &infinite_after_repeat,
                                &bad_index_after_repeat, &too_large, &too_large_after_repeat,
                                &too_large_before_repeat, &mismatched}) {
    double mean = 7, var = 7, norm2 = 7;
    EXPECT_FALSE(scorer_.Score(*x, figures(), &mean, &var, &norm2));
    EXPECT_EQ(mean, 7);  // nothing written
    EXPECT_FALSE(SparseIsValid(*x, kDimension));
    EXPECT_FALSE(CheckSparse("x", *x, kDimension).ok());
    // Marks left in the bitmap would make the next vector's first terms look repeated: the
    // coalesced form (which shares the bitmap) would then lose or misplace them.
    CoalescedTerms out;
    scorer_.Coalesce(good, &out);
    const CoalescedTerms slow = SlowCoalesce(good);
    EXPECT_EQ(out.index, slow.index);
    EXPECT_EQ(out.value, slow.value);
    ExpectScoresExactly(good);
  }
  EXPECT_TRUE(SparseIsValid(good, kDimension));
  // The input bound itself is accepted, with and without a repeat, and scored exactly.
  SparseVector at_bound = good;
  at_bound.value[20] = 1e100;
  at_bound.value[40] = -1e100;
  SparseVector at_bound_repeat = at_bound;
  at_bound_repeat.index[60] = at_bound_repeat.index[30];
  for (const SparseVector* x : {&at_bound, &at_bound_repeat}) {
    EXPECT_TRUE(SparseIsValid(*x, kDimension));
    ExpectScoresExactly(*x);
  }
}

// Figures that single precision cannot hold (beyond FLT_MAX, subnormal or flushed to 0 in
// float) are scored with the caller's double figures, exactly, on both paths (one pass and
// coalesced); set back to ordinary figures, the coordinate is held in single precision again.
TEST_F(DiagonalScorerTest, FiguresBeyondSinglePrecisionScoreInDouble) {
  EXPECT_EQ(scorer_.wide_count(), 0);
  const int64_t narrow_bytes = scorer_.bytes();
  const double fmax = std::numeric_limits<float>::max();
  const double fmin = std::numeric_limits<float>::min();
  // weight, inverse precision: each out of single precision's range in a different way, and
  // the edge cases that it still holds (FLT_MAX and FLT_MIN themselves, zero).
  const std::vector<std::pair<double, double>> extreme = {
      {1e39, 1.0},  {-3 * fmax, 0.5}, {1e-39, 1.0},   {0.5, 1e-300}, {0.25, 1e45},
      {fmax, fmin}, {0.0, 1.0},       {-fmin, 1e-3}};
  std::vector<uint32_t> coords;
  for (size_t q = 0; q < extreme.size(); ++q) {
    const uint32_t i = static_cast<uint32_t>(37 * q + 5);
    coords.push_back(i);
    Set(i, extreme[q].first, extreme[q].second);
  }
  EXPECT_EQ(scorer_.wide_count(), 5);
  EXPECT_EQ(scorer_.bytes(), narrow_bytes);  // their double figures come from the caller
  std::mt19937_64 rng(13);
  for (int round = 0; round < 40; ++round) {
    SparseVector x = RandomVector(rng, kDimension, 30, round % 2 ? kDimension : 400);
    x.index[round % 30] = coords[round % coords.size()];  // every figure met, at every place
    x.index[(round + 7) % 30] = coords[(round + 3) % coords.size()];
    ExpectScoresExactly(x);
    double mean, var;
    CoalescedTerms terms = SlowCoalesce(x);
    scorer_.Score(terms, figures(), &mean, &var);
    double m, v, n2;
    Slow(x, &m, &v, &n2);
    EXPECT_EQ(mean, m);
    EXPECT_EQ(var, v);
  }
  for (uint32_t i : coords) Set(i, 0.5, 0.5);
  EXPECT_EQ(scorer_.wide_count(), 0);
  for (int round = 0; round < 10; ++round)
    ExpectScoresExactly(RandomVector(rng, kDimension, 50, 400));
}

// The single-precision figures against the double formula: within the bound the class states,
// a relative 2^-24 of the sum of the terms' magnitudes (plus the double sums' own rounding).
TEST_F(DiagonalScorerTest, SinglePrecisionWithinItsStatedBound) {
  std::mt19937_64 rng(17);
  int differ = 0;
  for (int round = 0; round < 200; ++round) {
    const SparseVector x = RandomVector(rng, kDimension, 1 + round % 400, kDimension);
    double mean, var, norm2;
    ASSERT_TRUE(scorer_.Score(x, figures(), &mean, &var, &norm2));
    const CoalescedTerms t = SlowCoalesce(x);
    double m = 0, v = 0, abs_m = 0;
    for (size_t q = 0; q < t.index.size(); ++q) {
      m += t.value[q] * weight_[t.index[q]];
      abs_m += std::fabs(t.value[q] * weight_[t.index[q]]);
      v += t.value[q] * t.value[q] * inv_precision_[t.index[q]];
    }
    const double u = std::ldexp(1.0, -24), sums = 1e-12;
    EXPECT_LE(std::fabs(mean - m), u * abs_m + sums * abs_m) << round;
    EXPECT_LE(std::fabs(var - v), u * v + sums * v) << round;
    differ += mean != m;
  }
  EXPECT_GT(differ, 150) << "single precision should be visible in the sums";
}

}  // namespace
}  // namespace bandit
