// Each objective's value and gradient against (a) a direct computation from the raw pooled
// samples with weights q_j = alpha_{I_j} / n_{I_j} (eq. 9) and (b) central finite differences.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "core/mixture/fd_objective.h"
#include "core/mixture/features.h"
#include "core/mixture/kd_objective.h"
#include "core/mixture/rke_objective.h"
#include "core/mixture/stats.h"
#include "core/mixture/vendi_objective.h"
#include "core/rng.h"

namespace bandit::mixture {
namespace BANDIT_UNITY_ID {

struct Pool {
  std::vector<Vector> x;  // raw samples
  std::vector<int> arm;   // I_j
  std::vector<int> n;     // n_i
};

Pool MakePool(int m, int d, Rng& rng) {
  Pool p;
  p.n.assign(m, 0);
  for (int i = 0; i < m; ++i) {
    const int ni = 4 + i;  // 4, 5, 6, ...
    Vector centre(d);
    for (int k = 0; k < d; ++k) centre[k] = rng.Normal(0, 1.5);
    for (int r = 0; r < ni; ++r) {
      Vector x(d);
      for (int k = 0; k < d; ++k) x[k] = centre[k] + rng.Normal(0, 0.7 + 0.2 * i);
      p.x.push_back(x);
      p.arm.push_back(i);
      ++p.n[i];
    }
  }
  return p;
}

MixtureStats StatsOf(const Pool& p, const FeatureMap& f, int m, bool second) {
  MixtureStats s(m, f.dim(), second);
  Vector phi;
  for (size_t j = 0; j < p.x.size(); ++j) {
    f.Map(p.x[j], &phi);
    s.Add(p.arm[j], phi, std::nullopt);
  }
  return s;
}

Vector Weights(const Pool& p, const Vector& alpha) {  // q_j, eq. (9)
  Vector q(p.x.size());
  for (size_t j = 0; j < p.x.size(); ++j) q[j] = alpha[p.arm[j]] / p.n[p.arm[j]];
  return q;
}

Vector FiniteDiff(const BoundLoss& loss, const Vector& a, double h = 1e-6) {
  Vector g(a.size());
  for (int i = 0; i < a.size(); ++i) {
    Vector hi = a, lo = a;
    hi[i] += h;
    lo[i] -= h;
    g[i] = (loss.Value(hi) - loss.Value(lo)) / (2 * h);
  }
  return g;
}

const Vector kAlpha = (Vector(3) << 0.5, 0.2, 0.3).finished();

TEST(FdObjective, ValueMatchesPooledSamplesAndGradientMatchesFiniteDifferences) {
  Rng rng(11);
  const int m = 3, d = 3;
  Pool pool = MakePool(m, d, rng);
  Matrix a = Matrix::Random(d, d);
  const Matrix sigma0 = a * a.transpose() + 0.5 * Matrix::Identity(d, d);
  const Vector mu0 = Vector::Random(d);
  auto obj = FdObjective::Make(mu0, sigma0);
  ASSERT_TRUE(obj.ok()) << obj.status();
  const FeatureMap f = FeatureMap::Identity(d);
  const MixtureStats s = StatsOf(pool, f, m, true);
  auto loss = (*obj)->Bind(s);

  // Direct: weighted pooled mean / covariance, and FD in the other ordering of eq. (2):
  // Tr(S + S0 - 2 (S^{1/2} S0 S^{1/2})^{1/2}).
  const Vector q = Weights(pool, kAlpha);
  Vector mu = Vector::Zero(d);
  for (size_t j = 0; j < pool.x.size(); ++j) mu += q[j] * pool.x[j];
  Matrix cov = Matrix::Zero(d, d);
  for (size_t j = 0; j < pool.x.size(); ++j)
    cov += q[j] * (pool.x[j] - mu) * (pool.x[j] - mu).transpose();
  const Matrix r = PsdSqrt(cov);
  const double direct = (mu - mu0).squaredNorm() + cov.trace() + sigma0.trace() -
                        2.0 * PsdSqrt(r * sigma0 * r).trace();
  Vector g;
  EXPECT_NEAR(loss->Eval(kAlpha, &g), direct, 1e-9 * (1 + std::abs(direct)));
  const Vector fdg = FiniteDiff(*loss, kAlpha);
  for (int i = 0; i < m; ++i) EXPECT_NEAR(g[i], fdg[i], 1e-5 * (1 + std::abs(fdg[i]))) << i;
  EXPECT_NEAR((*obj)->Distance(mu, cov), direct, 1e-9 * (1 + std::abs(direct)));
}

TEST(FdObjective, RejectsInvalidReference) {
  const Vector mu = Vector::Zero(2);
  Matrix asym(2, 2);
  asym << 1, 0.5, 0.2, 1;
  Matrix neg(2, 2);
  neg << 1, 0, 0, -0.1;
  Matrix nan = Matrix::Identity(2, 2);
  nan(0, 1) = nan(1, 0) = std::nan("");
  for (const Matrix& bad : {asym, neg, nan, Matrix(Matrix::Identity(3, 3))})
    EXPECT_EQ(FdObjective::Make(mu, bad).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(FdObjective::Make(mu, Matrix::Zero(2, 2)).ok());  // PSD, singular: allowed
}

// Vendi value from the eigenvalues of rho = diag(q)^1/2 K diag(q)^1/2 (eq. 10-11) with the
// cosine kernel computed from the raw samples.
TEST(VendiObjective, ValueMatchesWeightedGramEigenvaluesAndGradientMatches) {
  Rng rng(5);
  const int m = 3, d = 4;
  Pool pool = MakePool(m, d, rng);
  const FeatureMap f = FeatureMap::Cosine(d);
  const MixtureStats s = StatsOf(pool, f, m, true);
  VendiObjective obj;
  auto loss = obj.Bind(s);
  const int N = static_cast<int>(pool.x.size());
  Matrix K(N, N);
  for (int r = 0; r < N; ++r)
    for (int c = 0; c < N; ++c)
      K(r, c) = pool.x[r].dot(pool.x[c]) / (pool.x[r].norm() * pool.x[c].norm());
  const Vector q = Weights(pool, kAlpha);
  const Vector sq = q.cwiseSqrt();
  const Matrix rho = sq.asDiagonal() * K * sq.asDiagonal();
  EXPECT_NEAR(rho.trace(), 1.0, 1e-12);
  Eigen::SelfAdjointEigenSolver<Matrix> es(rho);
  double direct = 0;
  for (double l : es.eigenvalues())
    if (l > 1e-15) direct += l * std::log(l);
  Vector g;
  EXPECT_NEAR(loss->Eval(kAlpha, &g), direct, 1e-10);
  EXPECT_NEAR(obj.Score(direct), std::exp(-direct), 1e-12);

  // Gradient: finite differences, and eq. (21) from rho directly (log on rho's range).
  const Vector fdg = FiniteDiff(*loss, kAlpha);
  Vector lw(N);
  for (int k = 0; k < N; ++k)
    lw[k] = es.eigenvalues()[k] > 1e-12 ? std::log(es.eigenvalues()[k]) + 1.0 : 0.0;
  const Matrix L = es.eigenvectors() * lw.asDiagonal() * es.eigenvectors().transpose();
  Vector g21 = Vector::Zero(m);
  for (int j = 0; j < N; ++j) {
    // <L, d rho / d q_j> = (1/sqrt(q_j)) sum_k L_jk sqrt(q_k) K_kj
    double v = 0;
    for (int k = 0; k < N; ++k) v += L(j, k) * sq[k] * K(k, j);
    g21[pool.arm[j]] += v / sq[j] / pool.n[pool.arm[j]];
  }
  for (int i = 0; i < m; ++i) {
    EXPECT_NEAR(g[i], fdg[i], 1e-5) << i;
    EXPECT_NEAR(g[i], g21[i], 1e-8) << i;
  }
}

// With q = 1/N the loss is -log Vendi of the pooled samples (eq. 4), here with normalized RFF.
TEST(VendiObjective, EmpiricalMixtureGivesVendiScoreOfPooledSamples) {
  Rng rng(8);
  const int m = 3, d = 3;
  Pool pool = MakePool(m, d, rng);
  auto f = FeatureMap::RandomFourier(d, 16, 1.5, rng);
  ASSERT_TRUE(f.ok());
  const MixtureStats s = StatsOf(pool, *f, m, true);
  const int N = static_cast<int>(pool.x.size());
  Matrix Phi(N, 16);
  Vector phi;
  for (int j = 0; j < N; ++j) {
    f->Map(pool.x[j], &phi);
    EXPECT_NEAR(phi.norm(), 1.0, 1e-12);
    Phi.row(j) = phi.transpose();
  }
  Eigen::SelfAdjointEigenSolver<Matrix> es(Phi * Phi.transpose() / N);
  double vne = 0;
  for (double l : es.eigenvalues())
    if (l > 1e-15) vne -= l * std::log(l);
  const Vector emp = s.counts() / s.total();
  VendiObjective obj;
  EXPECT_NEAR(obj.Score(obj.Bind(s)->Value(emp)), std::exp(vne), 1e-8 * std::exp(vne));
}

TEST(RkeObjective, ValueMatchesFrobeniusOfWeightedGramAndGradientMatches) {
  Rng rng(21);
  const int m = 3, d = 4;
  Pool pool = MakePool(m, d, rng);
  const FeatureMap f = FeatureMap::Cosine(d);
  const MixtureStats s = StatsOf(pool, f, m, true);
  RkeObjective obj;
  auto loss = obj.Bind(s);
  const Vector q = Weights(pool, kAlpha);
  const int N = static_cast<int>(pool.x.size());
  double direct = 0;  // sum_rs q_r q_s k(x_r, x_s)^2 = ||rho||_F^2 = Tr(C^2)
  for (int r = 0; r < N; ++r)
    for (int c = 0; c < N; ++c) {
      const double k = pool.x[r].dot(pool.x[c]) / (pool.x[r].norm() * pool.x[c].norm());
      direct += q[r] * q[c] * k * k;
    }
  Vector g;
  EXPECT_NEAR(loss->Eval(kAlpha, &g), direct, 1e-12);
  const Vector fdg = FiniteDiff(*loss, kAlpha);
  for (int i = 0; i < m; ++i) EXPECT_NEAR(g[i], fdg[i], 1e-6) << i;
  // Pooled samples (q = 1/N): RKE mode count = N^2 / ||K||_F^2 (Section 3.2).
  double fro = 0;
  for (int r = 0; r < N; ++r)
    for (int c = 0; c < N; ++c) {
      const double k = pool.x[r].dot(pool.x[c]) / (pool.x[r].norm() * pool.x[c].norm());
      fro += k * k;
    }
  EXPECT_NEAR(obj.Score(loss->Value(s.counts() / s.total())), double(N) * N / fro, 1e-9);
}

TEST(KdObjective, ValueMatchesMmdFromRawSamplesAndGradientMatches) {
  Rng rng(31);
  const int m = 3, d = 4;
  Pool pool = MakePool(m, d, rng);
  const FeatureMap f = FeatureMap::Cosine(d);
  const MixtureStats s = StatsOf(pool, f, m, false);
  std::vector<Vector> ref;
  Vector mu_ref = Vector::Zero(d), phi;
  for (int r = 0; r < 30; ++r) {
    Vector y(d);
    for (int k = 0; k < d; ++k) y[k] = rng.Normal(0.5, 1.0);
    ref.push_back(y);
    f.Map(y, &phi);
    mu_ref += phi / 30.0;
  }
  KdObjective obj(mu_ref);
  auto loss = obj.Bind(s);
  auto k = [](const Vector& a, const Vector& b) { return a.dot(b) / (a.norm() * b.norm()); };
  const Vector q = Weights(pool, kAlpha);
  const int N = static_cast<int>(pool.x.size());
  double xx = 0, yy = 0, xy = 0;  // eq. (3) with the weighted empirical P_alpha
  for (int r = 0; r < N; ++r)
    for (int c = 0; c < N; ++c) xx += q[r] * q[c] * k(pool.x[r], pool.x[c]);
  for (const auto& a : ref)
    for (const auto& b : ref) yy += k(a, b) / (30.0 * 30.0);
  for (int r = 0; r < N; ++r)
    for (const auto& b : ref) xy += q[r] * k(pool.x[r], b) / 30.0;
  Vector g;
  EXPECT_NEAR(loss->Eval(kAlpha, &g), xx + yy - 2 * xy, 1e-12);
  const Vector fdg = FiniteDiff(*loss, kAlpha);
  for (int i = 0; i < m; ++i) EXPECT_NEAR(g[i], fdg[i], 1e-6) << i;
}

TEST(MixtureStats, RunningMomentsMatchBatchAndSizeIsConstant) {
  Rng rng(3);
  MixtureStats s(2, 3, true);
  std::vector<Vector> xs;
  for (int r = 0; r < 50; ++r) {
    Vector x = Vector::Random(3);
    xs.push_back(x);
    s.Add(1, x, 0.25);
  }
  Matrix S = Matrix::Zero(3, 3);
  Vector mu = Vector::Zero(3);
  for (const auto& x : xs) S += x * x.transpose() / 50.0, mu += x / 50.0;
  EXPECT_LT((s.second(1) - S).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_LT((s.means().col(1) - mu).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_EQ(s.counts()[1], 50);
  EXPECT_DOUBLE_EQ(s.FidelityMeans()[1], 0.25);
  const int64_t bytes = s.Bytes();
  for (int r = 0; r < 500; ++r) s.Add(0, Vector::Random(3), std::nullopt);
  EXPECT_EQ(s.Bytes(), bytes);
}

}  // namespace
}  // namespace bandit::mixture
