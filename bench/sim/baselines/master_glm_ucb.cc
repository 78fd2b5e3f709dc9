// MASTER over GLM-UCB base instances (master_glm_ucb.h).
#include "bench/sim/baselines/master_glm_ucb.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace bandit::glb {

absl::StatusOr<std::unique_ptr<Policy>> MasterGlmUcb::Make(const bandit::v1::SimPolicyConfig& config,
                                                           uint64_t seed) {
  const auto& c = config.master_glm_ucb();
  auto p = ParseParams("master_glm_ucb", c);
  if (!p.ok()) return p.status();
  if (!c.has_horizon() || c.horizon() < 2)
    return absl::InvalidArgumentError(
        "master_glm_ucb.horizon is missing or < 2, expected the horizon T >= 2 (its tests use "
        "log(T/delta))");
  const int n = c.has_block_order() ? c.block_order() : 12;
  if (n < 0 || n > 24)
    return absl::InvalidArgumentError(
        absl::StrCat("master_glm_ucb.block_order is ", n, ", expected 0..24"));
  return std::unique_ptr<Policy>(new MasterGlmUcb(*p, c.horizon(), n, seed));
}

MasterGlmUcb::MasterGlmUcb(const GlbParams& p, int64_t horizon, int block_order, uint64_t seed)
    : p_(p), horizon_(horizon), block_order_(block_order), rng_(seed) {
  StartBlock();
}

double MasterGlmUcb::Rho(double t) const {
  // Radius of a fresh GLM-UCB after t rounds, times the elliptic-potential sum, per round.
  const double lam = p_.lambda, d = p_.d;
  const double sigma = p_.link.NoiseScale(p_.S), k = p_.link.LMu(p_.S), c = p_.link.CMu(p_.S);
  const double beta = std::sqrt(lam) * p_.S + sigma * std::sqrt(2 * std::log(1 / p_.delta) +
                                                                d * std::log(1 + t / (lam * d)));
  const double rho_t = p_.radius_multiplier * k / c * beta;
  const double total = 2 * rho_t * std::sqrt(2 * d * t * std::log(1 + t / (lam * d))) +
                       std::sqrt(2 * t * std::log(1 / p_.delta));
  return total / t;  // unclipped: MALG's probabilities are ratios of this bound
}

double MasterGlmUcb::RhoHat(double t) const {
  const double n_hat = std::log2(static_cast<double>(horizon_)) + 1;
  return 6 * n_hat * std::log(static_cast<double>(horizon_) / p_.delta) * Rho(t);
}

void MasterGlmUcb::StartBlock() {
  block_start_ = t_;
  schedule_.clear();
  live_.clear();
  rewards_.clear();
  sum_gap_ = 0;
  min_optimistic_ = std::numeric_limits<double>::infinity();
  has_pending_ = false;
  const int n = block_order_;
  const double rho_n = Rho(std::ldexp(1.0, n));
  // MALG (Wei & Luo 2021, Algorithm 1): order m, interval i with prob rho(2^n) / rho(2^m).
  for (int m = n; m >= 0; --m) {
    const double prob = m == n ? 1.0 : std::min(1.0, rho_n / Rho(std::ldexp(1.0, m)));
    const int64_t len = int64_t{1} << m, count = int64_t{1} << (n - m);
    for (int64_t i = 0; i < count; ++i)
      if (m == n || rng_.Uniform() < prob) schedule_.push_back({m, i * len});
  }
  // Instances whose interval starts at offset 0 are live from the first round.
  for (const auto& [m, start] : schedule_)
    if (start == 0)
      live_.emplace(m, std::make_pair(start, MleUcbCore(GlmUcbRule(), p_, 1.0, 50)));
}

int MasterGlmUcb::ActiveOrder() const { return live_.begin()->first; }

MleUcbCore& MasterGlmUcb::InstanceFor(int order) { return live_.at(order).second; }

absl::StatusOr<Decision> MasterGlmUcb::Select(const SelectContext& ctx) {
  if (auto s = CheckCandidates(ctx.candidates, p_.d, p_.max_feature_norm); !s.ok()) return s;
  const MleUcbCore& active = live_.begin()->second.second;
  Vector ucb, mean;
  const int arm = active.Argmax(ctx.candidates, &ucb, &mean);
  // g~_t: the active instance's optimistic value of the best arm, within the reward range.
  double g = ucb.maxCoeff();
  if (p_.link.kind() == LinkKind::kLogistic) g = std::clamp(g, 0.0, 1.0);
  pending_optimistic_ = g;
  has_pending_ = true;
  Decision d = OptimisticDecision(arm, ucb, mean.maxCoeff() - mean[arm], ctx.want_scores);
  d.diagnostics = {{"ucb", ucb[arm]},
                   {"mean", mean[arm]},
                   {"active_order", ActiveOrder()},
                   {"optimistic_value", g}};
  return d;
}

absl::Status MasterGlmUcb::Update(const Observation& obs) {
  if (auto s = CheckFeatures(obs.features, p_.d, p_.max_feature_norm); !s.ok()) return s;
  if (auto s = p_.link.CheckReward("reward", obs.reward); !s.ok()) return s;
  // A direct update (no Select) has no optimistic value: it teaches the active instance only.
  live_.begin()->second.second.Add(obs.features, obs.reward);
  ++t_;
  if (!has_pending_) return absl::OkStatus();
  has_pending_ = false;
  rewards_.push_back(obs.reward);
  sum_gap_ += pending_optimistic_ - obs.reward;
  min_optimistic_ = std::min(min_optimistic_, pending_optimistic_);
  const int64_t off = t_ - block_start_;  // rounds done in this block; the last was off - 1
  bool fail = false;
  // Test 1: every order-m < n interval that ends with this round.
  for (auto it = live_.begin(); it != live_.end();) {
    const int m = it->first;
    const int64_t start = it->second.first, len = int64_t{1} << m;
    if (start + len != off) {
      ++it;
      continue;
    }
    if (m < block_order_ && static_cast<int64_t>(rewards_.size()) >= start + len) {
      double sum = 0;
      for (int64_t k = start; k < start + len; ++k) sum += rewards_[k];
      if (sum / len >= min_optimistic_ + 9 * RhoHat(static_cast<double>(len))) fail = true;
    }
    it = live_.erase(it);
  }
  // Test 2.
  const double done = static_cast<double>(rewards_.size());
  if (sum_gap_ / done >= 3 * RhoHat(done)) fail = true;
  const int64_t block_len = int64_t{1} << block_order_;
  if (fail) ++restarts_;
  if (fail || off >= block_len) {
    StartBlock();
    return absl::OkStatus();
  }
  for (const auto& [m, start] : schedule_)
    if (start == off)
      live_.emplace(m, std::make_pair(start, MleUcbCore(GlmUcbRule(), p_, 1.0, 50)));
  return absl::OkStatus();
}

void MasterGlmUcb::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, name(), 1);
  w.PutRng(rng_);
  w.PutInt("t", t_);
  w.PutInt("block_start", block_start_);
  w.PutInt("restarts", restarts_);
  Vector sched(2 * schedule_.size());
  for (size_t i = 0; i < schedule_.size(); ++i) {
    sched[2 * i] = schedule_[i].first;
    sched[2 * i + 1] = static_cast<double>(schedule_[i].second);
  }
  w.Put("schedule", sched);
  Vector live(2 * live_.size());
  size_t i = 0;
  for (const auto& [m, inst] : live_) {
    live[2 * i] = m;
    live[2 * i + 1] = static_cast<double>(inst.first);
    inst.second.Save(w, absl::StrCat("i", m, "."));
    ++i;
  }
  w.Put("live", live);
  w.Put("rewards", Vector(Eigen::Map<const Vector>(rewards_.data(), rewards_.size())));
  w.PutScalar("sum_gap", sum_gap_);
  w.PutScalar("min_optimistic", min_optimistic_);
  w.PutScalar("pending_optimistic", pending_optimistic_);
  w.PutInt("has_pending", has_pending_ ? 1 : 0);
}

absl::Status MasterGlmUcb::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect(name(), 1); !s.ok()) return s;
  Rng rng;
  int64_t t, start, restarts, pending;
  Vector sched, live, rewards;
  double sum_gap, min_opt, pend;
  if (auto s = r.GetRng(&rng); !s.ok()) return s;
  if (auto s = r.GetInt("t", &t); !s.ok()) return s;
  if (auto s = r.GetInt("block_start", &start); !s.ok()) return s;
  if (auto s = r.GetInt("restarts", &restarts); !s.ok()) return s;
  if (auto s = r.Get("schedule", &sched); !s.ok()) return s;
  if (auto s = r.Get("live", &live); !s.ok()) return s;
  if (auto s = r.Get("rewards", &rewards); !s.ok()) return s;
  if (auto s = r.GetScalar("sum_gap", &sum_gap); !s.ok()) return s;
  if (auto s = r.GetScalar("min_optimistic", &min_opt); !s.ok()) return s;
  if (auto s = r.GetScalar("pending_optimistic", &pend); !s.ok()) return s;
  if (auto s = r.GetInt("has_pending", &pending); !s.ok()) return s;
  const int64_t block_len = int64_t{1} << block_order_;
  if (t < 0 || start < 0 || start > t || t - start >= block_len || sched.size() % 2 != 0 ||
      live.size() % 2 != 0 || live.size() == 0 || rewards.size() > t - start)
    return absl::InvalidArgumentError(
        "state of master_glm_ucb is inconsistent (t, block, schedule)");
  std::vector<std::pair<int, int64_t>> schedule;
  for (Eigen::Index i = 0; i < sched.size(); i += 2) {
    const int m = static_cast<int>(sched[i]);
    const int64_t s0 = static_cast<int64_t>(sched[i + 1]);
    if (m < 0 || m > block_order_ || s0 < 0 || s0 >= block_len)
      return absl::InvalidArgumentError("state schedule entry out of range");
    schedule.push_back({m, s0});
  }
  std::map<int, std::pair<int64_t, MleUcbCore>> lives;
  for (Eigen::Index i = 0; i < live.size(); i += 2) {
    const int m = static_cast<int>(live[i]);
    if (m < 0 || m > block_order_)
      return absl::InvalidArgumentError("state live order out of range");
    MleUcbCore core(GlmUcbRule(), p_, 1.0, 50);
    if (auto s = core.Restore(r, absl::StrCat("i", m, ".")); !s.ok()) return s;
    lives.emplace(m, std::make_pair(static_cast<int64_t>(live[i + 1]), std::move(core)));
  }
  rng_ = std::move(rng);
  t_ = t;
  block_start_ = start;
  restarts_ = restarts;
  schedule_ = std::move(schedule);
  live_ = std::move(lives);
  rewards_.assign(rewards.data(), rewards.data() + rewards.size());
  sum_gap_ = sum_gap;
  min_optimistic_ = min_opt;
  pending_optimistic_ = pend;
  has_pending_ = pending != 0;
  return absl::OkStatus();
}

int64_t MasterGlmUcb::StateBytes() const {
  int64_t b = static_cast<int64_t>(rewards_.size() * sizeof(double) +
                                   schedule_.size() * sizeof(schedule_[0]));
  for (const auto& [m, inst] : live_) b += inst.second.Bytes();
  return b;
}

std::vector<std::pair<std::string, double>> MasterGlmUcb::Summary() const {
  return {{"rounds", static_cast<double>(t_)},
          {"restarts", static_cast<double>(restarts_)},
          {"block_order", static_cast<double>(block_order_)},
          {"scheduled_instances", static_cast<double>(schedule_.size())},
          {"active_order", static_cast<double>(ActiveOrder())},
          {"rho_hat_block", RhoHat(std::ldexp(1.0, block_order_))},
          {"lambda", p_.lambda}};
}

}  // namespace bandit::glb
