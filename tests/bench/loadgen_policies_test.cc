// bandit-loadgen's policies come from the registry: --inprocess times every example of every
// registered policy, and --policy takes any registered name. Checked against the registry itself
// and against each config's own fields (read through the generated accessors, not reflection).
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "bench/loadgen/inprocess.h"
#include "bench/loadgen/workload.h"
#include "core/registry.h"

namespace bandit::loadgen {
namespace BANDIT_UNITY_ID {

TEST(LoadgenPolicies, InProcessTimesEveryRegisteredExampleAndEachBuilds) {
  const auto cases = InProcessCases(20, 50);
  std::set<std::string> names, examples;
  for (const auto& c : cases) {
    names.insert(c.name);
    examples.insert(c.example);
    EXPECT_TRUE(CreatePolicy(c.config, 1).ok()) << c.name << ": " << c.example;
  }
  EXPECT_EQ(names.size(), cases.size()) << "case names repeat";
  for (const auto& r : RegisteredPolicies()) {
    EXPECT_TRUE(names.contains(std::string(r.name))) << r.name << " is not timed";
    for (const auto& e : r.examples)
      EXPECT_TRUE(examples.contains(std::string(e.config)))
          << r.name << " example '" << e.config << "' is not timed";
  }
}

TEST(LoadgenPolicies, ExamplesAreSizedToTheRun) {
  Gen g(1);
  // A GLB config: dimension and S.
  auto glb = SizedExample("glb_omd { dimension: 3 }", 20, 50, g);
  ASSERT_TRUE(glb.ok());
  EXPECT_EQ(glb->glb_omd().dimension(), 20);
  EXPECT_EQ(glb->glb_omd().s(), kThetaNorm);
  // A K-armed config: the arm count.
  auto k_armed = SizedExample("ucb1 {} num_arms: 3", 20, 50, g);
  ASSERT_TRUE(k_armed.ok());
  EXPECT_EQ(k_armed->num_arms(), 50);
  // Arms with features: `arms` arms of d features; a policy without `s` keeps none.
  auto kernel = SizedExample("gp_ucb {} arms { id: 'a' features: [0, 1] }", 5, 7, g);
  ASSERT_TRUE(kernel.ok());
  ASSERT_EQ(kernel->arms_size(), 7);
  for (const auto& a : kernel->arms()) EXPECT_EQ(a.features_size(), 5);
  EXPECT_EQ(kernel->arms(6).id(), "6");
  EXPECT_EQ(ConfigDimension(*kernel), 0);
  EXPECT_EQ(ConfigDimension(*glb), 20);
  // What the in-process run reports for a sized contextual case.
  for (const auto& c : InProcessCases(20, 50))
    if (c.name == "linucb") {
      EXPECT_TRUE(c.sized);
      EXPECT_EQ(c.config.linucb().dimension(), 20);
      EXPECT_EQ(c.d, 20);
    }
}

TEST(LoadgenPolicies, ThePolicyFlagTakesEveryRegisteredNameAndListsThemOtherwise) {
  Gen g(1);
  auto unknown = MakePolicyConfig("no_such_policy", "", 20, 50, g);
  ASSERT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  for (const auto& r : RegisteredPolicies()) {
    EXPECT_NE(unknown.status().message().find(std::string(r.name)), absl::string_view::npos)
        << r.name << " is not listed in: " << unknown.status().message();
    // At small sizes every registered policy's first example is taken as it is sized.
    auto config = MakePolicyConfig(std::string(r.name), "", 2, 3, g);
    ASSERT_TRUE(config.ok()) << r.name << ": " << config.status();
    EXPECT_EQ(config->policy_case(), r.config_case) << r.name;
  }
}

}  // namespace
}  // namespace bandit::loadgen
