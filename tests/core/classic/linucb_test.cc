#include "core/classic/linucb.h"

#include <cmath>

#include <gtest/gtest.h>

#include "core/registry.h"
#include "core/rng.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

bandit::v1::PolicyConfig Config(int d, double lambda = 1.0, double alpha = 1.0) {
  bandit::v1::PolicyConfig c;
  c.mutable_linucb()->set_dimension(d);
  c.mutable_linucb()->set_lambda(lambda);
  c.mutable_linucb()->set_alpha(alpha);
  return c;
}

std::unique_ptr<Policy> Make(const bandit::v1::PolicyConfig& c, uint64_t seed = 1) {
  auto p = CreatePolicy(c, seed);
  EXPECT_TRUE(p.ok()) << p.status();
  return std::move(*p);
}

Vector RandomVector(Rng& rng, int d) {
  Vector x(d);
  for (int i = 0; i < d; ++i) x[i] = rng.Normal();
  return x;
}

TEST(LinUcb, FactoryAndConfigValidation) {
  auto p = Make(Config(3));
  EXPECT_EQ(p->name(), "linucb");
  EXPECT_EQ(p->context_kind(), ContextKind::kCandidates);
  auto code = [](const bandit::v1::PolicyConfig& c) { return CreatePolicy(c, 1).status().code(); };
  EXPECT_EQ(code(Config(0)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Config(-2)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Config(3, 0.0)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Config(3, 1.0, -1.0)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Config(3, std::nan(""))), absl::StatusCode::kInvalidArgument);
  auto with_arms = Config(3);
  with_arms.set_num_arms(4);
  EXPECT_EQ(code(with_arms), absl::StatusCode::kInvalidArgument);
  // Defaults: lambda = 1, alpha = 1.
  bandit::v1::PolicyConfig dflt;
  dflt.mutable_linucb()->set_dimension(2);
  auto q = Make(dflt);
  auto* lin = dynamic_cast<LinUcb*>(q.get());
  ASSERT_NE(lin, nullptr);
  EXPECT_TRUE(lin->a_inverse().isApprox(Matrix::Identity(2, 2)));
}

// theta equals the ridge solution (lambda I + X'X)^{-1} X'r computed by a direct solve over all
// data, and the Sherman-Morrison A^{-1} equals the direct inverse.
TEST(LinUcb, MatchesDirectRidgeSolution) {
  const int d = 6;
  const double lambda = 0.7;
  auto p = Make(Config(d, lambda, 0.5));
  auto* lin = dynamic_cast<LinUcb*>(p.get());
  Rng rng(11);
  const Vector w = RandomVector(rng, d);
  Matrix a = lambda * Matrix::Identity(d, d);
  Vector b = Vector::Zero(d);
  for (int t = 0; t < 2000; ++t) {
    Observation obs;
    obs.features = RandomVector(rng, d);
    obs.reward = obs.features.dot(w) + 0.1 * rng.Normal();
    obs.direct = (t % 2 == 0);
    ASSERT_TRUE(p->Update(obs).ok());
    a += obs.features * obs.features.transpose();
    b += obs.reward * obs.features;
  }
  const Vector ridge = a.ldlt().solve(b);
  EXPECT_LT((lin->theta() - ridge).norm(), 1e-9 * (1 + ridge.norm()));
  const Matrix inv = a.inverse();
  EXPECT_LT((lin->a_inverse() - inv).norm(), 1e-10);
  const Vector x = RandomVector(rng, d);
  EXPECT_NEAR(*lin->EstimatedMean(x), x.dot(ridge), 1e-9);
  EXPECT_FALSE(lin->EstimatedMean(Vector::Zero(d + 1)).has_value());
  EXPECT_LT((ridge - w).norm(), 0.05);  // the data identify w
}

TEST(LinUcb, ScoresAreUcbAndArgmaxWithLowestIndexTies) {
  const int d = 3;
  const double alpha = 2.0;
  auto p = Make(Config(d, 1.0, alpha));
  Rng rng(5);
  Matrix a = Matrix::Identity(d, d);
  Vector b = Vector::Zero(d);
  for (int t = 0; t < 20; ++t) {
    Observation obs;
    obs.features = RandomVector(rng, d);
    obs.reward = rng.Uniform();
    ASSERT_TRUE(p->Update(obs).ok());
    a += obs.features * obs.features.transpose();
    b += obs.reward * obs.features;
  }
  const Vector theta = a.ldlt().solve(b);
  std::vector<Vector> cands;
  for (int i = 0; i < 5; ++i) cands.push_back(RandomVector(rng, d));
  cands.push_back(cands[2]);  // duplicate of 2: a tie that index 2 must win
  SelectContext ctx;
  ctx.candidates = cands;
  ctx.want_scores = true;
  auto dec = p->Select(ctx);
  ASSERT_TRUE(dec.ok()) << dec.status();
  ASSERT_EQ(dec->scores.size(), 6);
  EXPECT_EQ(dec->score_kind, bandit::v1::UPPER_CONFIDENCE_BOUND);
  Vector expect(6), means(6);
  for (int i = 0; i < 6; ++i) {
    means[i] = cands[i].dot(theta);
    expect[i] = means[i] + alpha * std::sqrt(cands[i].dot(a.ldlt().solve(cands[i])));
    EXPECT_NEAR(dec->scores[i], expect[i], 1e-10);
  }
  int best;
  expect.maxCoeff(&best);
  EXPECT_EQ(dec->arm, best);
  EXPECT_EQ(dec->propensity, 1.0);
  EXPECT_NEAR(dec->estimated_gap, means.maxCoeff() - means[best], 1e-10);

  // Exact ties: all-zero theta and identity A -> equal scores for equal-norm candidates.
  auto q = Make(Config(2));
  std::vector<Vector> same = {Vector::Unit(2, 1), Vector::Unit(2, 0), -Vector::Unit(2, 0)};
  SelectContext c2;
  c2.candidates = same;
  auto d2 = q->Select(c2);
  ASSERT_TRUE(d2.ok());
  EXPECT_EQ(d2->arm, 0);
}

TEST(LinUcb, RejectsBadInputWithoutChange) {
  const int d = 3;
  auto p = Make(Config(d));
  Observation good;
  good.features = Vector::Ones(d);
  good.reward = 1.0;
  ASSERT_TRUE(p->Update(good).ok());
  bandit::v1::PolicyState before, after;
  p->Save(&before);

  SelectContext ctx;
  auto empty = p->Select(ctx);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<Vector> cands = {Vector::Ones(d), Vector::Ones(d + 1)};
  ctx.candidates = cands;
  auto bad_dim = p->Select(ctx);
  EXPECT_EQ(bad_dim.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_dim.status().message().find("candidates[1]"), std::string::npos)
      << bad_dim.status();
  cands[1] = Vector::Ones(d);
  cands[1][2] = std::numeric_limits<double>::infinity();
  auto bad_inf = p->Select(ctx);
  EXPECT_EQ(bad_inf.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_inf.status().message().find("candidates[1]"), std::string::npos);

  Observation obs = good;
  obs.reward = std::nan("");
  EXPECT_EQ(p->Update(obs).code(), absl::StatusCode::kInvalidArgument);
  obs.reward = 1.0;
  obs.features = Vector::Ones(d - 1);
  EXPECT_EQ(p->Update(obs).code(), absl::StatusCode::kInvalidArgument);
  obs.features = Vector::Ones(d);
  obs.features[0] = std::nan("");
  EXPECT_EQ(p->Update(obs).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p->AddArm(bandit::v1::ArmSpec()).code(), absl::StatusCode::kFailedPrecondition);
  p->Save(&after);
  EXPECT_EQ(before.SerializeAsString(), after.SerializeAsString());

  // Restore rejects a state of the wrong shape and stays unchanged.
  auto other = Make(Config(d + 1));
  bandit::v1::PolicyState wrong;
  other->Save(&wrong);
  EXPECT_EQ(p->Restore(wrong).code(), absl::StatusCode::kInvalidArgument);
  p->Save(&after);
  EXPECT_EQ(before.SerializeAsString(), after.SerializeAsString());
}

// Environment: 10 random candidates per round, reward x'w + noise.
struct Env {
  explicit Env(int d, uint64_t seed) : rng(seed), w(d) {
    for (int i = 0; i < d; ++i) w[i] = rng.Normal();
    w.normalize();
  }
  std::vector<Vector> Candidates(int n) {
    std::vector<Vector> c;
    for (int i = 0; i < n; ++i) c.push_back(RandomVector(rng, static_cast<int>(w.size())) / 3.0);
    return c;
  }
  Rng rng;
  Vector w;
};

int Step(Policy& p, Env& env) {
  auto cands = env.Candidates(10);
  SelectContext ctx;
  ctx.candidates = cands;
  auto d = p.Select(ctx);
  EXPECT_TRUE(d.ok());
  Observation obs;
  obs.features = cands[d->arm];
  obs.reward = obs.features.dot(env.w) + 0.1 * env.rng.Normal();
  EXPECT_TRUE(p.Update(obs).ok());
  return d->arm;
}

TEST(LinUcb, SaveRestoreGivesIdenticalContinuation) {
  auto a = Make(Config(4, 1.0, 0.8), 3);
  Env env(4, 21);
  for (int i = 0; i < 300; ++i) Step(*a, env);
  bandit::v1::PolicyState state;
  a->Save(&state);
  auto b = Make(Config(4, 1.0, 0.8), 999);
  ASSERT_TRUE(b->Restore(state).ok());
  Env copy = env;
  std::vector<int> xs, ys;
  for (int i = 0; i < 1000; ++i) xs.push_back(Step(*a, env));
  for (int i = 0; i < 1000; ++i) ys.push_back(Step(*b, copy));
  EXPECT_EQ(xs, ys);
}

TEST(LinUcb, StateDoesNotGrow) {
  auto p = Make(Config(5));
  Env env(5, 2);
  auto size_after = [&](int rounds) {
    for (int i = 0; i < rounds; ++i) Step(*p, env);
    bandit::v1::PolicyState s;
    p->Save(&s);
    return std::make_pair(p->StateBytes(), s.ByteSizeLong());
  };
  const auto small = size_after(1000);
  const auto large = size_after(99000);  // 10^5 rounds in total
  EXPECT_EQ(small.first, large.first);
  // Serialized size: fixed-width doubles and tensors; only the varint round counters may differ
  // by a few bytes.
  EXPECT_LE(large.second, small.second + 4);
}

// Learns: after 3000 rounds it picks the best of 10 candidates far more often than chance.
TEST(LinUcb, LearnsTheBestCandidate) {
  for (uint64_t seed : {1, 2, 3}) {
    auto p = Make(Config(5, 1.0, 0.5), seed);
    Env env(5, 100 + seed);
    int best_hits = 0;
    for (int t = 0; t < 3000; ++t) {
      auto cands = env.Candidates(10);
      SelectContext ctx;
      ctx.candidates = cands;
      auto d = p->Select(ctx);
      ASSERT_TRUE(d.ok());
      int best = 0;
      for (int i = 1; i < 10; ++i)
        if (cands[i].dot(env.w) > cands[best].dot(env.w)) best = i;
      if (t >= 2000 && d->arm == best) ++best_hits;
      Observation obs;
      obs.features = cands[d->arm];
      obs.reward = obs.features.dot(env.w) + 0.1 * env.rng.Normal();
      ASSERT_TRUE(p->Update(obs).ok());
    }
    EXPECT_GT(best_hits, 800) << "seed " << seed;  // chance would be ~100 of 1000
  }
}

}  // namespace
}  // namespace bandit
