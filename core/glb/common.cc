#include "core/glb/common.h"

#include <cmath>

namespace bandit::glb {

absl::Status CheckCandidates(std::span<const Vector> candidates, int d, double max_norm) {
  if (candidates.empty())
    return absl::InvalidArgumentError("candidates is empty, expected at least one feature vector");
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Vector& c = candidates[i];
    // One pass for the common case; the field name is only built for an error (this runs for
    // every candidate of every Select).
    const double n = c.size() == d ? c.norm() : 0.0;
    if (c.size() == d && std::isfinite(n) && n <= max_norm * (1 + 1e-9) && IsInputVector(c)) continue;
    const std::string field = absl::StrCat("candidates[", i, "]");
    if (auto s = CheckVector(field, c, d); !s.ok()) return s;
    return absl::InvalidArgumentError(
        absl::StrCat(field, " has norm ", n, ", expected a norm <= max_feature_norm = ", max_norm));
  }
  return absl::OkStatus();
}

absl::Status CheckFeatures(const Vector& x, int d, double max_norm) {
  if (auto s = CheckVector("features", x, d); !s.ok()) return s;
  const double n = x.norm();
  if (n > max_norm * (1 + 1e-9))
    return absl::InvalidArgumentError(absl::StrCat(
        "features has norm ", n, ", expected a norm <= max_feature_norm = ", max_norm));
  return absl::OkStatus();
}

absl::Status CheckNorm(absl::FunctionRef<std::string()> field, double norm2, double max_norm) {
  const double n = std::sqrt(norm2);
  if (!std::isfinite(n) || n > max_norm * (1 + 1e-9))
    return absl::InvalidArgumentError(
        absl::StrCat(field(), " has norm ", n, ", expected a norm <= max_feature_norm = ", max_norm));
  return absl::OkStatus();
}

void ShermanMorrisonAdd(Matrix& a_inv, const Vector& x, double c) {
  if (c == 0) return;
  const Vector u = a_inv * x;
  const double denom = 1.0 + c * x.dot(u);
  a_inv.noalias() -= (c / denom) * u * u.transpose();
}

namespace {
// ArgmaxUcb's working storage, reused per thread: at 50 x 20 these are 8 KB blocks, which
// glibc's malloc serves from its bins (not its per-thread cache), and their allocation and
// release cost more than a tenth of the scores themselves. Scratch larger than kKeepDoubles is
// given back after the call.
struct UcbScratch {
  Matrix x;      // padded n x d, row i = candidate i (padding rows zero)
  Matrix upper;  // d x d: upper(j, i) = A(i, j) + A(j, i) for j < i, upper(i, i) = A(i, i)
  Vector w2;     // padded n: x_i' A x_i
  Vector logit;  // padded n: x_i' theta
};
constexpr Eigen::Index kKeepDoubles = 1 << 18;
// Candidates scored together: 8 doubles are 4 SSE2 registers of partial sums, which stay in
// registers through the inner loop.
constexpr int kBlock = 8;
using Block = Eigen::Array<double, kBlock, 1>;

// w2[i] = x_i' A x_i and logit[i] = x_i' theta for every row x_i of `x` (rows a multiple of
// kBlock). The quadratic form is summed over the upper triangle,
//   A(i, i) x_i^2 + sum_{j < i} (A(i, j) + A(j, i)) x_i x_j:
// half the multiplications of A X, and exactly the form of A whether or not its stored bits
// are symmetric (H^{-1} kept by Sherman-Morrison is symmetric only up to rounding). Every
// candidate goes through the same sequence of operations wherever it sits in the list, so its
// score depends on its own features, theta and A only (replay gives the same bits).
void ScoreTerms(const Matrix& x, const Vector& theta, const Matrix& a, UcbScratch& s) {
  const Eigen::Index rows = x.rows(), d = x.cols();
  Matrix& upper = s.upper;
  upper.resize(d, d);
  for (Eigen::Index i = 0; i < d; ++i) {
    for (Eigen::Index j = 0; j < i; ++j) upper(j, i) = a(i, j) + a(j, i);
    upper(i, i) = a(i, i);
  }
  s.w2.resize(rows);
  s.logit.resize(rows);
  for (Eigen::Index first = 0; first < rows; first += kBlock) {
    const double* block = x.data() + first;  // column j of the block at block + j * rows
    Block w = Block::Zero(), logit = Block::Zero();
    for (Eigen::Index i = 0; i < d; ++i) {
      const double* u = upper.data() + i * d;  // upper(0..i, i), contiguous
      const Eigen::Map<const Block> xi(block + i * rows);
      Block t = u[i] * xi;
      for (Eigen::Index j = 0; j < i; ++j) t += u[j] * Eigen::Map<const Block>(block + j * rows);
      w += xi * t;
      logit += theta[i] * xi;
    }
    Eigen::Map<Block>(s.w2.data() + first) = w;
    Eigen::Map<Block>(s.logit.data() + first) = logit;
  }
}
}  // namespace

int ArgmaxUcb(std::span<const Vector> candidates, const Vector& theta, const Matrix& h_inv,
              double beta, Vector* ucb, Vector* mean_logit) {
  const int n = static_cast<int>(candidates.size());
  const int d = static_cast<int>(theta.size());
  thread_local UcbScratch scratch;
  Matrix& x = scratch.x;
  const int padded = (n + kBlock - 1) / kBlock * kBlock;
  x.resize(padded, d);
  for (int i = 0; i < n; ++i) x.row(i) = candidates[i].transpose();
  x.bottomRows(padded - n).setZero();
  ScoreTerms(x, theta, h_inv, scratch);  // x_i' theta and ||x_i||^2_{H^{-1}}, O(d^2 n / 2)
  *mean_logit = scratch.logit.head(n);
  *ucb = *mean_logit + beta * scratch.w2.head(n).cwiseMax(0.0).cwiseSqrt();
  if (x.size() + scratch.upper.size() > kKeepDoubles) scratch = UcbScratch();
  int best = 0;
  for (int i = 1; i < n; ++i)
    if ((*ucb)[i] > (*ucb)[best]) best = i;
  return best;
}

Decision OptimisticDecision(int arm, const Vector& ucb, double estimated_gap, bool want_scores) {
  Decision d;
  d.arm = arm;
  d.propensity = 1.0;
  d.estimated_gap = estimated_gap;
  if (want_scores) {
    d.scores = ucb;
    d.score_kind = bandit::v1::UPPER_CONFIDENCE_BOUND;
  }
  return d;
}

Decision UcbDecision(const GlmLink& link, int arm, const Vector& ucb, const Vector& logit,
                     double beta, bool want_scores) {
  Decision d =
      OptimisticDecision(arm, ucb, link.Mu(logit.maxCoeff()) - link.Mu(logit[arm]), want_scores);
  d.diagnostics = {{"ucb", ucb[arm]},
                   {"mean", link.Mu(logit[arm])},
                   {"bonus", ucb[arm] - logit[arm]},
                   {"beta", beta}};
  return d;
}

double GlbOmdBeta(const GlbParams& p, double lambda, int64_t t) {
  const double eta = p.eta(), d = p.d, g = p.link.g();
  const double b2 = 4 * lambda * p.S * p.S + 2 * eta * std::log(1 / p.delta) +
                    d * (6 * eta * eta + eta) *
                        std::log(1 + p.link.LMu(p.S) * static_cast<double>(t) / (lambda * g));
  return std::sqrt(b2);
}

void SaveOmdState(StateWriter& w, const Vector& theta, const Matrix& h, const Matrix& h_inv,
                  int64_t t) {
  w.Put("theta", theta);
  w.Put("h", h);
  w.Put("h_inv", h_inv);
  w.PutInt("t", t);
}

absl::Status RestoreOmdState(const StateReader& r, int d, Vector* theta, Matrix* h, Matrix* h_inv,
                             int64_t* t) {
  Vector th;
  Matrix hh, hi;
  int64_t tt;
  if (auto s = r.Get("theta", &th, d); !s.ok()) return s;
  if (auto s = r.Get("h", &hh, d, d); !s.ok()) return s;
  if (auto s = r.Get("h_inv", &hi, d, d); !s.ok()) return s;
  if (auto s = r.GetInt("t", &tt); !s.ok()) return s;
  if (tt < 0) return absl::InvalidArgumentError(absl::StrCat("state t is ", tt, ", expected >= 0"));
  if (!th.allFinite() || !hh.allFinite() || !hi.allFinite())
    return absl::InvalidArgumentError("state theta/h/h_inv has non-finite values, expected finite");
  *theta = std::move(th);
  *h = std::move(hh);
  *h_inv = std::move(hi);
  *t = tt;
  return absl::OkStatus();
}

}  // namespace bandit::glb
