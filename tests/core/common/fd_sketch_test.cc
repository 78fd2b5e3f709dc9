// The Frequent Directions sketch's products: a Select's candidates multiplied with their shared
// terms taken once (TimesAll) against each candidate multiplied alone (Times).
#include "core/common/fd_sketch.h"

#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "core/rng.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

// A sketch of `rows` random rows over [0, d) (fewer than its buffer: no shrink), and a per-slot
// vector to take dot products with.
FdSketch Filled(int d, int sketch_size, int rows, Rng& rng, std::vector<double>* by_slot) {
  FdSketch sketch(d, sketch_size, 1.0);
  for (int t = 0; t < rows; ++t) {
    CoalescedTerms x;
    for (int k = 0; k < 6; ++k) {
      const uint32_t i = static_cast<uint32_t>(rng.UniformInt(d));
      if (std::find(x.index.begin(), x.index.end(), i) != x.index.end()) continue;
      x.index.push_back(i);
      x.value.push_back(rng.Normal());
    }
    FdSketch::Row row;
    EXPECT_TRUE(sketch.Prepare(x, 1.0, &row).ok());
    EXPECT_FALSE(sketch.Append(x, 1.0, row));
  }
  by_slot->assign(sketch.slots(), 0.0);
  for (size_t s = 1; s < sketch.slots(); ++s) (*by_slot)[s] = rng.Normal();
  return sketch;
}

void ExpectTimesAllIsTimes(const FdSketch& sketch, const std::vector<SparseVector>& xs,
                           const std::vector<double>& by_slot) {
  const int rows = sketch.rows();
  std::vector<double> ys(xs.size() * rows), dots(xs.size());
  sketch.TimesAll(xs, by_slot.data(), ys.data(), dots.data());
  for (size_t i = 0; i < xs.size(); ++i) {
    std::vector<double> y(rows);
    const double dot = sketch.Times(xs[i].index.data(), xs[i].value.data(), xs[i].size(),
                                    by_slot.data(), y.data());
    EXPECT_NEAR(dots[i], dot, 1e-12 * (1 + std::fabs(dot))) << i;
    for (int r = 0; r < rows; ++r)
      EXPECT_NEAR(ys[i * rows + r], y[r], 1e-12 * (1 + std::fabs(y[r]))) << i << " row " << r;
  }
}

TEST(FdSketch, TimesAllTakesSharedTermsOnceAndEqualsTimes) {
  Rng rng(4);
  std::vector<double> by_slot;
  const int d = 64;
  const FdSketch sketch = Filled(d, 8, 11, rng, &by_slot);
  // Candidates of 30 terms: every third position shared (a context's terms), the rest each
  // candidate's own; an index may repeat, and unseen coordinates appear.
  std::vector<SparseVector> xs(5);
  for (int k = 0; k < 30; ++k) {
    const bool shared = k % 3 == 0;
    const uint32_t index = static_cast<uint32_t>(rng.UniformInt(d));
    const double value = rng.Normal();
    for (auto& x : xs) {
      x.index.push_back(shared ? index : static_cast<uint32_t>(rng.UniformInt(d)));
      x.value.push_back(shared ? value : rng.Normal());
    }
  }
  ExpectTimesAllIsTimes(sketch, xs, by_slot);
  // Candidates of different lengths share nothing by position: each is multiplied alone.
  xs[2].index.push_back(3);
  xs[2].value.push_back(0.5);
  ExpectTimesAllIsTimes(sketch, xs, by_slot);
  // A single candidate, and an empty one among others.
  ExpectTimesAllIsTimes(sketch, {xs[0]}, by_slot);
  ExpectTimesAllIsTimes(sketch, {xs[0], SparseVector{}}, by_slot);
}

}  // namespace BANDIT_UNITY_ID
}  // namespace bandit
