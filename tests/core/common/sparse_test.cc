// Sparse vectors of the diagonal-covariance policies: Coalescer and DiagonalScorer against a slow
// exact form (an ordered map summing repeats in the vector's order), with and without repeated
// indices, and after refused inputs (the bitmap must be left clean for the next vector).
#include "core/common/sparse.h"

#include <cmath>
#include <limits>
#include <map>
#include <random>
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
      scorer_.Set(i, weight_[i], inv_precision_[i]);
    }
  }
  // The dense form's figures, summed over the slow coalesced terms in their order.
  void Slow(const SparseVector& x, double* mean, double* var, double* norm2) const {
    const CoalescedTerms t = SlowCoalesce(x);
    *mean = *var = *norm2 = 0;
    for (size_t q = 0; q < t.index.size(); ++q) {
      *mean += t.value[q] * weight_[t.index[q]];
      *var += t.value[q] * t.value[q] * inv_precision_[t.index[q]];
      *norm2 += t.value[q] * t.value[q];
    }
  }
  void ExpectScoresExactly(const SparseVector& x) {
    double mean = -1, var = -1, norm2 = -1, m, v, n2;
    ASSERT_TRUE(scorer_.Score(x, &mean, &var, &norm2));
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
  SparseVector mismatched = good;
  mismatched.value.pop_back();
  for (const SparseVector* x : {&bad_index, &not_finite, &infinite_after_repeat, &mismatched}) {
    double mean = 7, var = 7, norm2 = 7;
    EXPECT_FALSE(scorer_.Score(*x, &mean, &var, &norm2));
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
}

}  // namespace
}  // namespace bandit
