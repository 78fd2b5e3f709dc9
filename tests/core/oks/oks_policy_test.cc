#include "core/oks/oks_policy.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "core/oks/exact_hypotheses.h"
#include "core/registry.h"

namespace bandit::oks {
namespace BANDIT_UNITY_ID {

using bandit::v1::OksConfig;

OksConfig Config(OksConfig::Variant v, bandit::v1::OksLoss loss, int rf, int budget,
                 std::vector<double> sigmas = {0.25, 0.5, 1, 2}, int dim = 2) {
  OksConfig c;
  c.set_variant(v);
  c.set_dimension(dim);
  c.set_loss(loss);
  for (double s : sigmas) {
    auto* k = c.add_kernels();
    k->set_kind(bandit::v1::OksKernel::GAUSSIAN);
    k->set_bandwidth(s);
  }
  c.set_random_features(rf);
  c.set_support_budget(budget);
  return c;
}

std::unique_ptr<OnlineKernelSelection> Make(const OksConfig& c, uint64_t seed = 1) {
  auto p = OnlineKernelSelection::Create(c, seed, /*allow_unbounded=*/true);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? std::move(*p) : nullptr;
}

Observation Obs(const Eigen::VectorXd& x, double y, std::vector<double> memo) {
  Observation o;
  o.features = x;
  o.reward = y;
  o.memo = Eigen::Map<Eigen::VectorXd>(memo.data(), memo.size());
  return o;
}

// A synthetic stream: x uniform in [-1,1]^2, classification y = sign(||x||^2 - 0.5) with 5% label
// noise; regression y = 0.5 + 0.4 sin(3 x1) x2.
struct Stream {
  explicit Stream(uint64_t seed, bool cls) : rng(seed), classification(cls) {}
  std::pair<Eigen::VectorXd, double> Next() {
    Eigen::VectorXd x(2);
    x << 2 * rng.Uniform() - 1, 2 * rng.Uniform() - 1;
    double y;
    if (classification) {
      y = x.squaredNorm() > 0.5 ? 1.0 : -1.0;
      if (rng.Uniform() < 0.05) y = -y;
    } else {
      y = 0.5 + 0.4 * std::sin(3 * x[0]) * x[1];
    }
    return {x, y};
  }
  Rng rng;
  bool classification;
};

// One served round: Select, then Update with the label. Returns (arm, prediction).
std::pair<int, double> Round(Policy& p, Stream& s) {
  auto [x, y] = s.Next();
  SelectContext ctx;
  ctx.point = &x;
  auto d = p.Select(ctx);
  EXPECT_TRUE(d.ok()) << d.status();
  Observation o;
  o.features = x;
  o.memo = d->memo;
  o.reward = y;
  EXPECT_TRUE(p.Update(o).ok());
  return {d->arm, *d->prediction()};
}

TEST(Oks, OksPlusPlusParametersMatchHandComputedValues) {
  // K = 2, U = 1, logistic (G = C0 = 1), three scripted updates with given memos.
  OksConfig c = Config(OksConfig::OKS_PP, bandit::v1::OKS_LOGISTIC, 0, 0, {1.0, 2.0}, 1);
  c.set_u(1.0);
  auto p = Make(c);
  ASSERT_TRUE(p);
  EXPECT_DOUBLE_EQ(p->CurrentDelta(), 0.5);
  EXPECT_NEAR(p->CurrentEta(), std::sqrt(2 * std::log(2.0)), 1e-15);
  Eigen::VectorXd x1(1), x2(1), x3(1);
  x1 << 0.5;
  x2 << 0.1;
  x3 << -0.5;
  // memo = [kernel, p, q, prediction]; values computed by hand (Python) from Theorem 3.1.
  ASSERT_TRUE(p->Update(Obs(x1, 1.0, {0, 0.5, 0.5, 0.0})).ok());
  EXPECT_NEAR(p->CurrentDelta(), 0.35591108968221424, 1e-14);
  EXPECT_NEAR(p->CurrentEta(), 0.84081284469839601, 1e-14);
  EXPECT_NEAR(p->Lambda(0), 0.33445630256657161, 1e-14);
  EXPECT_NEAR(p->Lambda(1), 0.51665589831304615, 1e-14);
  ASSERT_TRUE(p->Update(Obs(x2, -1.0, {1, 0.3, 0.25, 0.2})).ok());
  EXPECT_NEAR(p->CurrentDelta(), 0.24903341320130534, 1e-14);
  EXPECT_NEAR(p->CurrentEta(), 0.60960533892209867, 1e-14);
  EXPECT_NEAR(p->Lambda(0), 0.27976761123363608, 1e-14);
  EXPECT_NEAR(p->Lambda(1), 0.22588710400202308, 1e-14);
  ASSERT_TRUE(p->Update(Obs(x3, -1.0, {0, 0.6, 0.55, -0.4})).ok());
  EXPECT_NEAR(p->CurrentDelta(), 0.2336192658411306, 1e-14);
  EXPECT_NEAR(p->CurrentEta(), 0.57918966480430445, 1e-14);
  EXPECT_NEAR(p->Lambda(0), 0.23250056854950676, 1e-14);
  EXPECT_NEAR(p->Lambda(1), 0.21878470339095193, 1e-14);
  const Eigen::VectorXd prob = p->Probabilities();
  EXPECT_NEAR(prob[0], 0.5462851991432189, 1e-13);
  EXPECT_NEAR(prob[1], 0.45371480085678106, 1e-13);
  // Hypotheses: steps lambda * l'(f, y) / p (inside the ball, no projection): kernel 0 got
  // +0.33445630256657161 k(x1, .) and -0.1555089119829797 k(x3, .); kernel 1 -0.4140013644492393 k(x2, .).
  Eigen::VectorXd v(1);
  v << 0.0;
  const double k0 = std::exp(-0.125);  // exp(-0.5^2 / 2)
  EXPECT_NEAR(p->hypotheses().Eval(0, v), 0.33445630256657161 * k0 - 0.1555089119829797 * k0,
              1e-14);
  EXPECT_NEAR(p->hypotheses().Eval(1, v), -0.4140013644492393 * std::exp(-0.01 / 8), 1e-14);
}

TEST(Oks, OksRemark1Parameters) {
  OksConfig c = Config(OksConfig::OKS, bandit::v1::OKS_LOGISTIC, 16, 0, {1, 2, 3, 4, 5, 6});
  c.set_horizon(1000);
  auto p = Make(c);
  ASSERT_TRUE(p);
  EXPECT_NEAR(p->CurrentDelta(), 0.18171205928321399, 1e-14);
  EXPECT_NEAR(p->Lambda(3), 0.0055032120814910452, 1e-15);
  EXPECT_NEAR(p->CurrentEta(), 0.022107126802115396, 1e-15);
  c.set_lambda_scale(10);
  EXPECT_NEAR(Make(c)->Lambda(0), 0.055032120814910452, 1e-14);
}

TEST(Oks, DoublingHorizon) {
  OksConfig c = Config(OksConfig::IOKS, bandit::v1::OKS_ABSOLUTE, 8, 0);
  auto p = Make(c);
  Stream s(1, false);
  EXPECT_EQ(p->ParameterHorizon(), 64);
  for (int t = 0; t < 64; ++t) Round(*p, s);
  EXPECT_EQ(p->ParameterHorizon(), 128);  // round 65
  for (int t = 0; t < 64; ++t) Round(*p, s);
  EXPECT_EQ(p->ParameterHorizon(), 256);  // round 129
  EXPECT_NEAR(p->CurrentDelta(), std::pow(256.0, -0.75), 1e-15);
}

TEST(Oks, IoksUpdateFollowsAlgorithm2) {
  OksConfig c = Config(OksConfig::IOKS, bandit::v1::OKS_ABSOLUTE, 0, 0, {0.5, 1, 2});
  c.set_horizon(1000);
  auto p = Make(c);
  const IoksParams ip = IoksTheoremParams(3, 1000, 1.0, 1.0, 1.0, 8.0);
  Stream s(2, false);
  for (int t = 0; t < 200; ++t) {
    const Eigen::VectorXd q_before = p->QDistribution();
    const Eigen::VectorXd eta_before = p->IoksEtas();
    auto [x, y] = s.Next();
    SelectContext ctx;
    ctx.point = &x;
    auto d = p->Select(ctx);
    ASSERT_TRUE(d.ok());
    EXPECT_NEAR(d->propensity, (1 - ip.delta) * q_before[d->arm] + ip.delta / 3, 1e-15);
    ASSERT_TRUE(p->Update(Obs(x, y, {d->memo.data(), d->memo.data() + d->memo.size()})).ok());
    // Lines 8-9: eq. (4) then eq. (5).
    Eigen::VectorXd ct = Eigen::VectorXd::Zero(3);
    ct[d->arm] =
        IoksLossEstimate(std::abs(*d->prediction() - y), d->propensity, eta_before.maxCoeff());
    const Eigen::VectorXd q_expect = TsallisOmdStep(q_before, eta_before, ct);
    const Eigen::VectorXd q = p->QDistribution();
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(q[i], q_expect[i], 1e-15);
    EXPECT_NEAR(q.sum(), 1.0, 1e-12);
    // Lines 11-17: eta grows by upsilon exactly when 1/p_{t+1,i} exceeds rho_{t,i}; eta only increases.
    const Eigen::VectorXd eta = p->IoksEtas();
    for (int i = 0; i < 3; ++i) {
      const double r = eta[i] / eta_before[i];
      EXPECT_TRUE(std::abs(r - 1) < 1e-12 || std::abs(r - ip.upsilon) < 1e-12) << r;
    }
    // Eq. (2): every hypothesis stays in the ball ||f|| <= U = 1.
    const auto& h = static_cast<const ExactHypotheses&>(p->hypotheses());
    EXPECT_LE(h.TrackedNormSq(d->arm), 1.0 + 1e-12);
  }
}

TEST(Oks, SaveRestoreGivesIdenticalContinuation) {
  struct Case {
    OksConfig::Variant v;
    bandit::v1::OksLoss loss;
    int rf, budget;
  };
  for (const Case& cs : {Case{OksConfig::OKS, bandit::v1::OKS_LOGISTIC, 20, 0},
                         Case{OksConfig::OKS_PP, bandit::v1::OKS_SQUARE, 20, 0},
                         Case{OksConfig::IOKS, bandit::v1::OKS_ABSOLUTE, 20, 0},
                         Case{OksConfig::OKS_PP, bandit::v1::OKS_LOGISTIC, 0, 30},
                         Case{OksConfig::IOKS, bandit::v1::OKS_HINGE, 0, 30}}) {
    const OksConfig c = Config(cs.v, cs.loss, cs.rf, cs.budget);
    const bool cls = cs.loss != bandit::v1::OKS_SQUARE && cs.loss != bandit::v1::OKS_ABSOLUTE;
    auto a = Make(c, 42);
    Stream s1(3, cls);
    for (int t = 0; t < 300; ++t) Round(*a, s1);
    bandit::v1::PolicyState st;
    a->Save(&st);
    auto b = Make(c, 999);  // different seed: different features and engine until restored
    ASSERT_TRUE(b->Restore(st).ok());
    Stream s2 = s1;
    for (int t = 0; t < 1000; ++t) {
      const auto ra = Round(*a, s1);
      const auto rb = Round(*b, s2);
      ASSERT_EQ(ra.first, rb.first) << "variant " << cs.v << " round " << t;
      ASSERT_EQ(ra.second, rb.second);
    }
    bandit::v1::PolicyState sa, sb;
    a->Save(&sa);
    b->Save(&sb);
    EXPECT_EQ(sa.SerializeAsString(), sb.SerializeAsString());
  }
}

TEST(Oks, BadInputLeavesStateUnchanged) {
  auto p = Make(Config(OksConfig::OKS_PP, bandit::v1::OKS_LOGISTIC, 16, 0));
  Stream s(4, true);
  for (int t = 0; t < 20; ++t) Round(*p, s);
  bandit::v1::PolicyState before, after;
  p->Save(&before);
  Eigen::VectorXd x(2), bad_dim(3), nan_x(2);
  x << 0.1, 0.2;
  bad_dim << 0.1, 0.2, 0.3;
  nan_x << 0.1, std::nan("");
  SelectContext ctx;
  EXPECT_EQ(p->Select(ctx).status().code(), absl::StatusCode::kInvalidArgument);  // no x
  ctx.point = &bad_dim;
  EXPECT_EQ(p->Select(ctx).status().code(), absl::StatusCode::kInvalidArgument);
  ctx.point = &nan_x;
  EXPECT_EQ(p->Select(ctx).status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<double> memo = {1, 0.3, 0.3, 0.1};
  auto code = [&](const Observation& o) { return p->Update(o).code(); };
  EXPECT_EQ(code(Obs(x, 0.5, memo)), absl::StatusCode::kInvalidArgument);  // label not +-1
  EXPECT_EQ(code(Obs(x, 0.0, memo)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Obs(x, std::nan(""), memo)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Obs(bad_dim, 1, memo)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Obs(nan_x, 1, memo)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Obs(x, 1, {1, 0.3, 0.3})), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Obs(x, 1, {4, 0.3, 0.3, 0.1})), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Obs(x, 1, {1.5, 0.3, 0.3, 0.1})), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Obs(x, 1, {1, 0.0, 0.3, 0.1})), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Obs(x, 1, {1, 0.3, 1.3, 0.1})), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Obs(x, 1, {1, 0.3, 0.3, INFINITY})), absl::StatusCode::kInvalidArgument);
  Observation direct = Obs(x, 1, {});
  direct.direct = true;
  EXPECT_EQ(code(direct), absl::StatusCode::kFailedPrecondition);
  p->Save(&after);
  EXPECT_EQ(before.SerializeAsString(), after.SerializeAsString());

  // Regression: any finite target, non-finite refused.
  auto r = Make(Config(OksConfig::IOKS, bandit::v1::OKS_ABSOLUTE, 16, 0));
  r->Save(&before);
  EXPECT_EQ(r->Update(Obs(x, INFINITY, memo)).code(), absl::StatusCode::kInvalidArgument);
  r->Save(&after);
  EXPECT_EQ(before.SerializeAsString(), after.SerializeAsString());
  EXPECT_TRUE(r->Update(Obs(x, 0.37, memo)).ok());
  // A state of another shape is refused without change.
  bandit::v1::PolicyState other;
  Make(Config(OksConfig::IOKS, bandit::v1::OKS_ABSOLUTE, 16, 0, {1, 2}))->Save(&other);
  r->Save(&before);
  EXPECT_EQ(r->Restore(other).code(), absl::StatusCode::kInvalidArgument);
  r->Save(&after);
  EXPECT_EQ(before.SerializeAsString(), after.SerializeAsString());
}

TEST(Oks, ConfigValidation) {
  auto code = [](const OksConfig& c) {
    return OnlineKernelSelection::Create(c, 1, true).status().code();
  };
  const auto kBad = absl::StatusCode::kInvalidArgument;
  OksConfig c = Config(OksConfig::OKS_PP, bandit::v1::OKS_LOGISTIC, 16, 0);
  EXPECT_TRUE(OnlineKernelSelection::Create(c, 1, true).ok());
  OksConfig e = c;
  e.clear_kernels();
  EXPECT_EQ(code(e), kBad);
  for (double bw : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    e = c;
    e.mutable_kernels(1)->set_bandwidth(bw);
    EXPECT_EQ(code(e), kBad) << bw;
  }
  e = c;
  e.set_dimension(0);
  EXPECT_EQ(code(e), kBad);
  e = c;
  e.set_loss(bandit::v1::OKS_ABSOLUTE);  // OKS++ needs a smooth loss
  EXPECT_EQ(code(e), kBad);
  e = Config(OksConfig::IOKS, bandit::v1::OKS_SQUARE, 16, 0);  // Lipschitz on ||f|| <= U
  EXPECT_TRUE(OnlineKernelSelection::Create(e, 1, true).ok());
  e = c;
  e.set_task(bandit::v1::OKS_REGRESSION);  // logistic is a margin loss
  EXPECT_EQ(code(e), kBad);
  e = c;
  e.set_horizon(1);
  EXPECT_EQ(code(e), kBad);
  e = c;
  e.set_u(-1);
  EXPECT_EQ(code(e), kBad);
  e = c;
  e.set_random_features(-5);
  EXPECT_EQ(code(e), kBad);
}

TEST(Oks, ServiceFactoryRefusesUnboundedExactLearners) {
  bandit::v1::PolicyConfig pc;
  *pc.mutable_oks() = Config(OksConfig::OKS_PP, bandit::v1::OKS_LOGISTIC, 0, 0);
  auto p = CreatePolicy(pc, 1);
  ASSERT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("support_budget"), std::string::npos);
  EXPECT_NE(p.status().message().find("grows"), std::string::npos);
  pc.mutable_oks()->set_support_budget(100);
  auto q = CreatePolicy(pc, 1);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ((*q)->name(), "oks");
  EXPECT_EQ((*q)->context_kind(), ContextKind::kPoint);
  pc.mutable_oks()->set_support_budget(0);
  pc.mutable_oks()->set_random_features(50);
  EXPECT_TRUE(CreatePolicy(pc, 1).ok());
}

TEST(Oks, RandomFeatureStateIsConstantInT) {
  auto p = Make(Config(OksConfig::OKS_PP, bandit::v1::OKS_LOGISTIC, 20, 0, {0.5, 1, 2}));
  Stream s(5, true);
  for (int t = 0; t < 1000; ++t) Round(*p, s);
  bandit::v1::PolicyState st;
  p->Save(&st);
  const int64_t bytes = p->StateBytes();
  const size_t size = st.ByteSizeLong();
  for (int t = 0; t < 99000; ++t) Round(*p, s);
  EXPECT_EQ(p->rounds(), 100000);
  p->Save(&st);
  EXPECT_EQ(p->StateBytes(), bytes);
  EXPECT_EQ(st.ByteSizeLong(), size);
}

TEST(Oks, ExactStateGrowsUnlessBudgeted) {
  auto grow = Make(Config(OksConfig::OKS_PP, bandit::v1::OKS_LOGISTIC, 0, 0));
  auto capped = Make(Config(OksConfig::OKS_PP, bandit::v1::OKS_LOGISTIC, 0, 25));
  Stream s1(6, true), s2(6, true);
  for (int t = 0; t < 400; ++t) Round(*grow, s1), Round(*capped, s2);
  const int64_t g1 = grow->StateBytes(), c1 = capped->StateBytes();
  for (int t = 0; t < 400; ++t) Round(*grow, s1), Round(*capped, s2);
  EXPECT_GT(grow->StateBytes(), g1);  // inherent to the paper's exact methods
  EXPECT_EQ(capped->StateBytes(), c1);
  EXPECT_LE(static_cast<const ExactHypotheses&>(capped->hypotheses()).total_support(), 4 * 25);
}

TEST(Oks, OutstandingDecisionsCanBeJoinedInAnyOrder) {
  auto p = Make(Config(OksConfig::IOKS, bandit::v1::OKS_LOGISTIC, 16, 0));
  Stream s(7, true);
  auto [x1, y1] = s.Next();
  auto [x2, y2] = s.Next();
  SelectContext c1, c2;
  c1.point = &x1;
  c2.point = &x2;
  auto d1 = p->Select(c1);
  auto d2 = p->Select(c2);
  ASSERT_TRUE(d1.ok() && d2.ok());
  Observation o2 = Obs(x2, y2, {d2->memo.data(), d2->memo.data() + 4});
  Observation o1 = Obs(x1, y1, {d1->memo.data(), d1->memo.data() + 4});
  EXPECT_TRUE(p->Update(o2).ok());
  EXPECT_TRUE(p->Update(o1).ok());
  EXPECT_EQ(p->rounds(), 2);
  EXPECT_NEAR(p->QDistribution().sum(), 1.0, 1e-12);
}

TEST(Oks, SelectReportsProbabilitiesAndLabel) {
  auto p = Make(Config(OksConfig::OKS_PP, bandit::v1::OKS_LOGISTIC, 16, 0));
  Eigen::VectorXd x(2);
  x << 0.3, -0.2;
  SelectContext ctx;
  ctx.point = &x;
  ctx.want_scores = true;
  auto d = p->Select(ctx);
  ASSERT_TRUE(d.ok());
  EXPECT_NEAR(d->scores.sum(), 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(d->propensity, d->scores[d->arm]);
  EXPECT_EQ(d->memo.size(), kMemoSize);
  EXPECT_EQ(d->memo[kMemoArm], d->arm);
  bool has_label = false;
  for (const auto& [k, v] : d->diagnostics)
    if (k == "label") has_label = (v == (*d->prediction() < 0 ? -1.0 : 1.0));
  EXPECT_TRUE(has_label);
}

TEST(Oks, RandomFeatureOksPlusPlusLearnsOverSeeds) {
  // Statistical check: on the noisy circle problem (5% label noise, best possible error 5%)
  // RF-OKS++ makes far fewer mistakes than chance over 4000 rounds, for every seed.
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    auto p = Make(Config(OksConfig::OKS_PP, bandit::v1::OKS_LOGISTIC, 100, 0), seed);
    Stream s(100 + seed, true);
    int mistakes = 0;
    const int T = 4000;
    for (int t = 0; t < T; ++t) {
      auto [x, y] = s.Next();
      SelectContext ctx;
      ctx.point = &x;
      auto d = p->Select(ctx);
      ASSERT_TRUE(d.ok());
      if ((*d->prediction() < 0 ? -1.0 : 1.0) != y) ++mistakes;
      ASSERT_TRUE(p->Update(Obs(x, y, {d->memo.data(), d->memo.data() + 4})).ok());
    }
    EXPECT_LT(static_cast<double>(mistakes) / T, 0.30) << "seed " << seed;
  }
}

}  // namespace
}  // namespace bandit::oks
