// The One-Arm Oracle baseline (the paper's Fig. 2) as a mixture algorithm: after the warm start
// it samples only the configured arm, with propensity 1; the config is validated.
#include <gtest/gtest.h>

#include "core/registry.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using bandit::v1::MixtureConfig;

bandit::v1::PolicyConfig OneArmOracle(const std::string& arm) {
  bandit::v1::PolicyConfig pc;
  for (const char* id : {"sdxl", "pixart", "kandinsky"}) pc.add_arms()->set_id(id);
  auto* c = pc.mutable_mixture();
  c->set_algorithm(MixtureConfig::ONE_ARM_ORACLE);
  c->set_objective(bandit::v1::RKE);
  c->set_dimension(3);
  c->set_warm_start(2);
  c->set_oracle_arm(arm);
  return pc;
}

TEST(OneArmOracle, SamplesOnlyTheConfiguredArmAfterWarmStart) {
  auto p = CreatePolicy(OneArmOracle("pixart"), 7);
  ASSERT_TRUE(p.ok()) << p.status();
  int warm = 0, oracle = 0;
  for (int t = 0; t < 40; ++t) {
    auto d = (*p)->Select({});
    ASSERT_TRUE(d.ok()) << d.status();
    if (t < 6) {  // M = 2 samples of each of the 3 arms first (Algorithm 1, line 2)
      ++warm;
    } else {
      EXPECT_EQ(d->arm_id, "pixart");
      EXPECT_EQ(d->propensity, 1.0);
      ++oracle;
    }
    Observation obs;
    obs.arm_id = d->arm_id;
    obs.sample = GeneratedSample{Eigen::Vector3d(1.0 + t % 3, 0.5, -0.25 * (t % 2)), std::nullopt};
    ASSERT_TRUE((*p)->Update(obs).ok());
  }
  EXPECT_EQ(warm, 6);
  EXPECT_EQ(oracle, 34);
  EXPECT_EQ((*p)->Weights(), Eigen::Vector3d(0, 1, 0));
}

TEST(OneArmOracle, RejectsMissingUnknownOrMisplacedArm) {
  EXPECT_EQ(CreatePolicy(OneArmOracle(""), 1).status().code(), absl::StatusCode::kInvalidArgument);
  auto unknown = CreatePolicy(OneArmOracle("dalle"), 1);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("dalle"), std::string::npos);
  auto greedy = OneArmOracle("sdxl");
  greedy.mutable_mixture()->set_algorithm(MixtureConfig::MIXTURE_GREEDY);
  EXPECT_EQ(CreatePolicy(greedy, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bandit
