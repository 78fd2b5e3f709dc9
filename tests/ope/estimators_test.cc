// Off-policy estimators against hand-computed values, closed forms, and ground truth from a
// simulator with known expected rewards.
#include "core/ope/estimators.h"
#include "core/ope/sparse_direct_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace bandit::ope {
namespace BANDIT_UNITY_ID {

ScoredEvent Event(int a, double mu, double r, std::vector<double> pi, std::vector<double> q) {
  ScoredEvent e;
  e.logged_action = a;
  e.logged_propensity = mu;
  e.reward = r;
  e.target = Eigen::Map<const Vector>(pi.data(), pi.size());
  e.q = Eigen::Map<const Vector>(q.data(), q.size());
  return e;
}

// Three events worked out by hand (weights 2, 2, 0.5).
std::vector<ScoredEvent> HandLog() {
  return {Event(0, 0.5, 1.0, {1.0, 0.0}, {0.0, 0.0}), Event(1, 0.25, 0.0, {0.5, 0.5}, {0.2, 0.4}),
          Event(0, 0.8, 0.5, {0.4, 0.6}, {0.5, 0.1})};
}

TEST(Estimators, HandMadeLogMatchesHandComputedValues) {
  Estimators est;
  for (const auto& e : HandLog()) est.Add(e);
  ASSERT_EQ(est.events(), 3);
  // IPS: (2*1 + 2*0 + 0.5*0.5) / 3.
  EXPECT_NEAR(est.Ips().value, 0.75, 1e-15);
  // Terms 2, 0, 0.25: sample variance ((1.25)^2 + (0.75)^2 + (0.5)^2) / 2 = 1.1875.
  EXPECT_NEAR(est.Ips().se, std::sqrt(1.1875 / 3), 1e-15);
  EXPECT_NEAR(est.Ips().lo, 0.75 - 1.959963984540054 * std::sqrt(1.1875 / 3), 1e-12);
  // SNIPS: 2.25 / 4.5; delta-method se: sqrt(4*0.25 + 4*0.25 + 0.25*0) / 4.5.
  EXPECT_NEAR(est.Snips().value, 0.5, 1e-15);
  EXPECT_NEAR(est.Snips().se, std::sqrt(2.0) / 4.5, 1e-15);
  // DM terms: 0, 0.5*0.2 + 0.5*0.4 = 0.3, 0.4*0.5 + 0.6*0.1 = 0.26.
  EXPECT_NEAR(est.DirectMethod().value, 0.56 / 3, 1e-15);
  // DR terms: 0 + 2*(1 - 0) = 2, 0.3 + 2*(0 - 0.4) = -0.5, 0.26 + 0.5*(0.5 - 0.5) = 0.26.
  EXPECT_NEAR(est.DoublyRobust().value, 1.76 / 3, 1e-15);
  EXPECT_NEAR(est.Logged().value, 0.5, 1e-15);
  EXPECT_NEAR(est.EffectiveSampleSize(), 4.5 * 4.5 / 8.25, 1e-12);
  EXPECT_EQ(est.clipped(), 0);
  EXPECT_DOUBLE_EQ(est.largest_weight(), 2.0);
}

TEST(Estimators, ClippingCapsWeightsAndCountsThem) {
  Estimators est(/*max_weight=*/1.5);
  for (const auto& e : HandLog()) est.Add(e);
  // Weights 1.5, 1.5, 0.5.
  EXPECT_NEAR(est.Ips().value, (1.5 + 0.25) / 3, 1e-15);
  EXPECT_NEAR(est.Snips().value, 1.75 / 3.5, 1e-15);
  EXPECT_EQ(est.clipped(), 2);
  EXPECT_DOUBLE_EQ(est.largest_weight(), 2.0);  // before clipping
}

TEST(Estimators, UniformLoggingAndUniformTargetGiveThePlainMean) {
  // pi = mu: every weight is 1, so IPS and SNIPS are the mean reward exactly.
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0, 1);
  Estimators est;
  double sum = 0;
  const int k = 4, n = 1000;
  for (int t = 0; t < n; ++t) {
    const int a = static_cast<int>(rng() % k);
    const double r = u(rng);
    sum += r;
    est.Add(Event(a, 1.0 / k, r, std::vector<double>(k, 1.0 / k), std::vector<double>(k, 0.3)));
  }
  EXPECT_NEAR(est.Ips().value, sum / n, 1e-12);
  EXPECT_NEAR(est.Snips().value, sum / n, 1e-12);
  EXPECT_NEAR(est.Logged().value, sum / n, 1e-12);
  EXPECT_NEAR(est.EffectiveSampleSize(), n, 1e-9);
}

TEST(DirectModel, ArmMeansShrinkTowardsTheGlobalMean) {
  DirectModel m(/*lambda=*/1.0);
  const std::vector<std::string> arms = {"a", "b"};
  m.Learn({}, nullptr, &arms, 0, 1.0);
  m.Learn({}, nullptr, &arms, 0, 1.0);
  m.Learn({}, nullptr, &arms, 1, 0.0);
  const Vector q = m.Predict({}, nullptr, &arms, 2);
  const double mean = 2.0 / 3;
  EXPECT_NEAR(q[0], (2.0 + mean) / 3.0, 1e-15);
  EXPECT_NEAR(q[1], (0.0 + mean) / 2.0, 1e-15);
}

TEST(DirectModel, CandidateRidgeMatchesTheNormalEquations) {
  DirectModel m(/*lambda=*/0.5);
  std::vector<Vector> cands = {Vector::Constant(2, 1.0), Vector::Constant(2, -1.0)};
  cands[0][1] = 0.0;
  Eigen::MatrixXd a = 0.5 * Eigen::MatrixXd::Identity(3, 3);
  Vector b = Vector::Zero(3);
  const double rewards[] = {1.0, 0.2, 0.7};
  const int chosen[] = {0, 1, 0};
  for (int t = 0; t < 3; ++t) {
    m.Learn(cands, nullptr, nullptr, chosen[t], rewards[t]);
    Vector z(3);
    z << cands[chosen[t]], 1.0;
    a += z * z.transpose();
    b += rewards[t] * z;
  }
  const Vector theta = a.inverse() * b;
  const Vector q = m.Predict(cands, nullptr, nullptr, 2);
  for (int i = 0; i < 2; ++i) {
    Vector z(3);
    z << cands[i], 1.0;
    EXPECT_NEAR(q[i], z.dot(theta), 1e-12);
  }
}

// The factor kept by rank-one updates against an exact solve of the same ridge system: the sums
// accumulated here independently, in long double, and solved by an LDLT in long double. Many
// rewards, two feature scales (the larger one makes a far worse conditioned), candidates and
// point inputs. The predictions agree to about 1e-14 (asserted: 1e-11, relative).
struct ExactRidge {
  using Mat = Eigen::Matrix<long double, Eigen::Dynamic, Eigen::Dynamic>;
  using Vec = Eigen::Matrix<long double, Eigen::Dynamic, 1>;
  Mat a;
  Vec b;
  ExactRidge(int dim, double lambda) : a(Mat::Identity(dim, dim) * lambda), b(Vec::Zero(dim)) {}
  void Learn(const Vector& features, double r) {
    Vec z(features.size() + 1);
    z << features.cast<long double>(), 1.0L;
    a += z * z.transpose();
    b += static_cast<long double>(r) * z;
  }
  Vec Coefficients() const { return a.ldlt().solve(b); }
  static double Predict(const Vec& theta, const Vector& features) {
    Vec z(features.size() + 1);
    z << features.cast<long double>(), 1.0L;
    return static_cast<double>(z.dot(theta));
  }
};

TEST(DirectModel, FactorUpdatesMatchAnExactSolveOverManyRewards) {
  constexpr int kDim = 20, kCandidates = 50, kRewards = 20000;
  for (const double scale : {1.0, 30.0}) {
    SCOPED_TRACE(::testing::Message() << "feature scale " << scale);
    std::mt19937_64 rng(11);
    std::uniform_real_distribution<double> coordinate(-scale / std::sqrt(kDim),
                                                      scale / std::sqrt(kDim));
    std::uniform_real_distribution<double> u(0, 1);
    auto draw = [&] {
      Vector v(kDim);
      for (int j = 0; j < kDim; ++j) v[j] = coordinate(rng);
      return v;
    };
    DirectModel m(/*lambda=*/1.0);
    ExactRidge exact(kDim + 1, 1.0);
    double worst = 0;
    for (int t = 0; t <= kRewards; ++t) {
      if (t % 1000 == 0) {
        std::vector<Vector> cands(kCandidates);
        for (auto& c : cands) c = draw();
        const Vector q = m.Predict(cands, nullptr, nullptr, kCandidates);
        const ExactRidge::Vec theta = exact.Coefficients();
        for (int i = 0; i < kCandidates; ++i) {
          const double want = ExactRidge::Predict(theta, cands[i]);
          worst = std::max(worst, std::abs(q[i] - want));
          ASSERT_NEAR(q[i], want, 1e-11 * (1 + std::abs(want)))
              << "after " << t << " rewards, candidate " << i;
        }
      }
      const Vector chosen = draw();
      // A reward that depends on the features (the model has something to learn), plus noise.
      const double r = (chosen[0] + chosen[1]) / scale + (u(rng) - 0.5);
      m.LearnCandidate(chosen, r);
      exact.Learn(chosen, r);
    }
    std::printf("scale %g: largest |q - exact| over %d rewards %.3g\n", scale, kRewards, worst);
  }
}

TEST(DirectModel, PointInputFactorsMatchAnExactSolve) {
  constexpr int kDim = 8, kActions = 3, kRewards = 5000;
  std::mt19937_64 rng(5);
  std::normal_distribution<double> g(0, 1);
  DirectModel m(/*lambda=*/0.5);
  std::vector<ExactRidge> exact(kActions, ExactRidge(kDim + 1, 0.5));
  Vector x(kDim);
  for (int t = 1; t <= kRewards; ++t) {
    for (int j = 0; j < kDim; ++j) x[j] = g(rng);
    const Vector q = m.Predict({}, &x, nullptr, kActions);
    if (t % 500 == 1)
      for (int a = 0; a < kActions; ++a) {
        const double want = ExactRidge::Predict(exact[a].Coefficients(), x);
        ASSERT_NEAR(q[a], want, 1e-11 * (1 + std::abs(want))) << "after " << t - 1 << " rewards";
      }
    const int a = t % kActions;
    const double r = x[a] - 0.5 * x[(a + 1) % kDim] + 0.1 * g(rng);
    m.Learn({}, &x, nullptr, a, r);
    exact[a].Learn(x, r);
  }
}

// Exact resume: a model restored from its saved state predicts bit for bit as the uninterrupted
// one, rewards after rewards (the factor's last bits depend on the order of the updates, so
// factoring the restored a afresh would not).
TEST(DirectModel, RestoredModelPredictsBitForBitAsTheUninterruptedOne) {
  constexpr int kDim = 6, kCandidates = 7;
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  auto draw = [&] {
    std::vector<Vector> c(kCandidates, Vector(kDim));
    for (auto& v : c)
      for (int j = 0; j < kDim; ++j) v[j] = u(rng);
    return c;
  };
  DirectModel m(/*lambda=*/1.0);
  for (int t = 0; t < 700; ++t) {
    const auto c = draw();
    m.Learn(c, nullptr, nullptr, t % kCandidates, u(rng));
  }
  bandit::v1::DirectModelState saved;
  m.Save(&saved);
  ASSERT_TRUE(saved.shared().has_cholesky());
  DirectModel restored;
  ASSERT_TRUE(restored.Restore(saved).ok());
  // The same model refactored from a alone: close, but not the same bits.
  bandit::v1::DirectModelState without_factor = saved;
  without_factor.mutable_shared()->clear_cholesky();
  DirectModel refactored;
  ASSERT_TRUE(refactored.Restore(without_factor).ok());
  int differing_bits = 0;
  for (int t = 0; t < 300; ++t) {
    const auto c = draw();
    const Vector q = m.Predict(c, nullptr, nullptr, kCandidates);
    const Vector q_restored = restored.Predict(c, nullptr, nullptr, kCandidates);
    const Vector q_refactored = refactored.Predict(c, nullptr, nullptr, kCandidates);
    for (int i = 0; i < kCandidates; ++i) {
      ASSERT_EQ(q[i], q_restored[i]) << "step " << t << " candidate " << i;
      ASSERT_NEAR(q[i], q_refactored[i], 1e-12);
      differing_bits += q[i] != q_refactored[i];
    }
    const double r = u(rng);
    m.Learn(c, nullptr, nullptr, t % kCandidates, r);
    restored.Learn(c, nullptr, nullptr, t % kCandidates, r);
    refactored.Learn(c, nullptr, nullptr, t % kCandidates, r);
  }
  // Why the factor is saved at all: without it the bits differ somewhere.
  EXPECT_GT(differing_bits, 0);
}

TEST(DirectModel, RestoreRefusesABadFactor) {
  DirectModel m(/*lambda=*/1.0);
  std::vector<Vector> c = {Vector::Constant(2, 0.5)};
  m.Learn(c, nullptr, nullptr, 0, 1.0);
  bandit::v1::DirectModelState saved;
  m.Save(&saved);
  DirectModel out;
  {
    auto bad = saved;
    bad.mutable_shared()->mutable_cholesky()->set_rows(2);
    const absl::Status s = out.Restore(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("Cholesky factor"), std::string::npos) << s.message();
  }
  {
    auto bad = saved;
    bad.mutable_shared()->mutable_cholesky()->set_data(4, -1.0);  // l(1, 1)
    EXPECT_EQ(out.Restore(bad).code(), absl::StatusCode::kInvalidArgument);
  }
  {
    auto bad = saved;
    bad.mutable_shared()->mutable_cholesky()->set_data(0, NAN);
    EXPECT_EQ(out.Restore(bad).code(), absl::StatusCode::kInvalidArgument);
  }
  // Nothing changed by the refusals: `out` is still an empty model.
  EXPECT_EQ(out.StateBytes(), 0);
}

// Ground truth: Bernoulli arms with known means, a fixed target policy, logs from a uniform and
// from an epsilon-greedy logging policy. Over 100 seeds the target's true value must lie in
// each estimator's 95 % interval in at least 90 % of the runs, and DR (with an informative
// per-arm direct model) must vary less across seeds than IPS.
struct Coverage {
  int ips = 0, snips = 0, dr = 0;
  double ips_var = 0, dr_var = 0;
};

Coverage RunCoverage(const std::vector<double>& logging) {
  const std::vector<double> means = {0.2, 0.4, 0.5, 0.7};
  const std::vector<double> target = {0.1, 0.1, 0.1, 0.7};
  const std::vector<std::string> arms = {"a0", "a1", "a2", "a3"};
  double truth = 0;
  for (int i = 0; i < 4; ++i) truth += target[i] * means[i];
  Coverage c;
  std::vector<double> ips, dr;
  for (int seed = 1; seed <= 100; ++seed) {
    std::mt19937_64 rng(seed);
    std::discrete_distribution<int> log_policy(logging.begin(), logging.end());
    std::uniform_real_distribution<double> u(0, 1);
    Estimators est;
    DirectModel model;
    for (int t = 0; t < 2000; ++t) {
      const int a = log_policy(rng);
      const double r = u(rng) < means[a] ? 1.0 : 0.0;
      ScoredEvent e;
      e.logged_action = a;
      e.logged_propensity = logging[a];
      e.reward = r;
      e.target = Eigen::Map<const Vector>(target.data(), 4);
      e.q = model.Predict({}, nullptr, &arms, 4);
      est.Add(e);
      model.Learn({}, nullptr, &arms, a, r);
    }
    c.ips += est.Ips().lo <= truth && truth <= est.Ips().hi;
    c.snips += est.Snips().lo <= truth && truth <= est.Snips().hi;
    c.dr += est.DoublyRobust().lo <= truth && truth <= est.DoublyRobust().hi;
    ips.push_back(est.Ips().value);
    dr.push_back(est.DoublyRobust().value);
  }
  auto var = [](const std::vector<double>& v) {
    double m = 0, s = 0;
    for (double x : v) m += x;
    m /= v.size();
    for (double x : v) s += (x - m) * (x - m);
    return s / (v.size() - 1);
  };
  c.ips_var = var(ips);
  c.dr_var = var(dr);
  std::printf("coverage of %.3f in 100 runs: IPS %d, SNIPS %d, DR %d; variance IPS %.3g, DR %.3g\n",
              truth, c.ips, c.snips, c.dr, c.ips_var, c.dr_var);
  return c;
}

TEST(Estimators, IntervalsCoverTheTrueValueUnderUniformLogging) {
  const Coverage c = RunCoverage({0.25, 0.25, 0.25, 0.25});
  EXPECT_GE(c.ips, 90);
  EXPECT_GE(c.snips, 90);
  EXPECT_GE(c.dr, 90);
  EXPECT_LT(c.dr_var, c.ips_var);
}

TEST(Estimators, IntervalsCoverTheTrueValueUnderEpsilonGreedyLogging) {
  // epsilon = 0.4 around arm 1: 0.1 + 0.6 on arm 1, 0.1 elsewhere.
  const Coverage c = RunCoverage({0.1, 0.7, 0.1, 0.1});
  EXPECT_GE(c.ips, 90);
  EXPECT_GE(c.snips, 90);
  EXPECT_GE(c.dr, 90);
  EXPECT_LT(c.dr_var, c.ips_var);
}

// The diagonal ridge in closed form: per coordinate a = sum z^2, b = sum r z (repeats added up
// first), the intercept a coordinate of value 1, q = sum z b / (lambda + a) + b0 / (lambda + a0).
TEST(SparseDirectModel, PredictsTheDiagonalRidgeInClosedForm) {
  SparseDirectModel m(/*lambda=*/1.0, /*dimension=*/1 << 18);
  auto vec = [](std::vector<uint32_t> i, std::vector<double> v) {
    return SparseVector{std::move(i), std::move(v)};
  };
  const SparseVector first = vec({7, 200000}, {2, 1});
  const SparseVector second = vec({7, 7}, {0.5, 0.5});  // z_7 = 1
  m.Learn(first, 1.0);
  m.Learn(second, 3.0);
  // Coordinate 7: a = 4 + 1 = 5, b = 2 + 3 = 5. Coordinate 200000: a = 1, b = 1. Intercept:
  // a = 2, b = 4. An unseen coordinate contributes nothing.
  const std::vector<SparseVector> actions = {vec({7}, {1}), vec({200000, 9}, {2, 5}), vec({}, {})};
  const Vector q = m.Predict(actions);
  EXPECT_DOUBLE_EQ(q[0], 5.0 / 6 + 4.0 / 3);
  EXPECT_DOUBLE_EQ(q[1], 2 * 1.0 / 2 + 4.0 / 3);
  EXPECT_DOUBLE_EQ(q[2], 4.0 / 3);
  EXPECT_EQ(m.coordinates(), 2);
}

// Save writes the coordinates in index order (the same model, the same bytes, whatever the
// hash map's order); a restored model predicts bit for bit as the saved one and learns on
// alike. A state that is not a diagonal ridge of this dimension is refused, the model as it was.
TEST(SparseDirectModel, SaveRestoreResumesExactlyAndRefusesBadStates) {
  namespace v1 = bandit::v1;
  SparseDirectModel m(/*lambda=*/0.5, /*dimension=*/1 << 18);
  auto vec = [](std::vector<uint32_t> i, std::vector<double> v) {
    return SparseVector{std::move(i), std::move(v)};
  };
  m.Learn(vec({90000, 7, 3}, {1.5, -2, 0.25}), 1.0);
  m.Learn(vec({7, 131071}, {1, 1}), 0.0);
  m.Learn(vec({3}, {4}), 2.5);
  v1::DirectModelState state;
  m.Save(&state);
  ASSERT_TRUE(state.has_diagonal());
  EXPECT_EQ(state.lambda(), 0.5);
  EXPECT_EQ(state.diagonal().dimension(), 1 << 18);
  EXPECT_EQ(std::vector<uint32_t>(state.diagonal().index().begin(), state.diagonal().index().end()),
            (std::vector<uint32_t>{3, 7, 90000, 131071}));
  EXPECT_EQ(state.diagonal().a(0), 0.25 * 0.25 + 16);  // coordinate 3
  EXPECT_EQ(state.diagonal().b(0), 0.25 + 4 * 2.5);
  EXPECT_EQ(state.diagonal().intercept_a(), 3);
  EXPECT_EQ(state.diagonal().intercept_b(), 3.5);

  SparseDirectModel restored(/*lambda=*/0.5, /*dimension=*/1 << 18);
  ASSERT_TRUE(restored.Restore(state).ok());
  v1::DirectModelState again;
  restored.Save(&again);
  EXPECT_EQ(again.SerializeAsString(), state.SerializeAsString());
  const std::vector<SparseVector> actions = {vec({3, 7}, {1, 1}), vec({131071}, {2}),
                                             vec({5}, {1})};
  const Vector q0 = m.Predict(actions), q1 = restored.Predict(actions);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(q0[i], q1[i]);
  m.Learn(actions[1], 1.0);
  restored.Learn(actions[1], 1.0);
  EXPECT_EQ(m.Predict(actions)[1], restored.Predict(actions)[1]);

  auto refused = [&](const std::function<void(v1::DirectModelState*)>& breakit,
                     const std::string& says) {
    v1::DirectModelState bad = state;
    breakit(&bad);
    SparseDirectModel target(/*lambda=*/0.5, /*dimension=*/1 << 18);
    target.Learn(vec({11}, {1}), 1.0);
    const auto s = target.Restore(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << says;
    EXPECT_NE(s.message().find(says), std::string::npos) << s;
    EXPECT_EQ(target.coordinates(), 1) << says;  // unchanged
  };
  refused([](v1::DirectModelState* b) { b->clear_diagonal(); }, "no diagonal state");
  refused([](v1::DirectModelState* b) { b->mutable_diagonal()->set_dimension(1 << 10); },
          "expected 262144");
  refused([](v1::DirectModelState* b) { b->mutable_diagonal()->mutable_a()->RemoveLast(); },
          "expected as many of each");
  refused([](v1::DirectModelState* b) { b->mutable_diagonal()->set_index(1, 3); },
          "increasing order");
  refused([](v1::DirectModelState* b) { b->mutable_diagonal()->set_index(3, 1 << 18); },
          "below the dimension");
  refused([](v1::DirectModelState* b) { b->mutable_diagonal()->set_a(2, -1); }, "a >= 0");
  refused(
      [](v1::DirectModelState* b) {
        b->mutable_diagonal()->set_b(2, std::numeric_limits<double>::infinity());
      },
      "finite sums");
  refused([](v1::DirectModelState* b) { b->set_lambda(0); }, "positive number");
}

}  // namespace
}  // namespace bandit::ope
