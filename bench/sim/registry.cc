// One line per environment family. A runner lives in bench/sim/<family>_sim.cc.
#include "bench/sim/sim.h"

namespace bandit::sim {

absl::StatusOr<nlohmann::json> RunGlb(absl::string_view env, const SimArgs& args);  // glb_sim.cc
absl::StatusOr<nlohmann::json> RunGenerators(absl::string_view env,
                                             const SimArgs& args);  // generators_sim.cc
absl::StatusOr<nlohmann::json> RunGpEnv(absl::string_view env, const SimArgs& args);  // gp_sim.cc
absl::StatusOr<nlohmann::json> RunGpCandidates(absl::string_view env,
                                               const SimArgs& args);  // gp_candidates_sim.cc
absl::StatusOr<nlohmann::json> RunStream(absl::string_view env,
                                         const SimArgs& args);  // stream_sim.cc
absl::StatusOr<nlohmann::json> RunStreamBudget(absl::string_view env,
                                               const SimArgs& args);  // budget_sim.cc
absl::StatusOr<nlohmann::json> RunBkbFig2(absl::string_view env,
                                          const SimArgs& args);  // starvation_sim.cc
absl::StatusOr<nlohmann::json> RunVendiExact(absl::string_view env,
                                             const SimArgs& args);  // vendi_sim.cc
absl::StatusOr<nlohmann::json> RunPositionBias(absl::string_view env,
                                               const SimArgs& args);  // position_bias_sim.cc

const std::vector<EnvRegistration>& RegisteredEnvs() {
  static const auto* envs = new std::vector<EnvRegistration>{
      {"stream",
       "OKS paper: online kernel selection on a CSV stream (y first), OKS/OKS++/IOKS and RF "
       "versions (stream_sim.cc)",
       &RunStream},
      {"stream_budget",
       "OKS paper Section 6.2: RF-OKS/RF-OKS++/RF-IOKS vs Raker and LKMBooks under the equal-time "
       "protocol (budget_sim.cc)",
       &RunStreamBudget},
      {"gp",
       "BKB paper: f ~ GP(0, Gaussian kernel) on A arms in [0,1]^d, BKB vs exact GP-UCB "
       "(gp_sim.cc)",
       &RunGpEnv},
      {"bkb_fig2",
       "BKB paper Fig. 2: variance starvation on [0, 1], BKB vs exact GP-UCB posterior after t "
       "evaluations in [0, 0.5] (starvation_sim.cc)",
       &RunBkbFig2},
      {"vendi_exact",
       "Mixture-Greedy paper eq. 9-11: exact Gram-matrix log-Vendi vs the random-feature form as R "
       "grows (vendi_sim.cc)",
       &RunVendiExact},
      {"gp_candidates",
       "BKB paper, changing arm sets: fresh candidates in [0,1]^d every round, f in the Gaussian "
       "kernel's RKHS, BKB vs exact GP-UCB (gp_candidates_sim.cc)",
       &RunGpCandidates},
      {"generators",
       "Mixture-Greedy paper: synthetic generators covering modes of a reference "
       "(generators_sim.cc)",
       &RunGenerators},
      {"logistic", "GLB-OMD paper: logistic bandit, theta* on the S-sphere (glb_sim.cc)", &RunGlb},
      {"poisson", "GLB-OMD paper: Poisson bandit (glb_sim.cc)", &RunGlb},
      {"gaussian", "Gaussian linear bandit with dispersion (glb_sim.cc)", &RunGlb},
      {"drift", "DOMD-GLB paper: logistic, theta rotates once around the S-circle (glb_sim.cc)",
       &RunGlb},
      {"position_bias",
       "Ranked slots with position bias: click = relevance x examination(slot), served by the "
       "multi-slot Select; per-slot regret against the oracle ranking (position_bias_sim.cc)",
       &RunPositionBias},
      {"piecewise", "DOMD-GLB paper: logistic, theta flips sign at T/2 (glb_sim.cc)", &RunGlb},
  };
  return *envs;
}

}  // namespace bandit::sim
