#include "core/kernel/bkb.h"

#include <cmath>

#include <gtest/gtest.h>

#include "core/kernel/gp_ucb.h"
#include "core/registry.h"
#include "tests/core/kernel/kernel_testing.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using testing::DenseBkb;
using testing::DenseExact;
using testing::Pull;

bandit::v1::PolicyConfig BkbConfig(const Matrix& X, double q_bar, double bandwidth = 0.3,
                                   double epsilon = 0.5) {
  bandit::v1::PolicyConfig c;
  auto* b = c.mutable_bkb();
  b->mutable_kernel()->set_kind(bandit::v1::KernelSpec::GAUSSIAN);
  b->mutable_kernel()->set_bandwidth(bandwidth);
  b->set_q_bar(q_bar);
  b->set_epsilon(epsilon);
  b->set_lambda(0.05);
  b->set_noise(0.1);
  testing::FillArms(X, &c);
  return c;
}

std::unique_ptr<Policy> MustCreate(const bandit::v1::PolicyConfig& c, uint64_t seed) {
  auto p = CreatePolicy(c, seed);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *std::move(p) : nullptr;
}

Observation Obs(const std::string& id, double r) {
  Observation o;
  o.arm_id = id;
  o.reward = r;
  return o;
}

TEST(Bkb, EmbeddingAndDtcVarianceMatchDenseComputation) {
  const Matrix X = testing::RandomArms(15, 2, 11);
  auto p = MustCreate(BkbConfig(X, /*q_bar=*/1.0), 5);
  auto* bkb = dynamic_cast<Bkb*>(p.get());
  ASSERT_NE(bkb, nullptr);
  const Kernel k = Kernel::Gaussian(0.3);
  Rng rng(2);
  std::vector<Pull> pulls;
  int proper_subsets = 0;
  for (int t = 0; t < 40; ++t) {
    const int arm = static_cast<int>(rng.UniformInt(8));  // 8 of 15 arms get pulled, repeats
    const double y = std::sin(3 * X(0, arm)) + 0.1 * rng.Normal();
    ASSERT_TRUE(p->Update(Obs("a" + std::to_string(arm), y)).ok());
    pulls.push_back({arm, y});
    std::vector<int> dict;
    for (int i = 0; i < 15; ++i)
      if (bkb->dictionary()[i] == 1.0) dict.push_back(i);
    int pulled = (bkb->counts().array() > 0).count();
    if (static_cast<int>(dict.size()) < pulled) ++proper_subsets;
    if (dict.empty()) continue;
    Vector mean, var;
    DenseBkb(k, X, dict, pulls, 0.05, &mean, &var);
    for (int i = 0; i < 15; ++i) {
      EXPECT_NEAR(bkb->PosteriorMean()[i], mean[i], 1e-7 * (1 + std::abs(mean[i])))
          << t << " " << i;
      EXPECT_NEAR(bkb->PosteriorVariance()[i], var[i], 1e-7 * (1 + var[i])) << t << " " << i;
    }
  }
  EXPECT_GT(proper_subsets, 5);  // the sketch really was a subset most of the time
}

TEST(Bkb, EqualsExactGpUcbWhenEveryPulledArmIsKept) {
  const Matrix X = testing::RandomArms(20, 2, 4);
  // q_bar huge: p~ = 1 for every pull, S_t = all pulled arms, and eps tiny: alpha = 1.
  auto p = MustCreate(BkbConfig(X, 1e12, 0.3, 1e-9), 1);
  bandit::v1::PolicyConfig gc;
  auto* g = gc.mutable_gp_ucb();
  g->mutable_kernel()->set_bandwidth(0.3);
  g->set_lambda(0.05);
  g->set_noise(0.1);
  testing::FillArms(X, &gc);
  auto q = MustCreate(gc, 1);
  auto* bkb = dynamic_cast<Bkb*>(p.get());
  auto* gp = dynamic_cast<GpUcb*>(q.get());
  ASSERT_TRUE(bkb && gp);
  Rng env(8);
  std::vector<Pull> pulls;
  SelectContext ctx;
  ctx.want_scores = true;
  for (int t = 0; t < 60; ++t) {
    auto db = p->Select(ctx);
    auto dg = q->Select(ctx);
    ASSERT_TRUE(db.ok() && dg.ok());
    EXPECT_EQ(db->score_kind, bandit::v1::UPPER_CONFIDENCE_BOUND);
    ASSERT_EQ(db->scores.size(), 20);
    for (int i = 0; i < 20; ++i)
      EXPECT_NEAR(db->scores[i], dg->scores[i], 1e-6 * (1 + std::abs(dg->scores[i]))) << t;
    EXPECT_EQ(db->arm, dg->arm) << t;
    EXPECT_EQ(bkb->dictionary_size(), (bkb->counts().array() > 0).count());
    // Both against eq. (1)-(2) on the full list of pulls.
    if (!pulls.empty()) {
      Vector mean, var;
      DenseExact(Kernel::Gaussian(0.3), X, pulls, 0.05, &mean, &var);
      for (int i = 0; i < 20; ++i) {
        EXPECT_NEAR(gp->PosteriorMean()[i], mean[i], 1e-8 * (1 + std::abs(mean[i])));
        EXPECT_NEAR(gp->PosteriorVariance()[i], var[i], 1e-8 * (1 + var[i]));
        EXPECT_NEAR(bkb->PosteriorVariance()[i], var[i], 1e-6 * (1 + var[i]));
      }
    }
    const int arm = dg->arm;
    const double y = std::cos(4 * X(0, arm) + X(1, arm)) + 0.1 * env.Normal();
    ASSERT_TRUE(p->Update(Obs(dg->arm_id, y)).ok());
    ASSERT_TRUE(q->Update(Obs(dg->arm_id, y)).ok());
    pulls.push_back({arm, y});
  }
}

TEST(Bkb, InclusionProbabilitiesAreProbabilitiesAndDriveTheDictionary) {
  const Matrix X = testing::RandomArms(30, 2, 6);
  for (double q_bar : {1.0, 3.0, 50.0}) {
    auto p = MustCreate(BkbConfig(X, q_bar), 3);
    auto* bkb = dynamic_cast<Bkb*>(p.get());
    Rng env(1);
    for (int t = 0; t < 150; ++t) {
      auto d = p->Select({});
      ASSERT_TRUE(d.ok());
      ASSERT_TRUE(p->Update(Obs(d->arm_id, std::sin(5 * X(0, d->arm)) + 0.1 * env.Normal())).ok());
      const Vector pp = Bkb::PullInclusion(q_bar, bkb->PosteriorVariance(), bkb->counts());
      const Vector pa = Bkb::ArmInclusion(q_bar, bkb->PosteriorVariance(), bkb->counts());
      for (int i = 0; i < 30; ++i) {
        EXPECT_GE(pp[i], 0.0);
        EXPECT_LE(pp[i], 1.0);
        EXPECT_GE(pa[i], pp[i] - 1e-15);  // n_i >= 1 draws keep at least as often as one
        EXPECT_LE(pa[i], 1.0);
        if (bkb->counts()[i] == 0) {
          EXPECT_EQ(pa[i], 0.0);
          EXPECT_EQ(bkb->dictionary()[i], 0.0);  // S_t is drawn from pulled arms only
        }
      }
    }
  }
}

TEST(Bkb, DictionaryFrequenciesMatchInclusionProbabilities) {
  // From one fixed state, redraw the dictionary many times (fresh RNG each time) and compare
  // each arm's empirical frequency with 1 - (1 - q_bar sigma~^2)^{n_i}.
  const Matrix X = testing::RandomArms(12, 2, 9);
  auto p = MustCreate(BkbConfig(X, 1.0), 3);
  auto* bkb = dynamic_cast<Bkb*>(p.get());
  Rng env(4);
  for (int t = 0; t < 30; ++t) {
    const int arm = static_cast<int>(env.UniformInt(6));
    ASSERT_TRUE(p->Update(Obs("a" + std::to_string(arm), env.Normal())).ok());
  }
  bandit::v1::PolicyState state;
  p->Save(&state);
  const Vector var = bkb->PosteriorVariance();
  Vector counts_after = bkb->counts();
  counts_after[2] += 1;  // the next observation is on arm a2
  const Vector expect = Bkb::ArmInclusion(1.0, var, counts_after);
  const int trials = 4000;
  Vector freq = Vector::Zero(12);
  for (int r = 0; r < trials; ++r) {
    Rng fresh(1000 + r);
    state.set_rng(fresh.Save());
    ASSERT_TRUE(p->Restore(state).ok());
    ASSERT_TRUE(p->Update(Obs("a2", 0.3)).ok());
    freq += bkb->dictionary();
  }
  freq /= trials;
  for (int i = 0; i < 12; ++i) {
    const double sd = std::sqrt(expect[i] * (1 - expect[i]) / trials);
    EXPECT_NEAR(freq[i], expect[i], 5 * sd + 1e-12) << "arm " << i;
  }
  // Meaningful only if some arms are kept with a probability strictly inside (0, 1).
  EXPECT_GE((expect.array() > 0.05 && expect.array() < 0.95).count(), 2);
}

void RunSteps(Policy& p, Rng& env, const Matrix& X, int n, std::vector<int>* arms) {
  for (int i = 0; i < n; ++i) {
    auto d = p.Select({});
    ASSERT_TRUE(d.ok());
    ASSERT_TRUE(p.Update(Obs(d->arm_id, std::sin(6 * X(0, d->arm)) + 0.2 * env.Normal())).ok());
    if (arms) arms->push_back(d->arm);
  }
}

TEST(Bkb, SaveRestoreGivesIdenticalContinuation) {
  const Matrix X = testing::RandomArms(40, 2, 12);
  auto a = MustCreate(BkbConfig(X, 2.0), 42);
  Rng env(3);
  RunSteps(*a, env, X, 200, nullptr);
  bandit::v1::PolicyState state;
  a->Save(&state);
  auto b = MustCreate(BkbConfig(X, 2.0), 999);  // different seed: the RNG comes from the state
  ASSERT_TRUE(b->Restore(state).ok());
  Rng env_copy = env;
  std::vector<int> xs, ys;
  RunSteps(*a, env, X, 1000, &xs);
  RunSteps(*b, env_copy, X, 1000, &ys);
  EXPECT_EQ(xs, ys);
  bandit::v1::PolicyState sa, sb;
  a->Save(&sa);
  b->Save(&sb);
  EXPECT_EQ(sa.SerializeAsString(), sb.SerializeAsString());
  // A policy that was not restored (other seed) diverges: the test can fail.
  auto c = MustCreate(BkbConfig(X, 2.0), 999);
  Rng env_c(3);
  std::vector<int> zs;
  RunSteps(*c, env_c, X, 1200, &zs);
  EXPECT_NE(std::vector<int>(zs.end() - 1000, zs.end()), xs);
}

TEST(Bkb, FirstSelectIsUniformThenDeterministic) {
  const Matrix X = testing::RandomArms(10, 2, 1);
  auto p = MustCreate(BkbConfig(X, 2.0), 1);
  SelectContext ctx;
  ctx.want_scores = true;
  auto d = p->Select(ctx);
  ASSERT_TRUE(d.ok());
  EXPECT_DOUBLE_EQ(d->propensity, 0.1);
  ASSERT_TRUE(p->Update(Obs(d->arm_id, 1.0)).ok());
  auto* bkb = dynamic_cast<Bkb*>(p.get());
  EXPECT_EQ(bkb->dictionary_size(), 1);  // S_1 = {x_1}
  EXPECT_EQ(bkb->dictionary()[d->arm], 1.0);
  auto e = p->Select(ctx);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->propensity, 1.0);
  int best = 0;
  for (int i = 1; i < 10; ++i)
    if (e->scores[i] > e->scores[best]) best = i;
  EXPECT_EQ(e->arm, best);
  auto diag = [&](const std::string& key) {
    for (auto& [k, v] : e->diagnostics)
      if (k == key) return v;
    return std::nan("");
  };
  EXPECT_DOUBLE_EQ(diag("ucb"), e->scores[e->arm]);
  EXPECT_DOUBLE_EQ(diag("mean"), bkb->PosteriorMean()[e->arm]);
  EXPECT_DOUBLE_EQ(diag("sigma"), std::sqrt(bkb->PosteriorVariance()[e->arm]));
  EXPECT_DOUBLE_EQ(e->estimated_gap, bkb->PosteriorMean().maxCoeff() - diag("mean"));
}

TEST(Bkb, RejectsBadInputWithoutChange) {
  const Matrix X = testing::RandomArms(6, 2, 1);
  auto code = [](const bandit::v1::PolicyConfig& c) { return CreatePolicy(c, 1).status().code(); };
  // Config errors.
  auto dup = BkbConfig(X, 2.0);
  dup.mutable_arms(3)->set_id("a1");
  EXPECT_EQ(code(dup), absl::StatusCode::kInvalidArgument);
  auto dim = BkbConfig(X, 2.0);
  dim.mutable_arms(2)->add_features(0.5);
  EXPECT_EQ(code(dim), absl::StatusCode::kInvalidArgument);
  auto nan = BkbConfig(X, 2.0);
  nan.mutable_arms(1)->set_features(0, std::nan(""));
  EXPECT_EQ(code(nan), absl::StatusCode::kInvalidArgument);
  auto nofeat = BkbConfig(X, 2.0);
  nofeat.clear_arms();
  nofeat.set_num_arms(3);  // BKB needs feature vectors
  EXPECT_EQ(code(nofeat), absl::StatusCode::kInvalidArgument);
  auto bw = BkbConfig(X, 2.0);
  bw.mutable_bkb()->mutable_kernel()->set_bandwidth(-1);
  EXPECT_EQ(code(bw), absl::StatusCode::kInvalidArgument);
  auto q = BkbConfig(X, 0.5);
  EXPECT_EQ(code(q), absl::StatusCode::kInvalidArgument);
  auto eps = BkbConfig(X, 2.0, 0.3, 1.0);
  EXPECT_EQ(code(eps), absl::StatusCode::kInvalidArgument);
  auto both = BkbConfig(X, 2.0);
  both.mutable_bkb()->set_horizon(100);
  EXPECT_EQ(code(both), absl::StatusCode::kInvalidArgument);
  auto lam = BkbConfig(X, 2.0);
  lam.mutable_bkb()->set_lambda(0);
  EXPECT_EQ(code(lam), absl::StatusCode::kInvalidArgument);
  auto delta = BkbConfig(X, 2.0);
  delta.mutable_bkb()->set_delta(1.0);
  EXPECT_EQ(code(delta), absl::StatusCode::kInvalidArgument);
  auto theory = BkbConfig(X, 2.0);
  theory.mutable_bkb()->clear_q_bar();
  theory.mutable_bkb()->set_horizon(2000);
  auto tp = MustCreate(theory, 1);
  EXPECT_NEAR(dynamic_cast<Bkb*>(tp.get())->q_bar(), 6 * 3 * std::log(4 * 2000 / 0.1) / 0.25, 1e-9);

  // Runtime errors leave the state (RNG included) unchanged.
  auto p = MustCreate(BkbConfig(X, 2.0), 1);
  Rng env(1);
  RunSteps(*p, env, X, 10, nullptr);
  bandit::v1::PolicyState before, after;
  p->Save(&before);
  EXPECT_EQ(p->Update(Obs("nope", 1.0)).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(p->Update(Obs("a1", std::nan(""))).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p->Update(Obs("a1", INFINITY)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p->RemoveArm("nope").code(), absl::StatusCode::kNotFound);
  bandit::v1::ArmSpec arm;
  arm.set_id("a1");  // duplicate
  arm.add_features(0.1);
  arm.add_features(0.2);
  EXPECT_EQ(p->AddArm(arm).code(), absl::StatusCode::kInvalidArgument);
  arm.set_id("new");
  arm.add_features(0.3);  // wrong dimension
  EXPECT_EQ(p->AddArm(arm).code(), absl::StatusCode::kInvalidArgument);
  arm.clear_features();
  arm.add_features(0.1);
  arm.add_features(INFINITY);
  EXPECT_EQ(p->AddArm(arm).code(), absl::StatusCode::kInvalidArgument);
  arm.set_id("bad id!");
  EXPECT_EQ(p->AddArm(arm).code(), absl::StatusCode::kInvalidArgument);
  bandit::v1::PolicyState corrupt = before;
  for (auto& t : *corrupt.mutable_tensors())
    if (t.name() == "dictionary") t.set_data(0, 0.5);
  EXPECT_EQ(p->Restore(corrupt).code(), absl::StatusCode::kInvalidArgument);
  p->Save(&after);
  EXPECT_EQ(before.SerializeAsString(), after.SerializeAsString());
}

TEST(Bkb, ArmsCanBeAddedAndRemovedKeepingCountersAndDictionaryConsistent) {
  const Matrix X = testing::RandomArms(8, 2, 5);
  auto p = MustCreate(BkbConfig(X, 1e12), 1);  // keep every pulled arm
  auto* bkb = dynamic_cast<Bkb*>(p.get());
  for (int i : {1, 3, 3, 5, 6}) ASSERT_TRUE(p->Update(Obs("a" + std::to_string(i), 0.1 * i)).ok());
  ASSERT_TRUE(p->Update(Obs("a1", 0.4)).ok());
  EXPECT_EQ(bkb->dictionary_size(), 4);
  ASSERT_TRUE(p->RemoveArm("a3").ok());
  EXPECT_EQ(p->ArmIds(), (std::vector<std::string>{"a0", "a1", "a2", "a4", "a5", "a6", "a7"}));
  EXPECT_EQ(bkb->counts(), (Vector(7) << 0, 2, 0, 0, 1, 1, 0).finished());
  EXPECT_EQ(bkb->dictionary().size(), 7);
  EXPECT_EQ(bkb->dictionary()[2], 0.0);
  EXPECT_EQ(bkb->observations(), 4);
  bandit::v1::ArmSpec arm;
  arm.set_id("z");
  arm.add_features(0.5);
  arm.add_features(0.5);
  ASSERT_TRUE(p->AddArm(arm).ok());
  EXPECT_EQ(bkb->counts().size(), 8);
  EXPECT_EQ(bkb->dictionary()[7], 0.0);
  ASSERT_TRUE(p->Update(Obs("z", 1.0)).ok());
  EXPECT_EQ(bkb->dictionary()[7], 1.0);
  // The remaining data define the posterior: same as a fresh BKB given only those pulls.
  Matrix X2(2, 8);
  X2 << X.col(0), X.col(1), X.col(2), X.col(4), X.col(5), X.col(6), X.col(7),
      Vector::Constant(2, 0.5);
  std::vector<Pull> pulls = {{1, 0.1}, {4, 0.5}, {5, 0.6}, {1, 0.4}, {7, 1.0}};
  Vector mean, var;
  DenseExact(Kernel::Gaussian(0.3), X2, pulls, 0.05, &mean, &var);
  for (int i = 0; i < 8; ++i) {
    EXPECT_NEAR(bkb->PosteriorMean()[i], mean[i], 1e-7);
    EXPECT_NEAR(bkb->PosteriorVariance()[i], var[i], 1e-7 * (1 + var[i]));
  }
}

TEST(Bkb, StateBytesDoNotGrowWithRounds) {
  const Matrix X = testing::RandomArms(10, 2, 3);
  auto p = MustCreate(BkbConfig(X, 2.0), 1);
  Rng env(5);
  RunSteps(*p, env, X, 1000, nullptr);
  const int64_t b1 = p->StateBytes();
  bandit::v1::PolicyState s1, s2;
  p->Save(&s1);
  s1.clear_rng();  // the engine's text form varies by a few digits; its size is bounded
  RunSteps(*p, env, X, 99000, nullptr);
  EXPECT_EQ(p->StateBytes(), b1);
  p->Save(&s2);
  s2.clear_rng();
  EXPECT_EQ(s1.ByteSizeLong(), s2.ByteSizeLong());
  EXPECT_EQ(dynamic_cast<Bkb*>(p.get())->observations(), 100000);
}

// Regret check on a small GP environment over several seeds: BKB and GP-UCB both beat uniform
// random choice by a wide margin.
TEST(Bkb, RegretWellBelowRandomOverSeeds) {
  for (int seed = 0; seed < 3; ++seed) {
    const Matrix X = testing::RandomArms(60, 2, 100 + seed);
    // f = sum of three bumps, max about 1.
    Vector f(60);
    for (int i = 0; i < 60; ++i)
      f[i] = std::exp(-(X.col(i) - Eigen::Vector2d(0.2, 0.3)).squaredNorm() / 0.05) +
             0.6 * std::exp(-(X.col(i) - Eigen::Vector2d(0.8, 0.7)).squaredNorm() / 0.05);
    const double random_regret = 400 * (f.maxCoeff() - f.mean());
    for (const char* algo : {"bkb", "gp_ucb"}) {
      bandit::v1::PolicyConfig c = BkbConfig(X, 3.0);
      c.mutable_bkb()->set_radius_multiplier(0.2);
      if (std::string(algo) == "gp_ucb") {
        c.clear_bkb();
        auto* g = c.mutable_gp_ucb();
        g->mutable_kernel()->set_bandwidth(0.3);
        g->set_lambda(0.05);
        g->set_noise(0.1);
        g->set_radius_multiplier(0.2);
      }
      auto p = MustCreate(c, seed);
      Rng env(seed);
      double regret = 0;
      for (int t = 0; t < 400; ++t) {
        auto d = p->Select({});
        ASSERT_TRUE(d.ok());
        regret += f.maxCoeff() - f[d->arm];
        ASSERT_TRUE(p->Update(Obs(d->arm_id, f[d->arm] + 0.1 * env.Normal())).ok());
      }
      EXPECT_LT(regret, 0.25 * random_regret) << algo << " seed " << seed;
    }
  }
}

}  // namespace
}  // namespace bandit
