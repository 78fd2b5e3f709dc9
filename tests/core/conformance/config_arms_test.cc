// SetConfigArms (core/registry.h): the config it rewrites for a live arm set builds a policy
// with exactly that arm set, for every registered arm-set policy, whatever family counts
// arms in its own fields.
#include <string>
#include <vector>

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include "core/policy.h"
#include "core/registry.h"

namespace bandit {
namespace {

using bandit::v1::PolicyConfig;

PolicyConfig Parse(absl::string_view text) {
  PolicyConfig c;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(std::string(text), &c)) << text;
  return c;
}

// Every registered example over a finite arm set: after an arm is added (where the policy
// takes one) and the first arm removed, the config rewritten for the live arm set creates a
// policy whose arm set is the live one, in the same slot order.
TEST(SetConfigArms, RebuildsTheLiveArmSetOfEveryArmSetPolicy) {
  int checked = 0;
  for (const auto& reg : RegisteredPolicies()) {
    for (const auto& example : reg.examples) {
      SCOPED_TRACE(example.config);
      PolicyConfig config = Parse(example.config);
      auto live = CreatePolicy(config, 7);
      ASSERT_TRUE(live.ok()) << live.status();
      if ((*live)->context_kind() != ContextKind::kNone) continue;
      bandit::v1::ArmSpec added;
      added.set_id("added");
      (void)(*live)->AddArm(added);  // a policy that cannot take it keeps its arm set
      const std::vector<std::string> before = (*live)->ArmIds();
      ASSERT_FALSE(before.empty());
      if (before.size() > 1) (void)(*live)->RemoveArm(before.front());
      const std::vector<std::string> ids = (*live)->ArmIds();
      SetConfigArms(ids, &config);
      EXPECT_EQ(config.num_arms(), 0);
      auto rebuilt = CreatePolicy(config, 7);
      ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
      EXPECT_EQ((*rebuilt)->ArmIds(), ids);
      ++checked;
    }
  }
  EXPECT_GT(checked, 5);  // the classic policies, BKB's fixed arms and the mixtures at least
}

// Kept arms keep their specs (features included), new ids come bare, and both the policy's and
// the mixture's own arm counts are cleared.
TEST(SetConfigArms, KeepsSpecsOfKeptArmsAndClearsEveryArmCount) {
  PolicyConfig config = Parse(
      "mixture { num_arms: 2 dimension: 2 } "
      "arms { id: 'a' features: [1, 2] } arms { id: 'b' features: [3] }");
  const std::vector<std::string> ids = {"b", "c"};
  SetConfigArms(ids, &config);
  ASSERT_EQ(config.arms_size(), 2);
  EXPECT_EQ(config.arms(0).id(), "b");
  ASSERT_EQ(config.arms(0).features_size(), 1);
  EXPECT_EQ(config.arms(0).features(0), 3.0);
  EXPECT_EQ(config.arms(1).id(), "c");
  EXPECT_EQ(config.arms(1).features_size(), 0);
  EXPECT_EQ(config.num_arms(), 0);
  EXPECT_EQ(config.mixture().num_arms(), 0);
  EXPECT_EQ(config.mixture().dimension(), 2);  // nothing else changes

  PolicyConfig counted = Parse("thompson {} num_arms: 3");
  SetConfigArms(std::vector<std::string>{"0", "1", "2", "3"}, &counted);
  EXPECT_EQ(counted.num_arms(), 0);
  EXPECT_EQ(counted.arms_size(), 4);
  EXPECT_TRUE(counted.has_thompson());
}

}  // namespace
}  // namespace bandit
