// GLB-OMD with a Frequent Directions sketch of H_t, checked against the paper's full-matrix
// GLB-OMD where the two must agree (a sketch larger than the space loses nothing in its shrinks),
// projections included, and against the closed form of its own sketched matrix after shrinks.
#include "core/glb/glb_omd_sketched.h"

#include <cmath>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/glb/glb_omd.h"
#include "core/registry.h"
#include "core/rng.h"

namespace bandit::glb {
namespace BANDIT_UNITY_ID {

using ::testing::HasSubstr;

bandit::v1::PolicyConfig Config(int d, double S, int sketch_size) {
  bandit::v1::PolicyConfig c;
  auto* g = c.mutable_glb_omd();
  g->set_dimension(d);
  g->set_s(S);
  g->set_lambda(1.0);
  g->set_radius_multiplier(0.2);
  g->set_max_feature_norm(4.0);
  if (sketch_size > 0) {
    g->set_covariance(bandit::v1::COVARIANCE_SKETCHED);
    g->set_sketch_size(sketch_size);
  }
  return c;
}

std::unique_ptr<Policy> Make(const bandit::v1::PolicyConfig& c) {
  auto p = CreatePolicy(c, 1);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? std::move(*p) : nullptr;
}

SparseVector RandomSparse(Rng& rng, int d, int terms) {
  SparseVector x;
  for (int k = 0; k < terms; ++k) {
    const uint32_t i = (k % 4 == 3) ? x.index[k - 1] : static_cast<uint32_t>(rng.UniformInt(d));
    x.index.push_back(i);
    x.value.push_back(rng.Normal() * 0.3);
  }
  return x;
}

Vector Dense(const SparseVector& x, int d) {
  Vector v = Vector::Zero(d);
  for (size_t k = 0; k < x.size(); ++k) v[x.index[k]] += x.value[k];
  return v;
}

Decision Decide(Policy& p, const std::vector<SparseVector>& xs) {
  SelectContext ctx;
  ctx.sparse_candidates = xs;
  ctx.want_scores = true;
  auto d = p.Select(ctx);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *d : Decision();
}

Decision DecideDense(Policy& p, const std::vector<Vector>& xs) {
  SelectContext ctx;
  ctx.candidates = xs;
  ctx.want_scores = true;
  auto d = p.Select(ctx);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *d : Decision();
}

// With l > d every shrink's delta is 0: the sketched H_t is the paper's, and the policy is
// GLB-OMD, its (28b) projection (taken on many rounds with S = 0.4) included, to the single
// precision the sketch holds its rows in.
TEST(GlbOmdSketched, IsGlbOmdWhenTheSketchIsLargerThanTheSpace) {
  const int d = 6;
  auto sketched = Make(Config(d, 0.4, d + 1));
  auto full = Make(Config(d, 0.4, 0));
  Rng rng(5), env(6);
  int at_the_bound = 0;
  for (int t = 0; t < 300; ++t) {
    std::vector<SparseVector> xs;
    std::vector<Vector> dense;
    for (int i = 0; i < 4; ++i) {
      xs.push_back(RandomSparse(rng, d, 4));
      dense.push_back(Dense(xs.back(), d));
    }
    const Decision a = Decide(*sketched, xs), b = DecideDense(*full, dense);
    for (int i = 0; i < 4; ++i)
      ASSERT_NEAR(a.scores[i], b.scores[i], 1e-5 * (1 + std::fabs(b.scores[i])))
          << "round " << t << " candidate " << i;
    const int arm = b.arm;
    const double reward = env.Bernoulli(0.3 + 0.1 * arm) ? 1.0 : 0.0;
    Observation os, od;
    os.sparse_features = xs[arm];
    os.reward = reward;
    od.features = dense[arm];
    od.reward = reward;
    ASSERT_TRUE(sketched->Update(os).ok()) << t;
    ASSERT_TRUE(full->Update(od).ok()) << t;
    const Vector ws = sketched->Weights(), wf = full->Weights();
    ASSERT_LE((ws - wf).norm(), 1e-5 * (1 + wf.norm())) << "round " << t;
    at_the_bound += std::fabs(wf.norm() - 0.4) < 1e-9;
  }
  EXPECT_GT(at_the_bound, 100);  // the projection was exercised
  const auto& s = dynamic_cast<const GlbOmdSketched&>(*sketched);
  EXPECT_GE(s.sketch().shrinks(), 10);
  EXPECT_LT(s.sketch().shrinkage(), 1e-9);
}

// After shrinks that lose directions (l < d), the Select scores are the closed form over the
// sketched matrix the policy holds: x'theta + beta sqrt(x'(cI + B'B)^{-1}x), theta its
// weights; theta stays in the ball.
TEST(GlbOmdSketched, ScoresAreTheSketchedMatrixsClosedForm) {
  const int d = 30, l = 4;
  auto p = Make(Config(d, 1.0, l));
  Rng rng(8), env(9);
  for (int t = 0; t < 150; ++t) {
    std::vector<SparseVector> xs = {RandomSparse(rng, d, 5), RandomSparse(rng, d, 5)};
    const Decision dec = Decide(*p, xs);
    Observation o;
    o.sparse_features = xs[dec.arm];
    o.reward = env.Bernoulli(0.5) ? 1.0 : 0.0;
    ASSERT_TRUE(p->Update(o).ok());
    ASSERT_LE(p->Weights().norm(), 1.0 + 1e-9);
  }
  const auto& s = dynamic_cast<const GlbOmdSketched&>(*p);
  ASSERT_GT(s.sketch().shrinkage(), 0);
  const Matrix b = s.sketch().Rows();
  const Matrix h = b.transpose() * b + s.sketch().regularizer() * Matrix::Identity(d, d);
  const Eigen::LDLT<Matrix> solve(h);
  std::vector<SparseVector> xs = {RandomSparse(rng, d, 5), RandomSparse(rng, d, 5),
                                  RandomSparse(rng, d, 5)};
  const Decision dec = Decide(*p, xs);
  const Vector theta = p->Weights();
  for (int i = 0; i < 3; ++i) {
    const Vector x = Dense(xs[i], d);
    const double expected = x.dot(theta) + s.Beta() * std::sqrt(x.dot(solve.solve(x)));
    EXPECT_NEAR(dec.scores[i], expected, 1e-9 * (1 + std::fabs(expected))) << i;
  }
}

// A restored policy decides and learns to the same bits as the one saved.
TEST(GlbOmdSketched, RestoreContinuesBitForBit) {
  const int d = 20, l = 3;
  auto a = Make(Config(d, 0.5, l));
  Rng rng(3), env(4);
  const auto play = [&](Policy& p, const std::vector<SparseVector>& xs, double r) {
    const Decision dec = Decide(p, xs);
    Observation o;
    o.sparse_features = xs[dec.arm];
    o.reward = r;
    EXPECT_TRUE(p.Update(o).ok());
    return dec;
  };
  for (int t = 0; t < 41; ++t)
    play(*a, {RandomSparse(rng, d, 4), RandomSparse(rng, d, 4)}, env.Bernoulli(0.4));
  bandit::v1::PolicyState state;
  a->Save(&state);
  auto b = Make(Config(d, 0.5, l));
  ASSERT_TRUE(b->Restore(state).ok());
  for (int t = 0; t < 30; ++t) {
    const std::vector<SparseVector> xs = {RandomSparse(rng, d, 4), RandomSparse(rng, d, 4)};
    const double r = env.Bernoulli(0.4);
    const Decision da = play(*a, xs, r), db = play(*b, xs, r);
    ASSERT_EQ(da.scores, db.scores) << t;
  }
  bandit::v1::PolicyState sa, sb;
  a->Save(&sa);
  b->Save(&sb);
  EXPECT_EQ(sa.SerializeAsString(), sb.SerializeAsString());
}

// Scores prepared under the shared lock are the Select's own; prepared before an update they are
// not used.
TEST(GlbOmdSketched, PreparedScoresAreUsedOnlyWhileCurrent) {
  const int d = 16;
  auto p = Make(Config(d, 1.0, 3));
  Rng rng(12);
  for (int t = 0; t < 20; ++t) {
    Observation o;
    o.sparse_features = RandomSparse(rng, d, 4);
    o.reward = t % 2;
    ASSERT_TRUE(p->Update(o).ok());
  }
  const std::vector<SparseVector> xs = {RandomSparse(rng, d, 4), RandomSparse(rng, d, 4)};
  SelectContext ctx;
  ctx.sparse_candidates = xs;
  ctx.want_scores = true;
  ASSERT_TRUE(p->PreparesSelect());
  auto prepared = p->PrepareSelect(ctx);
  ASSERT_NE(prepared, nullptr);
  const Decision plain = Decide(*p, xs);
  ctx.prepared = prepared.get();
  auto with = p->Select(ctx);
  ASSERT_TRUE(with.ok());
  EXPECT_EQ(with->scores, plain.scores);
  Observation o;
  o.sparse_features = xs[1];
  o.reward = 1;
  ASSERT_TRUE(p->Update(o).ok());
  auto stale = p->Select(ctx);
  ASSERT_TRUE(stale.ok());
  EXPECT_EQ(stale->scores, Decide(*p, xs).scores);
  EXPECT_NE(stale->scores, plain.scores);
}

TEST(GlbOmdSketched, ConfigIsValidated) {
  bandit::v1::PolicyConfig c = Config(8, 1, 0);
  c.mutable_glb_omd()->set_sketch_size(4);
  auto refused = CreatePolicy(c, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("only with covariance: COVARIANCE_SKETCHED"));
  auto small = CreatePolicy(Config(8, 1, 1), 1);
  EXPECT_THAT(std::string(small.status().message()), HasSubstr("glb_omd.sketch_size is 1"));
  EXPECT_TRUE(CreatePolicy(Config(1 << 18, 1, 8), 1).ok());
}

}  // namespace BANDIT_UNITY_ID
}  // namespace bandit::glb
