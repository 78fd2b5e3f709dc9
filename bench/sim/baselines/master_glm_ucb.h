// MASTER over GLM-UCB base instances: a baseline of the DOMD-GLB paper's Fig. 1 that runs only in
// simulation (bandit-sim): its live instances keep every round they saw. Its engine, MleUcbCore,
// is the one of RestartGLB (core/glb/restart_glb.h) and of the discounted GLM-UCB policies
// (discounted_glm_ucb.h).
#pragma once

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "bandit/v1/sim_policy.pb.h"
#include "core/glb/restart_glb.h"
#include "core/rng.h"

namespace bandit::glb {

// MASTER (Wei & Luo 2021) with GLM-UCB base instances. Blocks of 2^n rounds (n = block_order);
// at a block's start MALG (their Algorithm 1) schedules, for every order m = n..0 and every
// aligned interval of length 2^m in the block, an instance of order m with probability
// rho(2^n) / rho(2^m) (always for m = n). At each round the scheduled instance with the shortest
// interval containing the round acts and learns; the others pause (they never see its data).
// Each round records the active instance's optimistic value g~_t = max_x UCB(x) (clipped to the
// reward range). Tests (their Algorithm 2, MASTER), with U_t = min_{tau in block, tau<=t} g~_tau
// and rho^(t) = 6 n^ log(T/delta) rho(t), n^ = log2 T + 1:
//   Test 1: at the end of an order-m < n instance's interval [s, e]:
//           mean_{tau in [s,e]} R_tau >= U_t + 9 rho^(2^m)
//   Test 2: mean_{tau in [block start, t]} (g~_tau - R_tau) >= 3 rho^(t - start + 1)
// and either failing restarts: a new block starts at the next round with fresh instances.
// rho(t) bounds the base GLM-UCB's average regret over t rounds (elliptic potential):
//   rho(t) = (2 rho_t sqrt(2 d t log(1 + t/(lambda d))) + sqrt(2 t log(1/delta))) / t.
// WHERE WE CHOSE: the paper's "block-scale parameter n = 12" is read as the fixed block order
// (MASTER's own schedule grows n = 0, 1, 2, ... within an epoch); rho(t) above is our bound for
// GLM-UCB; the radius multiplier scales the base instances' radius and hence rho.
class MasterGlmUcb final : public Policy {
 public:
  static absl::StatusOr<std::unique_ptr<Policy>> Make(const bandit::v1::SimPolicyConfig& config,
                                                      uint64_t seed);
  MasterGlmUcb(const GlbParams& p, int64_t horizon, int block_order, uint64_t seed);

  absl::string_view name() const override { return "master_glm_ucb"; }
  ContextKind context_kind() const override { return ContextKind::kCandidates; }
  absl::StatusOr<Decision> Select(const SelectContext& ctx) override;
  absl::Status Update(const Observation& obs) override;
  void Save(bandit::v1::PolicyState* out) const override;
  absl::Status Restore(const bandit::v1::PolicyState& state) override;
  int64_t StateBytes() const override;
  std::vector<std::pair<std::string, double>> Summary() const override;

  double Rho(double t) const;     // rho(t)
  double RhoHat(double t) const;  // 6 n^ log(T/delta) rho(t)
  int64_t restarts() const { return restarts_; }
  int64_t block_start() const { return block_start_; }
  // Scheduled intervals of the current block: (order, start offset within the block).
  const std::vector<std::pair<int, int64_t>>& schedule() const { return schedule_; }
  int ActiveOrder() const;  // order of the instance acting at the next round

 private:
  void StartBlock();  // schedule a new block at round t_ (draws from rng_)
  MleUcbCore& InstanceFor(int order);

  GlbParams p_;
  int64_t horizon_;
  int block_order_;
  Rng rng_;
  int64_t t_ = 0;  // rounds so far
  int64_t block_start_ = 0;
  std::vector<std::pair<int, int64_t>> schedule_;
  // Live instances by order: the interval (start offset) they were created for, and the core.
  std::map<int, std::pair<int64_t, MleUcbCore>> live_;
  std::vector<double> rewards_;      // R_tau of the current block
  double sum_gap_ = 0.0;             // sum (g~ - R) over the current block
  double min_optimistic_ = 0.0;      // U_t
  double pending_optimistic_ = 0.0;  // g~ of the last Select
  bool has_pending_ = false;
  int64_t restarts_ = 0;
};

inline absl::StatusOr<std::unique_ptr<Policy>> MakeMasterGlmUcb(
    const bandit::v1::SimPolicyConfig& config, uint64_t seed) {
  return MasterGlmUcb::Make(config, seed);
}

}  // namespace bandit::glb
