// LinUCB with a diagonal covariance, checked against a slow exact implementation of its formula
// over dense vectors written here, and against full LinUCB where the two must agree.
#include "core/classic/linucb_diagonal.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "core/classic/linucb.h"
#include "core/registry.h"
#include "core/rng.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

bandit::v1::PolicyConfig Config(int d, double lambda, double alpha, bool diagonal = true) {
  bandit::v1::PolicyConfig c;
  c.mutable_linucb()->set_dimension(d);
  c.mutable_linucb()->set_lambda(lambda);
  c.mutable_linucb()->set_alpha(alpha);
  if (diagonal) c.mutable_linucb()->set_covariance(bandit::v1::COVARIANCE_DIAGONAL);
  return c;
}

std::unique_ptr<Policy> Make(const bandit::v1::PolicyConfig& c) {
  auto p = CreatePolicy(c, 1);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? std::move(*p) : nullptr;
}

Vector Dense(const SparseVector& x, int d) {
  Vector v = Vector::Zero(d);
  for (size_t k = 0; k < x.size(); ++k) v[x.index[k]] += x.value[k];
  return v;
}

// A sparse vector of `terms` terms over [0, d), with repeated indices (as hashed features
// collide): every third term reuses the index two terms back.
SparseVector RandomSparse(Rng& rng, int d, int terms) {
  SparseVector x;
  for (int k = 0; k < terms; ++k) {
    const uint32_t i = (k % 3 == 2) ? x.index[k - 2] : static_cast<uint32_t>(rng.UniformInt(d));
    x.index.push_back(i);
    x.value.push_back(rng.Normal());
  }
  return x;
}

// The diagonal formula over dense vectors, every coordinate visited:
//   a = lambda 1 + sum x.^2, b = sum r x, score = x'(b./a) + alpha sqrt(sum x.^2 ./ a).
struct SlowDiagonal {
  Vector a, b;
  double alpha;
  SlowDiagonal(int d, double lambda, double alpha_)
      : a(Vector::Constant(d, lambda)), b(Vector::Zero(d)), alpha(alpha_) {}
  int Select(const std::vector<Vector>& xs, std::vector<double>* scores) const {
    int best = -1;
    double best_ucb = 0;
    scores->clear();
    for (size_t i = 0; i < xs.size(); ++i) {
      double mean = 0, var = 0;
      for (Eigen::Index j = 0; j < a.size(); ++j) {
        mean += xs[i][j] * b[j] / a[j];
        var += xs[i][j] * xs[i][j] / a[j];
      }
      const double ucb = mean + alpha * std::sqrt(var);
      scores->push_back(ucb);
      if (best < 0 || ucb > best_ucb) {
        best = static_cast<int>(i);
        best_ucb = ucb;
      }
    }
    return best;
  }
  void Update(const Vector& x, double r) {
    for (Eigen::Index j = 0; j < a.size(); ++j) {
      a[j] += x[j] * x[j];
      b[j] += r * x[j];
    }
  }
};

TEST(LinUcbDiagonal, FactoryBoundsAndForm) {
  auto p = Make(Config(1 << 18, 1.0, 1.0));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->name(), "linucb");
  EXPECT_TRUE(p->TakesSparse());
  EXPECT_NE(dynamic_cast<LinUcbDiagonal*>(p.get()), nullptr);
  // State O(d): a and b (8 bytes each per coordinate), theta and 1/a beside them for scoring
  // (single precision: 8 bytes per coordinate), the sparse inputs' coalescing bitmap (1 bit per
  // coordinate), the update count.
  EXPECT_EQ(p->StateBytes(), (int64_t{1} << 18) * (16 + 8) + (int64_t{1} << 18) / 8 + 8);
  // The full form keeps its bound and says what to use beyond it.
  auto full = CreatePolicy(Config(1 << 18, 1.0, 1.0, false), 1);
  ASSERT_EQ(full.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(full.status().message().find("COVARIANCE_DIAGONAL"), std::string::npos)
      << full.status();
  auto too_big = CreatePolicy(Config(LinUcbDiagonal::kMaxDimension + 1, 1.0, 1.0), 1);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument);
  auto bad = Config(4, 1.0, 1.0);
  bad.mutable_linucb()->set_covariance(static_cast<bandit::v1::Covariance>(7));
  EXPECT_EQ(CreatePolicy(bad, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(Make(Config(4, 1.0, 1.0, false))->TakesSparse());
}

// Same data through the policy (sparse vectors with repeated indices, and dense vectors) and
// through the slow formula: the same decisions, bit-identical state, scores within the bound of
// the policy's single-precision scoring figures (theta_i and 1/a_i rounded to float, each
// product and sum in double: a relative 2^-24 of sum_i |x_i theta_i| in the mean and of the
// variance, so at most alpha sqrt(var) 2^-25 in the width), plus the double sums' rounding.
// The decisions agree exactly: no two arms of this seeded data score within that bound.
TEST(LinUcbDiagonal, MatchesSlowDiagonalFormula) {
  const int d = 64, arms = 8;
  const double lambda = 0.5, alpha = 0.8;
  auto sparse_p = Make(Config(d, lambda, alpha));
  auto dense_p = Make(Config(d, lambda, alpha));
  auto& sp = dynamic_cast<LinUcbDiagonal&>(*sparse_p);
  auto& dp = dynamic_cast<LinUcbDiagonal&>(*dense_p);
  SlowDiagonal slow(d, lambda, alpha);
  Rng rng(7);
  Vector w = Vector::Zero(d);
  for (int j = 0; j < d; ++j) w[j] = rng.Normal() * 0.5;
  for (int t = 0; t < 300; ++t) {
    std::vector<SparseVector> xs;
    std::vector<Vector> dense;
    for (int i = 0; i < arms; ++i) {
      xs.push_back(RandomSparse(rng, d, 9));
      dense.push_back(Dense(xs.back(), d));
    }
    SelectContext sc;
    sc.sparse_candidates = xs;
    sc.want_scores = true;
    auto ds = sp.Select(sc);
    ASSERT_TRUE(ds.ok()) << ds.status();
    SelectContext dc;
    dc.candidates = dense;
    dc.want_scores = true;
    auto dd = dp.Select(dc);
    ASSERT_TRUE(dd.ok()) << dd.status();
    std::vector<double> scores;
    const int arm = slow.Select(dense, &scores);
    ASSERT_EQ(ds->arm, arm) << "round " << t;
    ASSERT_EQ(dd->arm, arm) << "round " << t;
    for (int i = 0; i < arms; ++i) {
      double abs_mean = 0, var = 0;
      for (int j = 0; j < d; ++j) {
        abs_mean += std::abs(dense[i][j] * slow.b[j] / slow.a[j]);
        var += dense[i][j] * dense[i][j] / slow.a[j];
      }
      const double bound = std::ldexp(1.0, -24) * (abs_mean + alpha * std::sqrt(var)) +
                           1e-12 * (1 + std::abs(scores[i]));
      EXPECT_NEAR(ds->scores[i], scores[i], bound);
      EXPECT_NEAR(dd->scores[i], scores[i], bound);
    }
    const double r = dense[arm].dot(w) + 0.1 * rng.Normal();
    Observation so;
    so.sparse_features = xs[arm];
    so.reward = r;
    ASSERT_TRUE(sp.Update(so).ok());
    Observation dobs;
    dobs.features = dense[arm];
    dobs.reward = r;
    ASSERT_TRUE(dp.Update(dobs).ok());
    slow.Update(dense[arm], r);
  }
  // Per coordinate the same additions in the same order: identical bits.
  EXPECT_EQ(sp.a_diagonal(), slow.a);
  EXPECT_EQ(sp.b(), slow.b);
  EXPECT_EQ(dp.a_diagonal(), slow.a);
  EXPECT_EQ(dp.b(), slow.b);
}

// With one-hot candidates A is diagonal, so the approximation is the paper's LinUCB exactly.
TEST(LinUcbDiagonal, EqualsFullLinUcbOnOneHotFeatures) {
  const int d = 12;
  auto full = Make(Config(d, 1.0, 1.0, false));
  auto diag = Make(Config(d, 1.0, 1.0));
  Rng rng(3);
  std::vector<Vector> xs(d, Vector::Zero(d));
  for (int i = 0; i < d; ++i) xs[i][i] = 1.0 + 0.1 * i;
  for (int t = 0; t < 200; ++t) {
    SelectContext ctx;
    ctx.candidates = xs;
    auto a = full->Select(ctx);
    auto b = diag->Select(ctx);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->arm, b->arm) << "round " << t;
    Observation o;
    o.features = xs[a->arm];
    o.reward = (a->arm % 3 == 0 ? 1.0 : 0.0) + 0.1 * rng.Normal();
    ASSERT_TRUE(full->Update(o).ok());
    ASSERT_TRUE(diag->Update(o).ok());
  }
  EXPECT_TRUE(full->Weights().isApprox(diag->Weights(), 1e-12));
}

// Restore(Save()) continues exactly; a bad sparse input changes nothing.
TEST(LinUcbDiagonal, ExactResumeAndValidateBeforeMutate) {
  const int d = 1 << 12;
  auto p = Make(Config(d, 1.0, 1.0));
  Rng rng(11);
  auto round = [&](Policy& q, Rng& r) {
    std::vector<SparseVector> xs;
    for (int i = 0; i < 5; ++i) xs.push_back(RandomSparse(r, d, 12));
    SelectContext ctx;
    ctx.sparse_candidates = xs;
    auto dec = q.Select(ctx);
    EXPECT_TRUE(dec.ok());
    Observation o;
    o.sparse_features = xs[dec->arm];
    o.reward = r.Normal();
    EXPECT_TRUE(q.Update(o).ok());
    return dec->arm;
  };
  for (int t = 0; t < 50; ++t) round(*p, rng);
  bandit::v1::PolicyState saved;
  p->Save(&saved);
  auto q = Make(Config(d, 1.0, 1.0));
  ASSERT_TRUE(q->Restore(saved).ok());
  Rng r1(5), r2(5);
  for (int t = 0; t < 50; ++t) ASSERT_EQ(round(*p, r1), round(*q, r2));
  bandit::v1::PolicyState a, b;
  p->Save(&a);
  q->Save(&b);
  EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());

  // Bad inputs: INVALID_ARGUMENT and the state unchanged.
  SparseVector out_of_range{{3, static_cast<uint32_t>(d)}, {1.0, 1.0}};
  SparseVector nan{{3, 4}, {1.0, std::numeric_limits<double>::quiet_NaN()}};
  SparseVector ragged{{3, 4}, {1.0}};
  for (const SparseVector& bad : {out_of_range, nan, ragged}) {
    std::vector<SparseVector> xs = {RandomSparse(rng, d, 4), bad};
    SelectContext ctx;
    ctx.sparse_candidates = xs;
    EXPECT_EQ(p->Select(ctx).status().code(), absl::StatusCode::kInvalidArgument);
    Observation o;
    o.sparse_features = bad;
    o.reward = 1;
    EXPECT_EQ(p->Update(o).code(), absl::StatusCode::kInvalidArgument);
  }
  Observation inf_reward;
  inf_reward.sparse_features = RandomSparse(rng, d, 4);
  inf_reward.reward = std::numeric_limits<double>::infinity();
  EXPECT_EQ(p->Update(inf_reward).code(), absl::StatusCode::kInvalidArgument);
  bandit::v1::PolicyState after;
  p->Save(&after);
  EXPECT_EQ(after.SerializeAsString(), a.SerializeAsString());
  // A full-matrix state is not a diagonal one.
  auto full = Make(Config(8, 1.0, 1.0, false));
  bandit::v1::PolicyState full_state;
  full->Save(&full_state);
  EXPECT_EQ(Make(Config(8, 1.0, 1.0))->Restore(full_state).code(),
            absl::StatusCode::kInvalidArgument);
}

// Rewards of 1e60 drive theta far beyond single precision's range on the coordinates they
// touch: those figures are scored in double (core/common/sparse.h), so the scores stay finite
// and within the stated bound of the slow formula, and a restored twin scores to the same bits.
TEST(LinUcbDiagonal, FiguresBeyondSinglePrecisionScoreAndResumeExactly) {
  const int d = 32;
  const double lambda = 1.0, alpha = 0.5;
  auto p = Make(Config(d, lambda, alpha));
  SlowDiagonal slow(d, lambda, alpha);
  Rng rng(23);
  std::vector<SparseVector> xs;
  std::vector<Vector> dense;
  for (int i = 0; i < 6; ++i) {
    xs.push_back(RandomSparse(rng, d, 5));
    dense.push_back(Dense(xs.back(), d));
  }
  for (int t = 0; t < 30; ++t) {
    Observation o;
    o.sparse_features = xs[t % 6];
    o.reward = t % 6 == 2 ? 1e60 : rng.Normal();
    ASSERT_TRUE(p->Update(o).ok());
    slow.Update(dense[t % 6], o.reward);
  }
  SelectContext ctx;
  ctx.sparse_candidates = xs;
  ctx.want_scores = true;
  auto dec = p->Select(ctx);
  ASSERT_TRUE(dec.ok()) << dec.status();
  std::vector<double> scores;
  EXPECT_EQ(dec->arm, slow.Select(dense, &scores));
  for (size_t i = 0; i < xs.size(); ++i) {
    ASSERT_TRUE(std::isfinite(dec->scores[i])) << i;
    double abs_mean = 0, var = 0;
    for (int j = 0; j < d; ++j) {
      abs_mean += std::abs(dense[i][j] * slow.b[j] / slow.a[j]);
      var += dense[i][j] * dense[i][j] / slow.a[j];
    }
    EXPECT_NEAR(dec->scores[i], scores[i],
                std::ldexp(1.0, -24) * (abs_mean + alpha * std::sqrt(var)) +
                    1e-12 * std::abs(scores[i]));
  }
  EXPECT_GT(std::abs(scores[2]), 1e50);  // the arm whose coordinates left single precision
  bandit::v1::PolicyState saved;
  p->Save(&saved);
  auto q = Make(Config(d, lambda, alpha));
  ASSERT_TRUE(q->Restore(saved).ok());
  auto again = q->Select(ctx);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->scores, dec->scores);
}

}  // namespace
}  // namespace bandit
