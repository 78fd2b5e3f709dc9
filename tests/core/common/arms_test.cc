// ArmSet, the finite arm set with stable ids, against a slow exact model (a vector of ids and
// a vector of feature columns): a seeded random sequence of adds and removes keeps ids, slots,
// lookups and features equal to the model's; refusals carry exact messages and change nothing;
// Save/Restore round-trips, and a state repeating an arm id is refused. Also the id rule, the
// allowed-arms helpers against brute force, and ArmMeans against the arithmetic mean.
#include "core/arms.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

namespace v1 = bandit::v1;

v1::ArmSpec Arm(const std::string& id, std::vector<double> features = {}) {
  v1::ArmSpec a;
  a.set_id(id);
  for (double f : features) a.add_features(f);
  return a;
}

ArmSet FromIds(const std::vector<std::string>& ids, ArmFeatures features = ArmFeatures::kNone) {
  v1::PolicyConfig config;
  for (size_t i = 0; i < ids.size(); ++i)
    *config.add_arms() =
        features == ArmFeatures::kNone ? Arm(ids[i]) : Arm(ids[i], {double(i), -double(i)});
  auto set = ArmSet::FromConfig(config, features);
  EXPECT_TRUE(set.ok()) << set.status();
  return *std::move(set);
}

TEST(ArmSet, NumArmsNamesTheArmsByPosition) {
  v1::PolicyConfig config;
  config.set_num_arms(3);
  auto set = ArmSet::FromConfig(config, ArmFeatures::kNone);
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(set->ids(), (std::vector<std::string>{"0", "1", "2"}));
  config.set_num_arms(-1);
  EXPECT_EQ(ArmSet::FromConfig(config, ArmFeatures::kNone).status(),
            absl::InvalidArgumentError("num_arms is -1, expected >= 0"));
  config.set_num_arms(0);
  EXPECT_EQ(
      ArmSet::FromConfig(config, ArmFeatures::kNone, -1, 2).status(),
      absl::InvalidArgumentError("policy has 0 arms, expected at least 2 (set arms or num_arms)"));
}

TEST(ArmSet, RandomAddsAndRemovesMatchASlowModel) {
  std::mt19937_64 gen(1234);
  ArmSet set = FromIds({"a0", "a1", "a2"}, ArmFeatures::kRequired);
  std::vector<std::string> ids = {"a0", "a1", "a2"};
  std::vector<std::vector<double>> feats = {{0, 0}, {1, -1}, {2, -2}};
  int next = 3;
  for (int step = 0; step < 2000; ++step) {
    if (ids.empty() || gen() % 2 == 0) {
      const std::string id = "a" + std::to_string(next++);
      const std::vector<double> f = {double(gen() % 100), double(step)};
      ASSERT_TRUE(set.CheckAdd(Arm(id, f)).ok());
      EXPECT_EQ(set.Add(Arm(id, f)), static_cast<int>(ids.size()));  // always the last slot
      ids.push_back(id);
      feats.push_back(f);
    } else {
      const size_t slot = gen() % ids.size();
      auto removed = set.Remove(ids[slot]);
      ASSERT_TRUE(removed.ok());
      EXPECT_EQ(*removed, static_cast<int>(slot));
      ids.erase(ids.begin() + slot);
      feats.erase(feats.begin() + slot);
    }
    ASSERT_EQ(set.ids(), ids) << "step " << step;
    ASSERT_EQ(set.features().cols(), static_cast<int64_t>(ids.size()));
    if (step % 97 == 0 || ids.size() < 3) {
      for (size_t i = 0; i < ids.size(); ++i) {
        ASSERT_EQ(set.Find(ids[i]), std::optional<int>(static_cast<int>(i)));
        ASSERT_EQ(set.features()(0, i), feats[i][0]);
        ASSERT_EQ(set.features()(1, i), feats[i][1]);
      }
    }
  }
  EXPECT_EQ(set.Find("a1000000"), std::nullopt);
}

TEST(ArmSet, RefusalsAreExactAndChangeNothing) {
  ArmSet set = FromIds({"x", "y"}, ArmFeatures::kRequired);
  EXPECT_EQ(set.CheckAdd(Arm("x", {1, 2})),
            absl::InvalidArgumentError("arm id 'x' is a duplicate, expected unique arm ids"));
  EXPECT_EQ(set.CheckAdd(Arm("z", {1})).code(), absl::StatusCode::kInvalidArgument);  // dim 2
  EXPECT_EQ(set.CheckAdd(Arm("z", {1, NAN})).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(set.Remove("nope").status(),
            absl::NotFoundError("arm id 'nope' is not in the arm set"));
  EXPECT_EQ(set.ids(), (std::vector<std::string>{"x", "y"}));

  v1::PolicyConfig dup;
  *dup.add_arms() = Arm("a");
  *dup.add_arms() = Arm("a");
  EXPECT_EQ(
      ArmSet::FromConfig(dup, ArmFeatures::kNone).status(),
      absl::InvalidArgumentError("arms[1]: arm id 'a' is a duplicate, expected unique arm ids"));
}

TEST(ArmSet, SaveRestoreRoundTripsIdsAndFeatures) {
  ArmSet set = FromIds({"p", "q", "r"}, ArmFeatures::kRequired);
  ASSERT_TRUE(set.Remove("q").ok());
  set.Add(Arm("s", {7, 8}));
  v1::PolicyState st;
  StateWriter w(&st, "t", 1);
  set.Save(w);
  ArmSet back = FromIds({"only"}, ArmFeatures::kRequired);  // same feature dimension
  ASSERT_TRUE(back.Restore(StateReader(st)).ok());
  EXPECT_EQ(back.ids(), set.ids());
  EXPECT_EQ(back.features(), set.features());
  for (int i = 0; i < set.size(); ++i) EXPECT_EQ(back.Find(set.id(i)), std::optional<int>(i));
  EXPECT_EQ(back.Bytes(), set.Bytes());
  // A state whose feature matrix does not match its ids is refused, the set unchanged.
  st.mutable_tensors(0)->set_cols(2);
  ArmSet untouched = FromIds({"only"}, ArmFeatures::kRequired);
  EXPECT_EQ(untouched.Restore(StateReader(st)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(untouched.ids(), std::vector<std::string>{"only"});
}

TEST(ArmSet, RestoreRefusesAStateThatRepeatsAnArmIdAndChangesNothing) {
  ArmSet set = FromIds({"p", "q", "r"}, ArmFeatures::kRequired);
  v1::PolicyState st;
  StateWriter w(&st, "t", 1);
  set.Save(w);
  ASSERT_EQ(st.arm_ids_size(), 3);
  st.set_arm_ids(2, "p");  // p, q, p: the feature matrix still has one column per id
  ArmSet untouched = FromIds({"only"}, ArmFeatures::kRequired);
  EXPECT_EQ(untouched.Restore(StateReader(st)),
            absl::InvalidArgumentError(
                "the state's arm_ids[2] 'p' repeats arm_ids[0], expected unique arm ids"));
  EXPECT_EQ(untouched.ids(), std::vector<std::string>{"only"});
  EXPECT_EQ(untouched.features(), FromIds({"only"}, ArmFeatures::kRequired).features());
  EXPECT_EQ(untouched.Find("only"), std::optional<int>(0));
  EXPECT_EQ(untouched.Find("p"), std::nullopt);
  // Without features too (ids only).
  ArmSet plain = FromIds({"a", "b"});
  v1::PolicyState ids_only;
  StateWriter wi(&ids_only, "t", 1);
  plain.Save(wi);
  ids_only.set_arm_ids(1, "a");
  EXPECT_EQ(plain.Restore(StateReader(ids_only)),
            absl::InvalidArgumentError(
                "the state's arm_ids[1] 'a' repeats arm_ids[0], expected unique arm ids"));
  EXPECT_EQ(plain.ids(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(plain.Find("b"), std::optional<int>(1));
}

TEST(ArmIds, TheIdRuleAtItsBoundaries) {
  EXPECT_TRUE(CheckId("arm id", std::string(128, 'a')).ok());
  EXPECT_EQ(
      CheckId("arm id", std::string(129, 'a')),
      absl::InvalidArgumentError(absl::StrCat("arm id '", std::string(129, 'a'),
                                              "' has length 129, expected 1..128 characters")));
  EXPECT_EQ(CheckId("arm id", ""),
            absl::InvalidArgumentError("arm id '' has length 0, expected 1..128 characters"));
  EXPECT_TRUE(CheckId("arm id", "A9_.:-z").ok());
  EXPECT_EQ(CheckId("arm id", "_a"),
            absl::InvalidArgumentError("arm id '_a' has an invalid character at position 0, "
                                       "expected [A-Za-z0-9] first and [A-Za-z0-9_.:-] after"));
  EXPECT_EQ(CheckId("arm id", "a b").code(), absl::StatusCode::kInvalidArgument);
}

TEST(AllowedArms, CountAndNthAgreeWithBruteForce) {
  std::mt19937_64 gen(5);
  for (int trial = 0; trial < 500; ++trial) {
    const int k = 1 + static_cast<int>(gen() % 12);
    std::vector<char> allowed(k);
    for (char& a : allowed) a = static_cast<char>(gen() % 2);
    std::vector<int> slots;
    for (int i = 0; i < k; ++i)
      if (allowed[i]) slots.push_back(i);
    EXPECT_EQ(CountAllowed(allowed, k), static_cast<int>(slots.size()));
    for (size_t n = 0; n < slots.size(); ++n) EXPECT_EQ(NthAllowed(allowed, n), slots[n]);
    for (int i = 0; i < k; ++i) EXPECT_EQ(IsAllowed(allowed, i), allowed[i] != 0);
    EXPECT_EQ(CheckAllowedArms(allowed, k).ok(), !slots.empty());
  }
  // Empty mask: every arm, and the n-th allowed arm is n itself.
  EXPECT_EQ(CountAllowed({}, 5), 5);
  EXPECT_EQ(NthAllowed({}, 3), 3);
  EXPECT_TRUE(CheckAllowedArms({}, 5).ok());
  const std::vector<char> three(3, 1);
  EXPECT_EQ(
      CheckAllowedArms(three, 4),
      absl::InvalidArgumentError("the allowed-arms mask has 3 entries, expected one per arm (4)"));
}

TEST(ArmMeans, TheIncrementalMeanIsTheArithmeticMean) {
  std::mt19937_64 gen(8);
  std::uniform_real_distribution<double> reward(-3, 5);
  ArmMeans means(3);
  std::vector<std::vector<double>> seen(3);
  for (int i = 0; i < 3000; ++i) {
    const int slot = static_cast<int>(gen() % 3);
    const double r = reward(gen);
    means.Observe(slot, r);
    seen[slot].push_back(r);
  }
  for (int a = 0; a < 3; ++a) {
    EXPECT_EQ(means.counts[a], static_cast<double>(seen[a].size()));
    const double mean = std::accumulate(seen[a].begin(), seen[a].end(), 0.0) / seen[a].size();
    EXPECT_NEAR(means.means[a], mean, 1e-12);
  }
  means.EraseSlot(1);
  EXPECT_EQ(means.counts.size(), 2);
  EXPECT_EQ(means.counts[1], static_cast<double>(seen[2].size()));
}

}  // namespace
}  // namespace bandit
