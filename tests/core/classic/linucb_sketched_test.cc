// LinUCB with a Frequent Directions sketch of its covariance, checked against full LinUCB where
// the two must agree (before the sketch's first shrink), against Frequent Directions' own
// guarantee computed from the exact design matrix, and against the closed-form ridge scores of
// the sketched matrix (dense Eigen solves written here).
#include "core/classic/linucb_sketched.h"

#include <cmath>
#include <limits>

#include <Eigen/Eigenvalues>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/classic/linucb.h"
#include "core/registry.h"
#include "core/rng.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using ::testing::HasSubstr;

bandit::v1::PolicyConfig Config(int d, double lambda, double alpha, int sketch_size) {
  bandit::v1::PolicyConfig c;
  c.mutable_linucb()->set_dimension(d);
  c.mutable_linucb()->set_lambda(lambda);
  c.mutable_linucb()->set_alpha(alpha);
  if (sketch_size > 0) {
    c.mutable_linucb()->set_covariance(bandit::v1::COVARIANCE_SKETCHED);
    c.mutable_linucb()->set_sketch_size(sketch_size);
  }
  return c;
}

std::unique_ptr<Policy> Make(const bandit::v1::PolicyConfig& c) {
  auto p = CreatePolicy(c, 1);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? std::move(*p) : nullptr;
}

// Values on a grid of 1/8 in [-2, 2]: exact in single precision, so the sketch holds the rows
// exactly as given and a comparison with full LinUCB sees only the formulas' rounding.
double GridValue(Rng& rng) { return (static_cast<int>(rng.UniformInt(33)) - 16) / 8.0; }

SparseVector RandomSparse(Rng& rng, int d, int terms) {
  SparseVector x;
  for (int k = 0; k < terms; ++k) {
    // Every third term repeats the index two back, as hashed features collide.
    x.index.push_back(k % 3 == 2 ? x.index[k - 2] : static_cast<uint32_t>(rng.UniformInt(d)));
    x.value.push_back(GridValue(rng));
  }
  return x;
}

Vector Dense(const SparseVector& x, int d) {
  Vector v = Vector::Zero(d);
  for (size_t k = 0; k < x.size(); ++k) v[x.index[k]] += x.value[k];
  return v;
}

Vector Scores(Policy& p, const std::vector<Vector>& xs) {
  SelectContext ctx;
  ctx.candidates = xs;
  ctx.want_scores = true;
  auto d = p.Select(ctx);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? d->scores : Vector();
}

Vector SparseScores(Policy& p, const std::vector<SparseVector>& xs) {
  SelectContext ctx;
  ctx.sparse_candidates = xs;
  ctx.want_scores = true;
  auto d = p.Select(ctx);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? d->scores : Vector();
}

Observation Chosen(const SparseVector& x, double reward) {
  Observation o;
  o.sparse_features = x;
  o.reward = reward;
  return o;
}

// Until the buffer of 2l rows first fills, B = X: the policy is LinUCB itself.
TEST(LinUcbSketched, IsLinUcbUntilTheFirstShrink) {
  const int d = 10, l = 4;
  auto sketched = Make(Config(d, 0.5, 0.7, l));
  auto full = Make(Config(d, 0.5, 0.7, 0));
  Rng rng(3);
  for (int t = 0; t < 2 * l - 1; ++t) {
    std::vector<SparseVector> xs;
    std::vector<Vector> dense;
    for (int i = 0; i < 5; ++i) {
      xs.push_back(RandomSparse(rng, d, 4));
      dense.push_back(Dense(xs.back(), d));
    }
    const Vector a = SparseScores(*sketched, xs), b = Scores(*full, dense);
    ASSERT_EQ(a.size(), b.size());
    for (int i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-9 * (1 + std::fabs(b[i])));
    EXPECT_TRUE(sketched->Weights().isApprox(full->Weights(), 1e-9) ||
                full->Weights().norm() == 0);
    const double r = GridValue(rng);
    ASSERT_TRUE(sketched->Update(Chosen(xs[t % 5], r)).ok());
    Observation o;
    o.features = dense[t % 5];
    o.reward = r;
    ASSERT_TRUE(full->Update(o).ok());
  }
  auto* s = dynamic_cast<LinUcbSketched*>(sketched.get());
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->sketch().shrinkage(), 0);
  EXPECT_EQ(s->sketch().regularizer(), 0.5);
}

// A sketch larger than the space it sketches (l > d) loses nothing in its shrinks: B'B has rank
// at most d < l, so delta = s_l^2 = 0 and B'B = X'X. Over many shrinks the policy stays LinUCB,
// to the single precision the sketch holds its rows in (relative 1e-5 of each score here).
TEST(LinUcbSketched, IsLinUcbWhenTheSketchIsLargerThanTheSpace) {
  const int d = 6, l = d + 1;
  auto sketched = Make(Config(d, 1.0, 0.8, l));
  auto full = Make(Config(d, 1.0, 0.8, 0));
  Rng rng(21);
  for (int t = 0; t < 200; ++t) {
    std::vector<SparseVector> xs;
    std::vector<Vector> dense;
    for (int i = 0; i < 4; ++i) {
      xs.push_back(RandomSparse(rng, d, 3));
      dense.push_back(Dense(xs.back(), d));
    }
    const Vector a = SparseScores(*sketched, xs), b = Scores(*full, dense);
    for (int i = 0; i < a.size(); ++i)
      ASSERT_NEAR(a[i], b[i], 1e-5 * (1 + std::fabs(b[i]))) << "round " << t << " candidate " << i;
    const double r = GridValue(rng);
    ASSERT_TRUE(sketched->Update(Chosen(xs[t % 4], r)).ok());
    Observation o;
    o.features = dense[t % 4];
    o.reward = r;
    ASSERT_TRUE(full->Update(o).ok());
  }
  const auto& s = dynamic_cast<const LinUcbSketched&>(*sketched);
  EXPECT_GE(s.sketch().shrinks(), 10);
  EXPECT_LT(s.sketch().shrinkage(), 1e-9);
}

// A run long enough for many shrinks, with the design matrix X and b = X'r kept here.
struct LongRun {
  std::unique_ptr<Policy> policy;
  Matrix x;
  Vector b;
};

LongRun RunSketched(int d, int l, int rounds, double lambda, uint64_t seed) {
  LongRun run{Make(Config(d, lambda, 0.6, l)), Matrix::Zero(rounds, d), Vector::Zero(d)};
  Rng rng(seed);
  for (int t = 0; t < rounds; ++t) {
    // Correlated rows: a few directions carry most of the energy, as hashed features that
    // co-occur do.
    SparseVector x = RandomSparse(rng, d, 3);
    x.index.push_back(static_cast<uint32_t>(t % 2));
    x.value.push_back(1.0);
    const double r = GridValue(rng);
    EXPECT_TRUE(run.policy->Update(Chosen(x, r)).ok());
    run.x.row(t) = Dense(x, d).transpose();
    run.b += r * Dense(x, d);
  }
  return run;
}

// Ghashami, Liberty, Phillips, Woodruff 2016, Theorem 3.1: 0 <= X'X - B'B <= delta_sum I and
// delta_sum <= ||X - X_k||_F^2 / (l - k) for every k < l.
TEST(LinUcbSketched, KeepsFrequentDirectionsGuarantee) {
  const int d = 24, l = 5;
  for (uint64_t seed : {1, 2, 3}) {
    LongRun run = RunSketched(d, l, 300, 1.0, seed);
    const auto& s = dynamic_cast<const LinUcbSketched&>(*run.policy);
    const Matrix b = s.sketch().Rows();
    const Matrix gap = run.x.transpose() * run.x - b.transpose() * b;
    Eigen::SelfAdjointEigenSolver<Matrix> eig(gap);
    const double scale = (run.x.transpose() * run.x).norm();
    EXPECT_GE(eig.eigenvalues().minCoeff(), -1e-9 * scale) << "seed " << seed;
    EXPECT_LE(eig.eigenvalues().maxCoeff(), s.sketch().shrinkage() + 1e-9 * scale)
        << "seed " << seed;
    EXPECT_GT(s.sketch().shrinkage(), 0);
    EXPECT_EQ(s.sketch().regularizer(), 1.0 + s.sketch().shrinkage() / 2);
    const Vector sv2 =
        Eigen::JacobiSVD<Matrix>(run.x).singularValues().array().square().matrix();  // desc
    for (int k = 0; k < l; ++k) {
      const double tail = sv2.tail(sv2.size() - k).sum();
      EXPECT_LE(s.sketch().shrinkage(), tail / (l - k) * (1 + 1e-9))
          << "k " << k << " seed " << seed;
    }
  }
}

// After shrinks the scores are SOFUL's: theta = (cI + B'B)^{-1} X'r, width alpha ||x|| in the
// same inverse, with B the sketch the policy holds and c its regularizer.
TEST(LinUcbSketched, ScoresAreTheSketchedRidgeSolution) {
  const int d = 16, l = 3;
  LongRun run = RunSketched(d, l, 101, 2.0, 9);
  const auto& s = dynamic_cast<const LinUcbSketched&>(*run.policy);
  const Matrix b = s.sketch().Rows();
  const Matrix a = b.transpose() * b + s.sketch().regularizer() * Matrix::Identity(d, d);
  const Eigen::LDLT<Matrix> solve(a);
  const Vector theta = solve.solve(run.b);
  EXPECT_TRUE(run.policy->Weights().isApprox(theta, 1e-6));
  Rng rng(4);
  std::vector<SparseVector> xs;
  for (int i = 0; i < 6; ++i) xs.push_back(RandomSparse(rng, d, 5));
  const Vector scores = SparseScores(*run.policy, xs);
  for (int i = 0; i < 6; ++i) {
    const Vector x = Dense(xs[i], d);
    const double expected = x.dot(theta) + 0.6 * std::sqrt(x.dot(solve.solve(x)));
    EXPECT_NEAR(scores[i], expected, 1e-6 * (1 + std::fabs(expected))) << i;
  }
}

TEST(LinUcbSketched, SparseRepeatsAddUpAsTheDenseForm) {
  const int d = 12;
  LongRun run = RunSketched(d, 3, 40, 1.0, 5);
  Rng rng(8);
  std::vector<SparseVector> xs;
  std::vector<Vector> dense;
  for (int i = 0; i < 4; ++i) {
    xs.push_back(RandomSparse(rng, d, 7));
    dense.push_back(Dense(xs.back(), d));
  }
  const Vector a = SparseScores(*run.policy, xs), b = Scores(*run.policy, dense);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(a[i], b[i], 1e-12 * (1 + std::fabs(b[i])));
}

// A restored policy scores and learns to the same bits as the one saved, across shrinks.
TEST(LinUcbSketched, RestoreContinuesBitForBit) {
  const int d = 20, l = 4;
  LongRun run = RunSketched(d, l, 37, 1.0, 11);  // mid-buffer: rows in use and shrinks behind
  bandit::v1::PolicyState state;
  run.policy->Save(&state);
  auto restored = Make(Config(d, 1.0, 0.6, l));
  ASSERT_TRUE(restored->Restore(state).ok());
  Rng rng(12);
  for (int t = 0; t < 30; ++t) {
    std::vector<SparseVector> xs = {RandomSparse(rng, d, 4), RandomSparse(rng, d, 4)};
    const Vector a = SparseScores(*run.policy, xs), b = SparseScores(*restored, xs);
    ASSERT_EQ(a, b) << "round " << t;
    const double r = GridValue(rng);
    ASSERT_TRUE(run.policy->Update(Chosen(xs[0], r)).ok());
    ASSERT_TRUE(restored->Update(Chosen(xs[0], r)).ok());
  }
  bandit::v1::PolicyState a, b;
  run.policy->Save(&a);
  restored->Save(&b);
  EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
  // Another sketch size's state is refused by name.
  auto other = Make(Config(d, 1.0, 0.6, l + 1));
  EXPECT_THAT(std::string(other->Restore(state).message()), HasSubstr("sketch_size"));
}

// Scores prepared under the shared lock are the Select's own; prepared before an update they are
// not used.
TEST(LinUcbSketched, PreparedScoresAreUsedOnlyWhileCurrent) {
  const int d = 12;
  LongRun run = RunSketched(d, 3, 20, 1.0, 6);
  Rng rng(2);
  std::vector<SparseVector> xs = {RandomSparse(rng, d, 4), RandomSparse(rng, d, 4)};
  SelectContext ctx;
  ctx.sparse_candidates = xs;
  ctx.want_scores = true;
  ASSERT_TRUE(run.policy->PreparesSelect());
  auto prepared = run.policy->PrepareSelect(ctx);
  ASSERT_NE(prepared, nullptr);
  const Vector plain = SparseScores(*run.policy, xs);
  ctx.prepared = prepared.get();
  auto with = run.policy->Select(ctx);
  ASSERT_TRUE(with.ok());
  EXPECT_EQ(with->scores, plain);
  ASSERT_TRUE(run.policy->Update(Chosen(xs[1], 1.0)).ok());
  auto stale = run.policy->Select(ctx);
  ASSERT_TRUE(stale.ok());
  EXPECT_EQ(stale->scores, SparseScores(*run.policy, xs));
  EXPECT_NE(stale->scores, plain);
}

TEST(LinUcbSketched, BadInputIsRefusedAndChangesNothing) {
  const int d = 8;
  LongRun run = RunSketched(d, 2, 9, 1.0, 7);
  bandit::v1::PolicyState before;
  run.policy->Save(&before);
  SparseVector out_of_range{{3, 8}, {1.0, 1.0}};
  SparseVector nan{{1}, {std::numeric_limits<double>::quiet_NaN()}};
  SparseVector huge{{1, 2}, {1.0, 1e39}};  // beyond single precision
  for (const SparseVector& x : {out_of_range, nan, huge}) {
    const absl::Status s = run.policy->Update(Chosen(x, 1.0));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("features"));
  }
  EXPECT_EQ(run.policy->Update(Chosen(SparseVector{{1}, {1.0}}, NAN)).code(),
            absl::StatusCode::kInvalidArgument);
  SelectContext ctx;
  const std::vector<SparseVector> candidates = {SparseVector{{1}, {1.0}}, out_of_range};
  ctx.sparse_candidates = candidates;
  const auto d1 = run.policy->Select(ctx);
  EXPECT_EQ(d1.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(d1.status().message()), HasSubstr("candidates[1]"));
  EXPECT_EQ(run.policy->PrepareSelect(ctx), nullptr);
  bandit::v1::PolicyState after;
  run.policy->Save(&after);
  EXPECT_EQ(before.SerializeAsString(), after.SerializeAsString());
}

TEST(LinUcbSketched, ConfigIsValidated) {
  const auto refused = [](const bandit::v1::PolicyConfig& c, absl::string_view what) {
    const auto p = CreatePolicy(c, 1);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(p.status().message()), HasSubstr(what));
  };
  refused(Config(8, 1, 1, 1), "linucb.sketch_size is 1, expected 2..512");
  refused(Config(8, 1, 1, 513), "linucb.sketch_size is 513");
  bandit::v1::PolicyConfig c = Config(8, 1, 1, 0);
  c.mutable_linucb()->set_sketch_size(8);
  refused(c, "only with covariance: COVARIANCE_SKETCHED");
  c.mutable_linucb()->set_covariance(bandit::v1::COVARIANCE_DIAGONAL);
  refused(c, "only with covariance: COVARIANCE_SKETCHED");
  // Beyond the full form's bound, the sketched form takes the space.
  EXPECT_TRUE(CreatePolicy(Config(1 << 18, 1, 1, 16), 1).ok());
}

}  // namespace BANDIT_UNITY_ID
}  // namespace bandit
