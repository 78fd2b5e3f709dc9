// Online kernel selection under bandit feedback (Li & Liao, "Improved Regret Bounds for Online
// Kernel Selection under Bandit Feedback", ECML-PKDD 2022), one policy for the three algorithms
// x two hypothesis representations, chosen by OksConfig:
//   variant OKS    Algorithm 1 with Remark 1's delta, eta, lambda (horizon-tuned), no projection
//   variant OKS_PP OKS++: Theorem 3.1's adaptive delta_t, eta_t, lambda_{t,i} and eq. (2)
//   variant IOKS   Algorithm 2: Tsallis OMD eq. (3)-(5), increasing eta_{t,i}, Theorem 4.1
//   random_features = 0: exact kernels (state grows with t; the service needs support_budget)
//   random_features = D: RF-OKS / RF-OKS++ / RF-IOKS (Section 5, eq. (8)), state O(K D d).
//
// Serving contract (ContextKind::kPoint):
//   Select(x): samples I_t ~ p_t, returns arm = I_t, propensity = p_{t,I_t}, prediction =
//     f_{t,I_t}(x) (diagnostic "label" = its sign for classification, +1 at 0) and
//     memo = [I_t, p_{t,I_t}, q_{t,I_t}, f_{t,I_t}(x)]. Select changes only the random engine.
//   Update(x, memo, y): loss and gradient are taken at the memo's prediction (what was served),
//     importance weights use the memo's p_{t,I_t}; the step is applied to the CURRENT f_{I_t}, so
//     several outstanding decisions can be joined in any order (delayed feedback).
//   Direct updates (no memo) are refused with FAILED_PRECONDITION: the algorithms' updates are
//     importance-weighted by the propensity of the kernel that made the prediction; a logged
//     (x, y) without that decision carries neither.
#pragma once

#include <memory>
#include <vector>

#include "core/oks/exp3_schedule.h"
#include "core/oks/hypotheses.h"
#include "core/oks/loss.h"
#include "core/oks/tsallis_omd.h"
#include "core/policy.h"
#include "core/rng.h"

namespace bandit::oks {

enum class Variant { kOks, kOksPlusPlus, kIoks };

// Memo layout of Decision::memo / Observation::memo.
inline constexpr int kMemoArm = 0, kMemoP = 1, kMemoQ = 2, kMemoPrediction = 3, kMemoSize = 4;
// Smallest parameter horizon of the doubling scheme (horizon = 0).
inline constexpr int64_t kMinDoublingHorizon = 64;

class OnlineKernelSelection final : public Policy {
 public:
  // Validates the config (INVALID_ARGUMENT naming the field). `allow_unbounded` permits the exact
  // learners without a support budget (paper reproduction in bench/; the service passes false).
  static absl::StatusOr<std::unique_ptr<OnlineKernelSelection>> Create(
      const bandit::v1::OksConfig& config, uint64_t seed, bool allow_unbounded);

  absl::string_view name() const override { return "oks"; }
  ContextKind context_kind() const override { return ContextKind::kPoint; }
  absl::StatusOr<Decision> Select(const SelectContext& ctx) override;
  absl::Status Update(const Observation& obs) override;
  void Save(bandit::v1::PolicyState* out) const override;
  absl::Status Restore(const bandit::v1::PolicyState& state) override;
  int64_t StateBytes() const override;
  std::vector<std::pair<std::string, double>> Summary() const override;
  // The sampling distribution p_t.
  Vector Weights() const override { return Probabilities(); }

  // Current state, for tests and diagnostics.
  Vector Probabilities() const;  // p_t
  Vector QDistribution() const;  // q_t
  double CurrentDelta() const;   // delta used by p_t
  double CurrentEta() const;     // OKS/OKS++: eta; IOKS: max_i eta_{t,i}
  Vector IoksEtas() const;       // IOKS: eta_{t,i}
  // Step size lambda_{t,i} from the current state (OKS++ and IOKS: the value the last update
  // of kernel i used when i was the chosen kernel of the last round).
  double Lambda(int i) const;
  // Parameter horizon for the next round (configured T, or the doubling T_m).
  double ParameterHorizon() const;
  int64_t rounds() const { return t_; }
  Variant variant() const { return variant_; }
  const KernelHypotheses& hypotheses() const { return *hyp_; }
  bool classification() const { return classification_; }
  int num_kernels() const { return k_; }

 private:
  OnlineKernelSelection() = default;
  absl::Status ValidateUpdate(const Observation& obs) const;

  // Config.
  Variant variant_ = Variant::kOksPlusPlus;
  LossKind loss_ = LossKind::kLogistic;
  bool classification_ = true;
  int k_ = 0, dim_ = 0;
  std::vector<KernelSpec> kernels_;
  double u_ = 15, loss_max_ = 1, lipschitz_ = 1, lambda_scale_ = 1, eta_constant_ = 8;
  int64_t horizon_ = 0;
  OksPlusPlusConstants pp_{};
  // State.
  std::unique_ptr<KernelHypotheses> hyp_;
  Rng rng_;
  int64_t t_ = 0;     // completed updates
  Vector cum_loss_;   // OKS/OKS++: L_i = Delta_{t,i} = sum l / p 1[I = i]
  double c_sum_ = 0;  // OKS++: C_t = sum_i Delta_{t,i}
  double q_sq_ = 0;   // OKS++: sum_tau q_{tau,I} c~_{tau,I}^2
  Vector q_;          // IOKS: q_t
  Vector eta_steps_;  // IOKS: number of eta increases per kernel (eta_{t,i} = eta upsilon^n_i)
  Vector rho_;        // IOKS: rho_{t,i}
  Vector grad_sq_;    // IOKS: sum_tau ||grad~_{tau,i}||^2
};

// Server factory: refuses exact learners without a support budget.
absl::StatusOr<std::unique_ptr<Policy>> MakeOks(const bandit::v1::PolicyConfig& config,
                                                uint64_t seed);

}  // namespace bandit::oks

namespace bandit {
using oks::MakeOks;
}  // namespace bandit
