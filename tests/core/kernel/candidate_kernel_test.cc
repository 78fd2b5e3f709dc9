// BKB and exact GP-UCB on per-request candidates: equal to the fixed-arm form when the candidates
// are that arm set, posterior against the dense formulas, exact resume, refusals.
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "core/kernel/bkb.h"
#include "core/kernel/candidate_bkb.h"
#include "core/kernel/candidate_gp_ucb.h"
#include "core/kernel/gp_ucb.h"
#include "core/registry.h"
#include "tests/core/kernel/kernel_testing.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

constexpr double kBandwidth = 0.3;
constexpr double kLambda = 0.05;

void SetCommon(bandit::v1::KernelSpec* k) {
  k->set_kind(bandit::v1::KernelSpec::GAUSSIAN);
  k->set_bandwidth(kBandwidth);
}

bandit::v1::PolicyConfig BkbConfig(double q_bar, int dim, int resample_every = 1) {
  bandit::v1::PolicyConfig c;
  auto* b = c.mutable_bkb();
  SetCommon(b->mutable_kernel());
  b->set_q_bar(q_bar);
  b->set_epsilon(0.5);
  b->set_lambda(kLambda);
  b->set_noise(0.1);
  b->set_radius_multiplier(0.3);
  if (dim > 0) b->set_dimension(dim);
  if (resample_every > 1) b->set_resample_every(resample_every);
  return c;
}

bandit::v1::PolicyConfig GpConfig(int dim) {
  bandit::v1::PolicyConfig c;
  auto* g = c.mutable_gp_ucb();
  SetCommon(g->mutable_kernel());
  g->set_lambda(kLambda);
  g->set_noise(0.1);
  g->set_radius_multiplier(0.3);
  if (dim > 0) g->set_dimension(dim);
  return c;
}

std::unique_ptr<Policy> MustCreate(const bandit::v1::PolicyConfig& c, uint64_t seed) {
  auto p = CreatePolicy(c, seed);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *std::move(p) : nullptr;
}

// A arms uniform in [0,1]^d, columns sorted lexicographically.
Matrix SortedArms(int A, int d, uint64_t seed) {
  Matrix X = testing::RandomArms(A, d, seed);
  std::vector<int> idx(A);
  for (int i = 0; i < A; ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(), [&X](int a, int b) {
    for (int r = 0; r < X.rows(); ++r)
      if (X(r, a) != X(r, b)) return X(r, a) < X(r, b);
    return false;
  });
  Matrix S(d, A);
  for (int i = 0; i < A; ++i) S.col(i) = X.col(idx[i]);
  return S;
}

std::vector<Vector> Columns(const Matrix& X) {
  std::vector<Vector> out;
  for (int j = 0; j < X.cols(); ++j) out.push_back(X.col(j));
  return out;
}

double Smooth(const Vector& x) { return std::sin(3 * x[0]) + std::cos(2 * x[x.size() - 1]); }

// Plays `rounds` rounds of a candidates-form policy on fresh candidates from `env`, rewards from
// `noise`; returns the chosen indices.
std::vector<int> Play(Policy& p, int rounds, int n, int d, Rng& env, Rng& noise,
                      std::vector<Vector>* chosen = nullptr, std::vector<double>* ys = nullptr) {
  std::vector<int> arms;
  for (int t = 0; t < rounds; ++t) {
    std::vector<Vector> cands(n, Vector(d));
    for (auto& c : cands)
      for (int i = 0; i < d; ++i) c[i] = env.Uniform();
    SelectContext ctx;
    ctx.candidates = cands;
    auto dec = p.Select(ctx);
    EXPECT_TRUE(dec.ok()) << dec.status();
    if (!dec.ok()) return arms;
    arms.push_back(dec->arm);
    Observation o;
    o.features = cands[dec->arm];
    o.reward = Smooth(o.features) + 0.1 * noise.Normal();
    if (chosen) chosen->push_back(o.features);
    if (ys) ys->push_back(o.reward);
    EXPECT_TRUE(p.Update(o).ok());
  }
  return arms;
}

std::string Saved(const Policy& p) {
  bandit::v1::PolicyState s;
  p.Save(&s);
  return s.SerializeAsString();
}

// The fixed-arm form and the candidates form given that arm set every round, fed the same
// rewards: same decisions. Arms are listed in lexicographic order, the order in which the
// candidates form visits its points, so even BKB's random dictionary draws coincide.
void ExpectSameDecisionsAsFixedArms(const bandit::v1::PolicyConfig& fixed_config,
                                    const bandit::v1::PolicyConfig& cand_config, const Matrix& X,
                                    int rounds, bool is_bkb) {
  auto fixed = MustCreate(fixed_config, 17);
  auto cand = MustCreate(cand_config, 17);
  ASSERT_NE(fixed, nullptr);
  ASSERT_NE(cand, nullptr);
  EXPECT_EQ(fixed->context_kind(), ContextKind::kNone);
  EXPECT_EQ(cand->context_kind(), ContextKind::kCandidates);
  const std::vector<Vector> cols = Columns(X);
  Rng noise(3);
  int distinct_dict_sizes = 0, last = -1;
  for (int t = 0; t < rounds; ++t) {
    auto a = fixed->Select({});
    SelectContext ctx;
    ctx.candidates = cols;
    auto b = cand->Select(ctx);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->arm, b->arm) << "round " << t;
    EXPECT_DOUBLE_EQ(a->propensity, b->propensity);
    const double y = Smooth(X.col(a->arm)) + 0.1 * noise.Normal();
    Observation of, oc;
    of.arm_id = a->arm_id;
    of.reward = y;
    oc.features = X.col(b->arm);
    oc.reward = y;
    ASSERT_TRUE(fixed->Update(of).ok());
    ASSERT_TRUE(cand->Update(oc).ok());
    if (is_bkb) {
      const int m = dynamic_cast<Bkb*>(fixed.get())->dictionary_size();
      ASSERT_EQ(m, dynamic_cast<CandidateBkb*>(cand.get())->dictionary_size()) << "round " << t;
      if (m != last) ++distinct_dict_sizes;
      last = m;
    }
  }
  // The dictionary really was redrawn (sizes changed), so the draws were compared, not skipped.
  if (is_bkb) {
    EXPECT_GT(distinct_dict_sizes, 3);
  }
}

TEST(CandidateKernel, BkbWithTheFixedArmSetAsCandidatesDecidesLikeTheFixedArmForm) {
  const Matrix X = SortedArms(40, 2, 5);
  bandit::v1::PolicyConfig fixed = BkbConfig(2.0, 0);
  testing::FillArms(X, &fixed);
  ExpectSameDecisionsAsFixedArms(fixed, BkbConfig(2.0, 2), X, 150, true);
}

TEST(CandidateKernel, BkbResampleEveryOneIsTheFixedArmFormExactly) {
  // resample_every = 1 set explicitly is Fig. 1: the fixed-arm form's decisions and draws.
  const Matrix X = SortedArms(40, 2, 7);
  bandit::v1::PolicyConfig fixed = BkbConfig(2.0, 0);
  testing::FillArms(X, &fixed);
  bandit::v1::PolicyConfig every_one = BkbConfig(2.0, 2);
  every_one.mutable_bkb()->set_resample_every(1);
  ExpectSameDecisionsAsFixedArms(fixed, every_one, X, 150, true);
  // And the same state, bit for bit, as the default (unset) on fresh candidates.
  auto a = MustCreate(every_one, 5), b = MustCreate(BkbConfig(2.0, 2), 5);
  Rng env_a(1), noise_a(2), env_b(1), noise_b(2);
  EXPECT_EQ(Play(*a, 60, 10, 2, env_a, noise_a), Play(*b, 60, 10, 2, env_b, noise_b));
  EXPECT_EQ(Saved(*a), Saved(*b));
  // Every update redrew the dictionary (Fig. 1), so every update rebuilt the embedding.
  EXPECT_EQ(dynamic_cast<CandidateBkb*>(a.get())->rebuilds(), 60);
}

TEST(CandidateKernel, GpUcbWithTheFixedArmSetAsCandidatesDecidesLikeTheFixedArmForm) {
  const Matrix X = SortedArms(40, 2, 6);
  bandit::v1::PolicyConfig fixed = GpConfig(0);
  testing::FillArms(X, &fixed);
  ExpectSameDecisionsAsFixedArms(fixed, GpConfig(2), X, 150, false);
}

// Maps chosen features to (distinct point index, reward) pulls for the dense reference.
std::vector<testing::Pull> PullsOf(const Matrix& P, const std::vector<Vector>& chosen,
                                   const std::vector<double>& ys) {
  std::vector<testing::Pull> pulls;
  for (size_t s = 0; s < chosen.size(); ++s) {
    int idx = -1;
    for (int j = 0; j < P.cols(); ++j)
      if (P.col(j) == chosen[s]) idx = j;
    EXPECT_GE(idx, 0);
    pulls.push_back({idx, ys[s]});
  }
  return pulls;
}

void ExpectDtcMatchesDense(int resample_every) {
  const int d = 3;
  auto p = MustCreate(BkbConfig(1.5, d, resample_every), 9);
  auto* bkb = dynamic_cast<CandidateBkb*>(p.get());
  ASSERT_NE(bkb, nullptr);
  const Kernel k = Kernel::Gaussian(kBandwidth);
  Rng env(1), noise(2), probe(4);
  std::vector<Vector> chosen;
  std::vector<double> ys;
  int proper_subsets = 0;
  for (int step = 0; step < 12; ++step) {
    Play(*p, 5, 8, d, env, noise, &chosen, &ys);
    // Every pulled point plus 6 fresh probe points.
    const Matrix P = bkb->point_features();
    Matrix X(d, P.cols() + 6);
    X.leftCols(P.cols()) = P;
    for (int j = 0; j < 6; ++j)
      for (int i = 0; i < d; ++i) X(i, P.cols() + j) = probe.Uniform();
    const std::vector<int> dict = bkb->DictionaryPoints();
    if (static_cast<int>(dict.size()) < P.cols()) ++proper_subsets;
    Vector dm, dv, m, v;
    testing::DenseBkb(k, X, dict, PullsOf(P, chosen, ys), kLambda, &dm, &dv);
    bkb->Posterior(X, &m, &v);
    ASSERT_EQ(m.size(), dm.size());
    for (int i = 0; i < X.cols(); ++i) {
      EXPECT_NEAR(m[i], dm[i], 1e-6 * (1 + std::abs(dm[i]))) << "step " << step << " point " << i;
      EXPECT_NEAR(v[i], dv[i], 1e-6 * (1 + dv[i])) << "step " << step << " point " << i;
    }
    // beta~_t uses sum over all pulls of sigma~_t^2(x_s).
    double sum = 0;
    for (const auto& pull : PullsOf(P, chosen, ys)) sum += dv[pull.arm];
    EXPECT_NEAR(bkb->SumPulledVariance(), sum, 1e-6 * (1 + sum));
  }
  EXPECT_GT(proper_subsets, 3);  // the sketch really dropped pulls
}

TEST(CandidateKernel, BkbDtcPosteriorMatchesDenseComputation) { ExpectDtcMatchesDense(1); }

TEST(CandidateKernel, LazyBkbDtcPosteriorMatchesDenseComputation) {
  // Between redraws G and b are updated one pull at a time: same numbers as the dense formula.
  ExpectDtcMatchesDense(7);
}

TEST(CandidateKernel, GpUcbPosteriorMatchesDenseExactComputation) {
  const int d = 2;
  auto p = MustCreate(GpConfig(d), 9);
  auto* gp = dynamic_cast<CandidateGpUcb*>(p.get());
  ASSERT_NE(gp, nullptr);
  const Kernel k = Kernel::Gaussian(kBandwidth);
  Rng env(1), noise(2), probe(4);
  std::vector<Vector> chosen;
  std::vector<double> ys;
  for (int step = 0; step < 6; ++step) {
    Play(*p, 10, 8, d, env, noise, &chosen, &ys);
    // The pulls (repeats allowed in the reference) plus probe points.
    Matrix X(d, chosen.size() + 5);
    for (size_t s = 0; s < chosen.size(); ++s) X.col(s) = chosen[s];
    for (int j = 0; j < 5; ++j)
      for (int i = 0; i < d; ++i) X(i, chosen.size() + j) = probe.Uniform();
    std::vector<testing::Pull> pulls;
    for (size_t s = 0; s < chosen.size(); ++s) pulls.push_back({static_cast<int>(s), ys[s]});
    Vector dm, dv, m, v;
    testing::DenseExact(k, X, pulls, kLambda, &dm, &dv);
    gp->Posterior(X, &m, &v);
    for (int i = 0; i < X.cols(); ++i) {
      EXPECT_NEAR(m[i], dm[i], 1e-7 * (1 + std::abs(dm[i])));
      EXPECT_NEAR(v[i], dv[i], 1e-7 * (1 + dv[i]));
    }
    double sum = 0;
    for (size_t s = 0; s < chosen.size(); ++s) sum += dv[s];
    EXPECT_NEAR(gp->SumPulledVariance(), sum, 1e-7 * (1 + sum));
  }
}

TEST(CandidateKernel, LazyBkbRankOneUpdateEqualsFreshFactorization) {
  // Between redraws a pull that stays out of S is a rank-one update of the Cholesky factor of
  // V = G + lambda I and of tr(V^{-1}); compare both with a fresh factorization of the same G.
  const int d = 2;
  auto p = MustCreate(BkbConfig(2.0, d, 40), 3);
  auto* bkb = dynamic_cast<CandidateBkb*>(p.get());
  ASSERT_NE(bkb, nullptr);
  Rng env(11), noise(12);
  int rank_one_steps = 0;
  for (int t = 0; t < 300; ++t) {
    const int64_t before = bkb->rebuilds();
    Play(*p, 1, 10, d, env, noise);
    if (bkb->rebuilds() != before || bkb->rank() == 0) continue;
    ++rank_one_steps;
    Matrix V = bkb->gram();
    V.diagonal().array() += kLambda;
    const Eigen::LLT<Matrix> fresh(V);
    ASSERT_EQ(fresh.info(), Eigen::Success);
    const Matrix L = fresh.matrixL();
    const Matrix& U = bkb->cholesky_factor();
    ASSERT_EQ(U.rows(), L.rows());
    EXPECT_LE((U - L).norm(), 1e-9 * L.norm()) << "round " << t;
    EXPECT_TRUE(U.triangularView<Eigen::StrictlyUpper>().toDenseMatrix().isZero(0.0));
    // sum_s sigma~^2(x_s) through tr(V^{-1}) against the direct tr(G V^{-1} G).
    const Matrix& G = bkb->gram();
    const double direct = (bkb->point_counts().sum() - (G * fresh.solve(G)).trace()) / kLambda;
    EXPECT_NEAR(bkb->SumPulledVariance(), direct, 1e-7 * (1 + direct)) << "round " << t;
  }
  // Most updates took the rank-one path (the test compared something).
  EXPECT_GT(rank_one_steps, 150);
}

void ExpectExactResume(const bandit::v1::PolicyConfig& config) {
  const int d = config.has_bkb() ? config.bkb().dimension() : config.gp_ucb().dimension();
  auto a = MustCreate(config, 21);
  Rng env(8), noise(9);
  Play(*a, 60, 12, d, env, noise);
  bandit::v1::PolicyState state;
  a->Save(&state);
  auto b = MustCreate(config, 999);  // another seed: the RNG must come from the state
  ASSERT_TRUE(b->Restore(state).ok());
  EXPECT_EQ(Saved(*a), Saved(*b));
  Rng env2 = env, noise2 = noise;
  const std::vector<int> da = Play(*a, 40, 12, d, env, noise);
  const std::vector<int> db = Play(*b, 40, 12, d, env2, noise2);
  EXPECT_EQ(da, db);
  EXPECT_EQ(Saved(*a), Saved(*b));
  // And the posterior is bit-identical.
  Matrix probe = testing::RandomArms(5, d, 77);
  Vector ma, va, mb, vb;
  dynamic_cast<CandidateKernelUcb*>(a.get())->Posterior(probe, &ma, &va);
  dynamic_cast<CandidateKernelUcb*>(b.get())->Posterior(probe, &mb, &vb);
  EXPECT_EQ(ma, mb);
  EXPECT_EQ(va, vb);
}

TEST(CandidateKernel, BkbSaveRestoreResumesExactly) { ExpectExactResume(BkbConfig(3.0, 3)); }
TEST(CandidateKernel, LazyBkbSaveRestoreResumesExactly) {
  ExpectExactResume(BkbConfig(3.0, 3, 6));  // saved between redraws: G, b and the counter
}
TEST(CandidateKernel, GpUcbSaveRestoreResumesExactly) { ExpectExactResume(GpConfig(3)); }

void ExpectRefusalsLeaveStateUnchanged(const bandit::v1::PolicyConfig& config) {
  auto p = MustCreate(config, 4);
  Rng env(1), noise(2);
  Play(*p, 15, 6, 2, env, noise);
  const std::string before = Saved(*p);
  auto select = [&](std::vector<Vector> cands) {
    SelectContext ctx;
    ctx.candidates = cands;
    return p->Select(ctx).status();
  };
  Vector ok(2), wrong(3), nan(2);
  ok << 0.2, 0.4;
  wrong << 0.1, 0.2, 0.3;
  nan << 0.5, std::nan("");
  EXPECT_EQ(select({}).code(), absl::StatusCode::kInvalidArgument);
  auto s = select({ok, wrong});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("candidates[1]"), std::string::npos) << s.message();
  s = select({ok, ok, nan});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("candidates[2]"), std::string::npos) << s.message();
  Observation o;
  o.features = wrong;
  o.reward = 1;
  EXPECT_EQ(p->Update(o).code(), absl::StatusCode::kInvalidArgument);
  o.features = nan;
  EXPECT_EQ(p->Update(o).code(), absl::StatusCode::kInvalidArgument);
  o.features = ok;
  o.reward = std::nan("");
  EXPECT_EQ(p->Update(o).code(), absl::StatusCode::kInvalidArgument);
  o.reward = INFINITY;
  EXPECT_EQ(p->Update(o).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Saved(*p), before);
  // A valid call still works afterwards and does change the state.
  o.reward = 0.5;
  EXPECT_TRUE(p->Update(o).ok());
  EXPECT_NE(Saved(*p), before);
}

TEST(CandidateKernel, BkbBadInputIsRefusedWithStateUnchanged) {
  ExpectRefusalsLeaveStateUnchanged(BkbConfig(3.0, 2));
  ExpectRefusalsLeaveStateUnchanged(BkbConfig(3.0, 2, 4));
}
TEST(CandidateKernel, GpUcbBadInputIsRefusedWithStateUnchanged) {
  ExpectRefusalsLeaveStateUnchanged(GpConfig(2));
}

TEST(CandidateKernel, ConfigErrorsNameTheField) {
  auto expect_invalid = [](const bandit::v1::PolicyConfig& c, const std::string& field) {
    auto p = CreatePolicy(c, 1);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find(field), std::string::npos) << p.status().message();
  };
  auto both = BkbConfig(2.0, 2);
  both.set_num_arms(3);
  expect_invalid(both, "bkb.dimension");
  expect_invalid(BkbConfig(2.0, 5000), "bkb.dimension");
  auto zero = BkbConfig(2.0, 2);
  zero.mutable_bkb()->set_dimension(0);
  expect_invalid(zero, "bkb.dimension");
  auto lazy_fixed = BkbConfig(2.0, 0, 3);
  testing::FillArms(testing::RandomArms(3, 2, 1), &lazy_fixed);
  expect_invalid(lazy_fixed, "bkb.resample_every");
  auto bad_every = BkbConfig(2.0, 2);
  bad_every.mutable_bkb()->set_resample_every(0);
  expect_invalid(bad_every, "bkb.resample_every");
  auto gp_both = GpConfig(2);
  testing::FillArms(testing::RandomArms(3, 2, 1), &gp_both);
  expect_invalid(gp_both, "gp_ucb.dimension");
  auto gp_pulls = GpConfig(2);
  gp_pulls.mutable_gp_ucb()->set_max_pulls(0);
  expect_invalid(gp_pulls, "gp_ucb.max_pulls");
  // The served cap: 5000 pulls (a 200 MB factor), not more.
  gp_pulls.mutable_gp_ucb()->set_max_pulls(5001);
  expect_invalid(gp_pulls, "gp_ucb.max_pulls");
  gp_pulls.mutable_gp_ucb()->set_max_pulls(5000);
  EXPECT_TRUE(CreatePolicy(gp_pulls, 1).ok());
  auto gp_default = MustCreate(GpConfig(2), 1);
  EXPECT_EQ(dynamic_cast<CandidateGpUcb*>(gp_default.get())->max_pulls(), 2000);
}

TEST(CandidateKernel, SizeLimitsRefuseWithResourceExhaustedAndKeepState) {
  auto gp_config = GpConfig(2);
  gp_config.mutable_gp_ucb()->set_max_pulls(5);
  auto bkb_config = BkbConfig(2.0, 2);
  bkb_config.mutable_bkb()->set_max_points(5);
  for (const auto& config : {gp_config, bkb_config}) {
    auto p = MustCreate(config, 1);
    Rng env(1), noise(2);
    Play(*p, 5, 4, 2, env, noise);
    const std::string before = Saved(*p);
    Observation o;
    o.features = Vector::Constant(2, 0.123);
    o.reward = 1;
    EXPECT_EQ(p->Update(o).code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(Saved(*p), before);
  }
  // BKB counts distinct points: a repeat of a known point is still learned.
  auto p = MustCreate(bkb_config, 1);
  Observation o;
  for (int i = 0; i < 5; ++i) {
    o.features = Vector::Constant(2, 0.1 * i);
    o.reward = 1;
    ASSERT_TRUE(p->Update(o).ok());
  }
  o.features = Vector::Constant(2, 0.2);
  EXPECT_TRUE(p->Update(o).ok());
  EXPECT_EQ(dynamic_cast<CandidateBkb*>(p.get())->points(), 5);
  EXPECT_EQ(dynamic_cast<CandidateBkb*>(p.get())->observations(), 6);
}

TEST(CandidateKernel, RestoreRefusesCorruptState) {
  auto p = MustCreate(BkbConfig(3.0, 2), 4);
  Rng env(1), noise(2);
  Play(*p, 20, 6, 2, env, noise);
  bandit::v1::PolicyState state;
  p->Save(&state);
  const std::string before = Saved(*p);
  for (auto& t : *state.mutable_tensors())
    if (t.name() == "counts") t.set_data(0, 0.5);
  auto q = MustCreate(BkbConfig(3.0, 2), 4);
  const std::string fresh = Saved(*q);
  EXPECT_EQ(q->Restore(state).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Saved(*q), fresh);
  // A factor that is not the Cholesky factor of gram + lambda I is refused (the lazy form saves
  // it between redraws).
  auto lazy = MustCreate(BkbConfig(3.0, 2, 50), 4);
  Play(*lazy, 20, 6, 2, env, noise);
  bandit::v1::PolicyState lazy_state;
  lazy->Save(&lazy_state);
  for (auto& t : *lazy_state.mutable_tensors())
    if (t.name() == "cholesky") t.set_data(0, t.data(0) * 1.01);
  auto q2 = MustCreate(BkbConfig(3.0, 2, 50), 4);
  const std::string fresh2 = Saved(*q2);
  const absl::Status bad_factor = q2->Restore(lazy_state);
  EXPECT_EQ(bad_factor.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_factor.message().find("cholesky"), std::string::npos) << bad_factor.message();
  EXPECT_EQ(Saved(*q2), fresh2);
  // GP-UCB state refused by BKB.
  auto g = MustCreate(GpConfig(2), 4);
  bandit::v1::PolicyState gstate;
  g->Save(&gstate);
  EXPECT_EQ(q->Restore(gstate).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bandit
