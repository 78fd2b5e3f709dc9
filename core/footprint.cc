#include "core/footprint.h"

#include <algorithm>
#include <optional>
#include <string>

#include "core/classic/linucb_sketched.h"
#include "core/common/fd_sketch.h"
#include "core/glb/glb_omd_sketched.h"
#include "core/glb/restart_glb.h"
#include "core/kernel/candidate_bkb.h"
#include "core/kernel/candidate_gp_ucb.h"
#include "core/rng.h"

namespace bandit::footprint {
namespace {

constexpr int64_t kDouble = sizeof(double);
constexpr int64_t kCounter = sizeof(int64_t);
constexpr int64_t kRng = sizeof(Rng);

int64_t Doubles(int64_t n) { return n * kDouble; }

int64_t Digits(int64_t i) {
  int64_t n = 1;
  for (; i >= 10; i /= 10) ++n;
  return n;
}

// A served policy's config is checked before these run only for its shape: a negative or
// absurd value here gives a figure the factory will refuse anyway.
int64_t NonNegative(int64_t v) { return std::max<int64_t>(0, v); }

}  // namespace

int64_t ArmCount(const PolicyConfig& c) {
  return c.arms_size() > 0 ? c.arms_size() : NonNegative(c.num_arms());
}

int64_t ArmSetBytes(const PolicyConfig& c) {
  int64_t b = 0;
  if (c.arms_size() > 0) {
    for (const auto& a : c.arms()) b += static_cast<int64_t>(a.id().size()) + Doubles(a.features_size());
    return b;
  }
  // num_arms: ids "0", "1", ...
  for (int64_t i = 0; i < NonNegative(c.num_arms()); ++i) b += Digits(i);
  return b;
}

// K-armed: the arm set, per-arm counts and means, the round counter (and the random engine).
int64_t EpsilonGreedy(const PolicyConfig& c) {
  return ArmSetBytes(c) + Doubles(2 * ArmCount(c)) + kCounter + kRng;
}
int64_t Ucb1(const PolicyConfig& c) { return ArmSetBytes(c) + Doubles(2 * ArmCount(c)) + 2 * kCounter; }
// Thompson: per arm the update count and either the two Beta parameters (Bernoulli) or the
// reward sum (Gaussian).
int64_t Thompson(const PolicyConfig& c) {
  const int64_t per_arm =
      c.thompson().likelihood() == bandit::v1::ThompsonConfig::GAUSSIAN ? 2 : 3;
  return ArmSetBytes(c) + Doubles(per_arm * ArmCount(c)) + kCounter + kRng;
}

// The diagonal forms' Coalescer: one bit per coordinate, in 64-bit words.
int64_t CoalescingBitmap(int64_t d) { return (d + 63) / 64 * 8; }

// The diagonal forms' scoring pairs: each coordinate's weight and inverse precision in single
// precision (two floats).
int64_t ScoringPairs(int64_t d) { return d * 2 * static_cast<int64_t>(sizeof(float)); }

// LinUCB: A^-1 (d x d), b and theta (d each), the update count. The diagonal form: diag(A) and
// b, each coordinate's weight and 1/a_i side by side for scoring, and the sparse inputs'
// coalescing bitmap (1 bit per coordinate). The sketched form at its largest, every coordinate
// seen (LinUcbSketched::MaxStateBytes).
int64_t LinUcb(const PolicyConfig& c) {
  const int64_t d = NonNegative(c.linucb().dimension());
  if (c.linucb().covariance() == bandit::v1::COVARIANCE_DIAGONAL)
    return Doubles(2 * d) + ScoringPairs(d) + CoalescingBitmap(d) + kCounter;
  if (c.linucb().covariance() == bandit::v1::COVARIANCE_SKETCHED)
    return LinUcbSketched::MaxStateBytes(
        d, FdSketch::SizeForFootprint(c.linucb().has_sketch_size()
                                          ? std::optional<int>(c.linucb().sketch_size())
                                          : std::nullopt));
  return Doubles(d * d + 2 * d) + kCounter;
}
// GLB-OMD, DOMD-GLB: H and H^-1 (d x d), theta (d), the round counter. The diagonal form: theta
// and diag(H), the scoring pairs, and per coordinate its place in
// the support (reserved at d, 4 bytes), a membership flag (1) and the projection's scratch
// position (8), and the coalescing bitmap. The sketched form at its largest, every coordinate
// seen (GlbOmdSketched::MaxStateBytes).
int64_t GlbOmd(const PolicyConfig& c) {
  const int64_t d = NonNegative(c.glb_omd().dimension());
  if (c.glb_omd().covariance() == bandit::v1::COVARIANCE_SKETCHED)
    return glb::GlbOmdSketched::MaxStateBytes(
        d, FdSketch::SizeForFootprint(c.glb_omd().has_sketch_size()
                                          ? std::optional<int>(c.glb_omd().sketch_size())
                                          : std::nullopt));
  if (c.glb_omd().covariance() == bandit::v1::COVARIANCE_DIAGONAL)
    return d * (Doubles(2) + 4 + 1 + 8) + ScoringPairs(d) + CoalescingBitmap(d) + kCounter;
  return Doubles(2 * d * d + d) + kCounter;
}
int64_t DomdGlb(const PolicyConfig& c) {
  const int64_t d = NonNegative(c.domd_glb().dimension());
  return Doubles(2 * d * d + d) + kCounter;
}
// GLOC: A, A^-1, V^-1 (d x d), theta, x z and theta_hat (d), two scalars, the round counter.
int64_t Gloc(const PolicyConfig& c) {
  const int64_t d = NonNegative(c.gloc().dimension());
  return Doubles(3 * d * d + 3 * d + 2) + kCounter;
}
// ECOLog: W and W^-1 (d x d), theta (d), one scalar, two counters.
int64_t Ecolog(const PolicyConfig& c) {
  const int64_t d = NonNegative(c.ecolog().dimension());
  return Doubles(2 * d * d + d + 1) + 2 * kCounter;
}
// GLM-UCB: W^-1 (d x d), theta (d), the round counter, and its history of (x, r) rounds: at
// most `window` of them (d + 1 doubles each), or every round without a window (then the
// figure is the empty history's, and the state grows by d + 1 doubles a round).
int64_t GlmUcb(const PolicyConfig& c) {
  const int64_t d = NonNegative(c.glm_ucb().dimension());
  const int64_t rounds = NonNegative(c.glm_ucb().window());
  return Doubles(rounds * (d + 1)) + kCounter + Doubles(d * d + d) + kCounter;
}
// GLM epsilon-greedy keeps every round (d + 1 doubles each): the empty history, theta (d), the
// round counter and the random engine.
int64_t GlmEpsilonGreedy(const PolicyConfig& c) {
  const int64_t d = NonNegative(c.glm_epsilon_greedy().dimension());
  return kCounter + Doubles(d) + kCounter + kRng;
}
// Restart-GLB: at most H rounds of (x, r), theta_hat and theta (d), V, V2 and the bonus
// matrix (d x d), the round counter. H is restart_period, or from horizon and path_length.
int64_t RestartGlb(const PolicyConfig& c) {
  const auto& r = c.restart_glb();
  const int64_t d = NonNegative(r.dimension());
  int64_t h = r.has_restart_period() ? NonNegative(r.restart_period()) : 0;
  if (!r.has_restart_period() && r.has_horizon() && r.has_path_length() && d > 0 &&
      r.horizon() >= 2)
    h = glb::RestartGlbPeriod(static_cast<int>(d), r.horizon(), r.path_length());
  h = std::min<int64_t>(h, 100'000);  // the factory's kMaxRestartPeriod
  return Doubles(h * (d + 1) + 2 * d + 3 * d * d) + kCounter;
}

// OKS: per kernel either a support set of at most support_budget points (d doubles, a
// coefficient and a norm each) or random features (a D x d map and D(d + 2) in all: D phases
// and D weights, or 2D weights for cosine-sine pairs);
// per kernel five running scalars (cumulative loss, q, step, rho, squared gradient), two more,
// the round counter and the random engine.
int64_t Oks(const PolicyConfig& c) {
  const auto& o = c.oks();
  const int64_t d = NonNegative(o.dimension()), p = o.kernels_size();
  const int64_t rf = NonNegative(o.random_features()), budget = NonNegative(o.support_budget());
  int64_t per_kernel = 0;
  if (rf > 0)
    per_kernel = Doubles(rf * (d + 2));
  else
    per_kernel = Doubles(budget * (d + 2));
  return p * per_kernel + Doubles(5 * p + 2) + kCounter + kRng;
}

// Mixtures: the arm set; the features (identity in d, or D random features: a D x d map and
// D phases); the objective's reference (FD: a mean, a covariance and its root, d + 2 d^2;
// KD: the reference's mean embedding, D); per arm a count, a mean embedding, fidelity sums and
// (for the covariance objectives) a D x D second moment; alpha and the probabilities (K each);
// three counters.
int64_t Mixture(const PolicyConfig& c) {
  const auto& m = c.mixture();
  const int64_t k = NonNegative(m.num_arms()) > 0 ? NonNegative(m.num_arms()) : ArmCount(c);
  const int64_t d = NonNegative(m.dimension());
  const bool fd = m.objective() == bandit::v1::FD || m.objective() == bandit::v1::OBJECTIVE_UNSPECIFIED;
  const int64_t rf = fd ? 0 : NonNegative(m.random_features());
  const int64_t D = rf > 0 ? rf : d;
  int64_t b = ArmSetBytes(c);
  if (rf > 0) b += Doubles(rf * d + rf);
  if (fd) b += Doubles(d + 2 * d * d);
  if (m.objective() == bandit::v1::KD) b += Doubles(D);
  const bool second = m.objective() != bandit::v1::KD;
  b += Doubles(k * (3 + D + (second ? D * D : 0)));
  b += Doubles(2 * k) + 2 * kCounter + kRng;
  // num_arms ids when the config has no arms ("0", "1", ...).
  if (c.arms_size() == 0 && c.num_arms() == 0)
    for (int64_t i = 0; i < k; ++i) b += Digits(i);
  return b;
}

// BKB over a fixed arm set: the arm set, per arm its count, reward sum and dictionary flag,
// two scalars and the random engine. Over per-request candidates (a dimension, no arms) it
// keeps every distinct point pulled, up to max_points: the figure is the empty state's.
int64_t Bkb(const PolicyConfig& c) {
  if (c.arms_size() == 0 && c.num_arms() == 0)
    return kRng + 2 * kDouble;
  return ArmSetBytes(c) + Doubles(3 * ArmCount(c)) + kDouble + kRng + kDouble;
}
// Exact GP-UCB over a fixed arm set: the arm set, per arm its count and reward sum, a scalar
// and the random engine. Over candidates it keeps every pull (up to max_pulls): the empty
// state's figure.
int64_t GpUcb(const PolicyConfig& c) {
  if (c.arms_size() == 0 && c.num_arms() == 0) return kRng + kDouble;
  return ArmSetBytes(c) + Doubles(2 * ArmCount(c)) + kDouble + kRng;
}

}  // namespace bandit::footprint
