// InstanceRegistry: named instances with exact statuses for every refusal (duplicate name, the
// instance limit, unknown or malformed names, refused-at-recovery names), name-ordered paging
// checked against a std::set of the names, and the miss handler's contract.
#include "server/instance/instance_registry.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

#include "server/env/clock.h"
#include "tests/server/server_test_util.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

using absl::StatusCode;

constexpr char kEps[] = "policy { epsilon_greedy { epsilon: 0.1 } num_arms: 3 } seed: 5";

std::shared_ptr<Instance> Make(const ManualClock& clock, const std::string& name) {
  auto inst = Instance::Create(testing::Create(name, kEps), &clock, InstanceLimits{}, /*uid=*/7);
  EXPECT_TRUE(inst.ok()) << inst.status();
  return *inst;
}

TEST(InstanceRegistry, AddGetRemoveWithExactStatuses) {
  ManualClock clock;
  InstanceRegistry reg(/*max_instances=*/10);
  auto a = Make(clock, "a");
  ASSERT_TRUE(reg.Add(a).ok());
  auto got = reg.Get("a");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->get(), a.get());  // the same object, not a copy

  absl::Status dup = reg.Add(Make(clock, "a"));
  EXPECT_EQ(dup.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(dup.message(), "instance 'a' already exists");
  EXPECT_EQ((*reg.Get("a")).get(), a.get());  // the refused duplicate replaced nothing

  EXPECT_EQ(reg.Get("b").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(reg.Get("b").status().message(), "instance 'b' does not exist");
  EXPECT_EQ(reg.Get("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.Remove("").code(), StatusCode::kInvalidArgument);

  ASSERT_TRUE(reg.Remove("a").ok());
  EXPECT_EQ(reg.Get("a").status().code(), StatusCode::kNotFound);
  absl::Status again = reg.Remove("a");
  EXPECT_EQ(again.code(), StatusCode::kNotFound);
  EXPECT_EQ(again.message(), "instance 'a' does not exist");
  EXPECT_EQ(reg.size(), 0);
  // A caller still holding the instance finishes on it: removal only drops the registry's share.
  EXPECT_EQ(a->name(), "a");
  EXPECT_EQ(a.use_count(), 2);  // `a` and `got`
}

TEST(InstanceRegistry, TheLimitRefusesOneMoreAndFreesWithARemoval) {
  ManualClock clock;
  InstanceRegistry reg(/*max_instances=*/2);
  ASSERT_TRUE(reg.Add(Make(clock, "a")).ok());
  ASSERT_TRUE(reg.Add(Make(clock, "b")).ok());
  absl::Status full = reg.Add(Make(clock, "c"));
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(full.message(), "the server holds 2 instances, the configured maximum");
  EXPECT_EQ(reg.size(), 2);
  EXPECT_EQ(reg.Get("c").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(reg.Remove("a").ok());
  EXPECT_TRUE(reg.Add(Make(clock, "c")).ok());
  EXPECT_EQ(reg.size(), 2);
}

TEST(InstanceRegistry, ListAfterPagesInNameOrderLikeASortedSet) {
  ManualClock clock;
  InstanceRegistry reg(100);
  const std::set<std::string> names = {"m", "b", "zz", "a", "b2", "c", "y"};
  for (const auto& n : names) ASSERT_TRUE(reg.Add(Make(clock, n)).ok());
  // Paging by 3 from "" visits the std::set's order exactly once.
  std::vector<std::string> paged;
  std::string after;
  for (;;) {
    auto page = reg.ListAfter(after, 3);
    if (page.empty()) break;
    EXPECT_LE(page.size(), 3u);
    for (const auto& inst : page) paged.push_back(inst->name());
    after = page.back()->name();
  }
  EXPECT_EQ(paged, std::vector<std::string>(names.begin(), names.end()));
  // `after` need not be a name the registry holds: the page starts at the next name above it.
  auto from_b1 = reg.ListAfter("b1", 2);
  ASSERT_EQ(from_b1.size(), 2u);
  EXPECT_EQ(from_b1[0]->name(), "b2");
  EXPECT_EQ(from_b1[1]->name(), "c");
  EXPECT_EQ(reg.All().size(), names.size());
}

TEST(InstanceRegistry, ARefusedNameAnswersItsReasonUntilRemoved) {
  ManualClock clock;
  InstanceRegistry reg(10);
  ASSERT_TRUE(reg.Add(Make(clock, "bad")).ok());
  const absl::Status why = absl::DataLossError("snapshot of 'bad' fails its checksum");
  reg.Refuse("bad", why);
  EXPECT_EQ(reg.size(), 0);  // refusing drops the loaded copy
  EXPECT_EQ(reg.Get("bad").status(), why);
  EXPECT_EQ(reg.Add(Make(clock, "bad")), why);  // no new instance over a refused name
  ASSERT_EQ(reg.Refused().size(), 1u);
  EXPECT_EQ(reg.Refused()[0].first, "bad");
  // Removing (the operator's delete) clears the refusal; the name is free again.
  ASSERT_TRUE(reg.Remove("bad").ok());
  EXPECT_TRUE(reg.Refused().empty());
  EXPECT_EQ(reg.Get("bad").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(reg.Add(Make(clock, "bad")).ok());
}

TEST(InstanceRegistry, TakeRemovesWithoutAskingTheMissHandler) {
  ManualClock clock;
  InstanceRegistry reg(10);
  int asked = 0;
  reg.SetMissHandler([&](const std::string&) {
    ++asked;
    return absl::UnavailableError("owned by node-2");
  });
  auto a = Make(clock, "a");
  ASSERT_TRUE(reg.Add(a).ok());
  EXPECT_EQ(reg.Take("a").get(), a.get());
  EXPECT_EQ(reg.Take("a"), nullptr);
  EXPECT_EQ(asked, 0);
  // A miss now goes to the handler, whose status is the answer.
  EXPECT_EQ(reg.Get("a").status(), absl::UnavailableError("owned by node-2"));
  EXPECT_EQ(asked, 1);
}

TEST(InstanceRegistry, AMissHandlerThatLoadsTheInstanceIsLookedAgain) {
  ManualClock clock;
  InstanceRegistry reg(10);
  std::vector<std::string> asked;
  reg.SetMissHandler([&](const std::string& name) {
    asked.push_back(name);
    if (name != "here") return absl::OkStatus();  // "looked for it, not found either"
    return reg.Add(Make(clock, name));            // takes it over, as a cluster node does
  });
  auto got = reg.Get("here");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)->name(), "here");
  EXPECT_TRUE(reg.Get("here").ok());
  EXPECT_EQ(asked, std::vector<std::string>{"here"});  // the second Get found it loaded
  EXPECT_EQ(reg.Get("gone").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace bandit::server
