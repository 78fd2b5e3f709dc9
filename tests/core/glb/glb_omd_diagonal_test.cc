// GLB-OMD with a diagonal covariance, checked against a slow implementation of its formulas over
// dense vectors written here (the projection by bisection on the multiplier), and against the
// paper's full-matrix GLB-OMD where the two must agree.
#include "core/glb/glb_omd_diagonal.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "core/glb/glb_omd.h"
#include "core/registry.h"
#include "core/rng.h"

namespace bandit::glb {
namespace BANDIT_UNITY_ID {

bandit::v1::PolicyConfig Config(int d, double S, double lambda, bool diagonal = true) {
  bandit::v1::PolicyConfig c;
  auto* g = c.mutable_glb_omd();
  g->set_dimension(d);
  g->set_s(S);
  g->set_lambda(lambda);
  g->set_radius_multiplier(0.2);
  g->set_max_feature_norm(4.0);
  if (diagonal) g->set_covariance(bandit::v1::COVARIANCE_DIAGONAL);
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

double Sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

// The diagonal GLB-OMD of the header, written out for the logistic link (g = 1, eta = 1 + R S,
// R = 1) over dense vectors; the projection's multiplier by plain bisection.
struct SlowDiagonalOmd {
  Vector theta, h;
  double S, eta;
  SlowDiagonalOmd(int d, double S_, double lambda)
      : theta(Vector::Zero(d)), h(Vector::Constant(d, lambda)), S(S_), eta(1.0 + S_) {}
  int Select(const std::vector<Vector>& xs, double beta) const {
    int best = -1;
    double best_ucb = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const double ucb =
          xs[i].dot(theta) + beta * std::sqrt((xs[i].array().square() / h.array()).sum());
      if (best < 0 || ucb > best_ucb) {
        best = static_cast<int>(i);
        best_ucb = ucb;
      }
    }
    return best;
  }
  void Update(const Vector& x, double r) {
    const double z = x.dot(theta);
    const double mu = Sigmoid(z);
    const double grad = mu - r, c = eta * mu * (1 - mu);
    const Vector ht = (h.array() + c * x.array().square()).matrix();
    Vector zeta = (theta.array() - eta * grad * x.array() / ht.array()).matrix();
    if (zeta.norm() > S) {
      auto at = [&](double nu) {
        return (ht.array() * zeta.array() / (ht.array() + nu)).matrix().eval();
      };
      double lo = 0, hi = 1;
      while (at(hi).norm() > S) hi *= 2;
      for (int i = 0; i < 200; ++i) {
        const double mid = 0.5 * (lo + hi);
        (at(mid).norm() > S ? lo : hi) = mid;
      }
      zeta = at(hi);
    }
    theta = zeta;
    const double mu2 = Sigmoid(x.dot(theta));
    h.array() += mu2 * (1 - mu2) * x.array().square();
  }
};

TEST(GlbOmdDiagonal, FactoryBoundsAndForm) {
  auto p = Make(Config(1 << 18, 1.0, 1.0));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->name(), "glb_omd");
  EXPECT_TRUE(p->TakesSparse());
  // theta, diag(H), theta and 1/h beside them for scoring (single precision: 8 bytes), the
  // support (reserved at d), its membership flags and the projection's scratch positions, the
  // coalescing bitmap (1 bit per coordinate).
  EXPECT_EQ(p->StateBytes(),
            (int64_t{1} << 18) * (16 + 8 + 4 + 1 + 8) + (int64_t{1} << 18) / 8 + 8);
  EXPECT_EQ(CreatePolicy(Config(1 << 18, 1.0, 1.0, false), 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto bad = Config(4, 1.0, 1.0);
  bad.mutable_glb_omd()->set_covariance(static_cast<bandit::v1::Covariance>(9));
  EXPECT_EQ(CreatePolicy(bad, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

// Sparse inputs with repeated indices through the policy, dense through the slow formulas: the
// same decisions, the same state to rounding, with the projection active in many rounds.
TEST(GlbOmdDiagonal, MatchesSlowDiagonalFormulas) {
  const int d = 48, arms = 6;
  for (double S : {0.4, 5.0}) {
    auto p = Make(Config(d, S, 2.0));
    auto& omd = dynamic_cast<GlbOmdDiagonal&>(*p);
    SlowDiagonalOmd slow(d, S, 2.0);
    Rng rng(17);
    Vector w = Vector::Zero(d);
    for (int j = 0; j < d; ++j) w[j] = rng.Normal();
    int projected = 0;
    for (int t = 0; t < 300; ++t) {
      std::vector<SparseVector> xs;
      std::vector<Vector> dense;
      for (int i = 0; i < arms; ++i) {
        xs.push_back(RandomSparse(rng, d, 8));
        dense.push_back(Dense(xs.back(), d));
      }
      SelectContext ctx;
      ctx.sparse_candidates = xs;
      const double beta = omd.Beta();
      auto dec = omd.Select(ctx);
      ASSERT_TRUE(dec.ok()) << dec.status();
      ASSERT_EQ(dec->arm, slow.Select(dense, beta)) << "S " << S << " round " << t;
      const double r = rng.Bernoulli(Sigmoid(3 * dense[dec->arm].dot(w))) ? 1.0 : 0.0;
      Observation o;
      o.sparse_features = xs[dec->arm];
      o.reward = r;
      ASSERT_TRUE(omd.Update(o).ok());
      slow.Update(dense[dec->arm], r);
      if (std::abs(slow.theta.norm() - S) < 1e-9) ++projected;
      ASSERT_LT((omd.theta() - slow.theta).norm(), 1e-10 * (1 + slow.theta.norm())) << t;
      ASSERT_LT((omd.h_diagonal() - slow.h).norm(), 1e-10 * slow.h.norm()) << t;
    }
    if (S < 1) {
      EXPECT_GT(projected, 50) << "the projection should be active";
    } else {
      EXPECT_LT(projected, 300) << "some rounds should stay inside the ball";
    }
  }
}

// With one-hot candidates H_t stays diagonal, so the approximation is the paper's GLB-OMD.
TEST(GlbOmdDiagonal, EqualsFullGlbOmdOnOneHotFeatures) {
  const int d = 10;
  for (double S : {0.5, 50.0}) {
    auto full = Make(Config(d, S, 1.0, false));
    auto diag = Make(Config(d, S, 1.0));
    std::vector<Vector> xs(d, Vector::Zero(d));
    for (int i = 0; i < d; ++i) xs[i][i] = 0.5 + 0.05 * i;
    Rng rng(2);
    for (int t = 0; t < 200; ++t) {
      SelectContext ctx;
      ctx.candidates = xs;
      auto a = full->Select(ctx);
      auto b = diag->Select(ctx);
      ASSERT_TRUE(a.ok() && b.ok());
      ASSERT_EQ(a->arm, b->arm) << "S " << S << " round " << t;
      Observation o;
      o.features = xs[a->arm];
      o.reward = rng.Bernoulli(a->arm == 4 ? 0.8 : 0.3) ? 1.0 : 0.0;
      ASSERT_TRUE(full->Update(o).ok());
      ASSERT_TRUE(diag->Update(o).ok());
    }
    EXPECT_LT((full->Weights() - diag->Weights()).norm(), 1e-9);
  }
}

// Restore(Save()) continues exactly; bad inputs change nothing.
TEST(GlbOmdDiagonal, ExactResumeAndValidateBeforeMutate) {
  const int d = 1 << 12;
  auto p = Make(Config(d, 0.5, 1.0));
  auto round = [&](Policy& q, Rng& r) {
    std::vector<SparseVector> xs;
    for (int i = 0; i < 5; ++i) xs.push_back(RandomSparse(r, d, 10));
    SelectContext ctx;
    ctx.sparse_candidates = xs;
    auto dec = q.Select(ctx);
    EXPECT_TRUE(dec.ok());
    Observation o;
    o.sparse_features = xs[dec->arm];
    o.reward = r.Bernoulli(0.5) ? 1.0 : 0.0;
    EXPECT_TRUE(q.Update(o).ok());
    return dec->arm;
  };
  Rng rng(4);
  for (int t = 0; t < 60; ++t) round(*p, rng);
  bandit::v1::PolicyState saved;
  p->Save(&saved);
  auto q = Make(Config(d, 0.5, 1.0));
  ASSERT_TRUE(q->Restore(saved).ok());
  Rng r1(8), r2(8);
  for (int t = 0; t < 60; ++t) ASSERT_EQ(round(*p, r1), round(*q, r2));
  bandit::v1::PolicyState a, b;
  p->Save(&a);
  q->Save(&b);
  EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());

  SparseVector out_of_range{{1, static_cast<uint32_t>(d)}, {0.1, 0.1}};
  SparseVector inf{{1, 2}, {0.1, std::numeric_limits<double>::infinity()}};
  SparseVector too_long{{1, 2}, {3.0, 3.0}};  // norm 4.24 > max_feature_norm 4
  for (const SparseVector& bad : {out_of_range, inf, too_long}) {
    std::vector<SparseVector> xs = {RandomSparse(rng, d, 4), bad};
    SelectContext ctx;
    ctx.sparse_candidates = xs;
    EXPECT_EQ(p->Select(ctx).status().code(), absl::StatusCode::kInvalidArgument);
    Observation o;
    o.sparse_features = bad;
    o.reward = 1;
    EXPECT_EQ(p->Update(o).code(), absl::StatusCode::kInvalidArgument);
  }
  Observation bad_reward;
  bad_reward.sparse_features = RandomSparse(rng, d, 3);
  bad_reward.reward = 2.0;  // logistic: rewards in [0, 1]
  EXPECT_EQ(p->Update(bad_reward).code(), absl::StatusCode::kInvalidArgument);
  bandit::v1::PolicyState after;
  p->Save(&after);
  EXPECT_EQ(after.SerializeAsString(), a.SerializeAsString());
}

}  // namespace
}  // namespace bandit::glb
