// Multi-slot decisions, rewards per slot, reward aggregation and deferred activation, through
// DecisionService: conditional propensities against their closed form and a frequency count,
// exact counts of what is learned and when, bad input refused with nothing changed, and exact
// replay after a crash.
#include <gmock/gmock.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include <nlohmann/json.hpp>

#include "bandit/v1/storage.pb.h"
#include "client/cpp/decision_log_format.h"
#include "server/metrics/metrics.h"
#include "server/service/decision_service.h"
#include "tests/server/file_node.h"
#include "tests/server/server_test_util.h"
#include "core/ope/evaluator.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

using absl::StatusCode;
using ::testing::HasSubstr;
using testing::Create;
using testing::Exported;
using testing::Stats;
namespace v1 = bandit::v1;

// `n` dense candidates of dimension 2 (candidate i = (0.6, 0.6 i / n): norms at most 1, as the
// GLM policies require) and the given slots.
v1::SelectRequest SlotRequest(const std::string& instance, int n, std::vector<std::string> slots) {
  v1::SelectRequest req;
  req.set_instance(instance);
  for (int i = 0; i < n; ++i) {
    auto* c = req.add_candidates();
    c->add_values(0.6);
    c->add_values(0.6 * i / n);
  }
  for (const auto& id : slots) req.add_slots()->set_id(id);
  return req;
}

// The learned state (and random engine) of an instance's policy.
std::string PolicyState(DecisionService& svc, const std::string& name) {
  return testing::SnapshotOf(svc, name).policy().SerializeAsString();
}

constexpr auto& Reward = testing::SlotReward;

absl::Status Activate(DecisionService& svc, const std::string& name, const std::string& event) {
  v1::ActivateRequest req;
  req.set_instance(name);
  req.set_event_id(event);
  v1::ActivateResponse out;
  return svc.Activate(req, &out);
}

constexpr char kEpsGreedy[] =
    "policy { glm_epsilon_greedy { dimension: 2 link: GAUSSIAN epsilon: 0.3 } } seed: 7";

// epsilon-greedy before any reward: the greedy action is the first one offered (all scores are
// 0), so slot k's probability of its j-th offered action is eps / m + (j == 0) (1 - eps).
double EpsGreedyProbability(int offered_position, int offered) {
  return 0.3 / offered + (offered_position == 0 ? 0.7 : 0.0);
}

TEST(Slots, ConditionalPropensitiesAreTheClosedFormAndTheFrequencies) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  // Expired decisions are dropped: the policy learns nothing, so every draw is from the same
  // distribution.
  ASSERT_TRUE(svc.CreateInstance(Create("x", absl::StrCat(kEpsGreedy, " pending { reward_wait_ms: "
                                                                      "1 on_expiry: DROP }")),
                                 &out)
                  .ok());
  constexpr int kActions = 4, kDraws = 200'000;
  std::map<std::pair<int, int>, int> count;
  for (int t = 0; t < kDraws; ++t) {
    v1::SelectRequest req = SlotRequest("x", kActions, {"hero", "tile"});
    req.set_return_scores(t == 0);
    v1::Decision d;
    { const absl::Status st = svc.Select(req, &d); ASSERT_TRUE(st.ok()) << st; }
    ASSERT_EQ(d.slots_size(), 2);
    const int a = d.slots(0).arm_index(), b = d.slots(1).arm_index();
    ASSERT_NE(a, b);
    // Slot 0 is offered every action, slot 1 the three others, in request order.
    EXPECT_DOUBLE_EQ(d.slots(0).propensity(), EpsGreedyProbability(a, kActions));
    const int b_position = b - (b > a ? 1 : 0);
    EXPECT_DOUBLE_EQ(d.slots(1).propensity(), EpsGreedyProbability(b_position, kActions - 1));
    EXPECT_EQ(d.arm_index(), a);  // the decision's own fields are its first slot's
    if (t == 0) {
      // The ranking: every action offered to the slot with its conditional probability.
      double sum = 0;
      for (const auto& r : d.slots(1).ranking()) sum += r.probability();
      EXPECT_NEAR(sum, 1.0, 1e-12);
      EXPECT_EQ(d.slots(1).ranking_size(), kActions - 1);
      EXPECT_EQ(d.slots(1).ranking(0).id(), d.slots(1).action_id());
      for (const auto& r : d.slots(1).ranking()) EXPECT_NE(r.id(), d.slots(0).action_id());
    }
    ++count[{a, b}];
    if (t % 1000 == 999) clock.Advance(2);
  }
  for (int a = 0; a < kActions; ++a)
    for (int b = 0; b < kActions; ++b) {
      if (a == b) continue;
      const int b_position = b - (b > a ? 1 : 0);
      const double p = EpsGreedyProbability(a, kActions) *
                       EpsGreedyProbability(b_position, kActions - 1);
      const double sigma = std::sqrt(p * (1 - p) / kDraws);
      EXPECT_NEAR(static_cast<double>(count[{a, b}]) / kDraws, p, 5 * sigma) << a << "," << b;
    }
}

TEST(Slots, ExclusionsAndBaselinesShapeEachSlotsChoice) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("x", absl::StrCat(kEpsGreedy,
                                                           " decision_log { enabled: true }")),
                                 &out)
                  .ok());
  for (int t = 0; t < 200; ++t) {
    v1::SelectRequest req = SlotRequest("x", 5, {"a", "b", "c"});
    req.mutable_slots(0)->add_excluded_actions("0");
    req.mutable_slots(0)->add_excluded_actions("1");
    req.mutable_slots(1)->add_excluded_actions("4");
    req.mutable_slots(2)->set_baseline_action("3");
    v1::Decision d;
    { const absl::Status st = svc.Select(req, &d); ASSERT_TRUE(st.ok()) << st; }
    EXPECT_GE(d.slots(0).arm_index(), 2);
    EXPECT_NE(d.slots(1).arm_index(), 4);
    std::set<int> chosen;
    for (const auto& s : d.slots()) {
      chosen.insert(s.arm_index());
      EXPECT_EQ(s.action_id(), absl::StrCat(s.arm_index()));  // a dense candidate's id
    }
    EXPECT_EQ(chosen.size(), 3u);
  }
  // The log has one entry per slot, with the slot's offered actions and its baseline.
  const auto log = testing::LoggedDecisions(svc, "x");
  ASSERT_EQ(log.size(), 600u);
  EXPECT_EQ(log[0].slot_id(), "a");
  EXPECT_EQ(log[0].slot_index(), 0);
  EXPECT_THAT(std::vector<int>(log[0].slot_actions().begin(), log[0].slot_actions().end()),
              ::testing::ElementsAre(2, 3, 4));
  EXPECT_EQ(log[0].baseline_index(), -1);
  EXPECT_EQ(log[2].slot_id(), "c");
  EXPECT_EQ(log[2].baseline_index(), 3);
  EXPECT_EQ(log[1].event_id(), log[0].event_id());
  EXPECT_EQ(log[2].num_candidates(), log[2].slot_actions_size());
}

TEST(Slots, EachSlotIsRewardedOnceAndTheRestGetTheDefault) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("x", "policy { linucb { dimension: 2 } } "
                                             "pending { reward_wait_ms: 1000 default_reward: 0.25 } "
                                             "decision_log { enabled: true }"),
                                 &out)
                  .ok());
  v1::Decision d;
  { const absl::Status st = svc.Select(SlotRequest("x", 4, {"hero", "tile1", "tile2"}), &d); ASSERT_TRUE(st.ok()) << st; }
  const std::string e = d.event_id();
  ASSERT_TRUE(Reward(svc, "x", e, "hero", 1.0).ok());
  ASSERT_TRUE(Reward(svc, "x", e, "tile2", 0.5).ok());
  EXPECT_EQ(Reward(svc, "x", e, "hero", 1.0).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Reward(svc, "x", e, "", 1.0).code(), StatusCode::kInvalidArgument);
  const absl::Status unknown = Reward(svc, "x", e, "footer", 1.0);
  EXPECT_EQ(unknown.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.message()), HasSubstr("hero, tile1, tile2"));
  EXPECT_EQ(Stats(svc, "x").updates(), 2);
  EXPECT_EQ(Stats(svc, "x").pending(), 1);
  clock.Advance(1001);
  EXPECT_EQ(Stats(svc, "x").updates(), 3);  // tile1 learned the default
  EXPECT_EQ(Stats(svc, "x").pending(), 0);
  EXPECT_DOUBLE_EQ(Stats(svc, "x").reward_sum(), 1.75);
  EXPECT_EQ(Reward(svc, "x", e, "tile1", 1.0).code(), StatusCode::kFailedPrecondition);
  const auto log = testing::LoggedDecisions(svc, "x");
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[0].outcome(), v1::OUTCOME_REWARDED);
  EXPECT_EQ(log[1].outcome(), v1::OUTCOME_EXPIRED_DEFAULT);
  EXPECT_DOUBLE_EQ(log[1].reward(), 0.25);
  EXPECT_EQ(log[2].outcome(), v1::OUTCOME_REWARDED);
  EXPECT_DOUBLE_EQ(log[2].reward(), 0.5);
  // Per slot position: one slot filled at each, and what each learned.
  const auto positions = Stats(svc, "x").slot_positions();
  ASSERT_EQ(positions.size(), 3);
  const double learned[] = {1.0, 0.25, 0.5};
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(positions[k].position(), k);
    EXPECT_EQ(positions[k].decisions(), 1);
    EXPECT_EQ(positions[k].updates(), 1);
    EXPECT_DOUBLE_EQ(positions[k].reward_sum(), learned[k]);
  }
  // ...and as Prometheus series, labelled by position.
  Metrics metrics(&svc);
  std::map<std::string, double> series;
  for (const auto& family : metrics.collector()->Collect())
    if (family.name.rfind("bandit_slot_", 0) == 0)
      for (const auto& m : family.metric) {
        std::string key = family.name;
        for (const auto& l : m.label) key += "," + l.name + "=" + l.value;
        series[key] = family.type == prometheus::MetricType::Counter ? m.counter.value
                                                                      : m.gauge.value;
      }
  EXPECT_EQ(series.size(), 9u);
  EXPECT_EQ(series["bandit_slot_decisions_total,instance=x,position=2"], 1.0);
  EXPECT_EQ(series["bandit_slot_updates_total,instance=x,position=1"], 1.0);
  EXPECT_EQ(series["bandit_slot_reward_sum,instance=x,position=1"], 0.25);

  // A single decision takes no slot id.
  v1::SelectRequest single = SlotRequest("x", 2, {});
  { const absl::Status st = svc.Select(single, &d); ASSERT_TRUE(st.ok()) << st; }
  EXPECT_EQ(Reward(svc, "x", d.event_id(), "hero", 1.0).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Reward(svc, "x", d.event_id(), "", 1.0).ok());
}

// UpdateBatch with all_or_none (one event's slot rewards): an item that can never succeed
// refuses the whole batch with its INVALID_ARGUMENT and nothing changes (the instance's export
// is byte for byte the same); an item refused for its target's state (a slot already rewarded)
// does not stop the others; items for two instances are refused.
TEST(Slots, AllOrNoneRewardsApplyEveryItemOrNone) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("x", "policy { linucb { dimension: 2 } } seed: 3"), &out)
                  .ok());
  ASSERT_TRUE(svc.CreateInstance(Create("y", "policy { linucb { dimension: 2 } } seed: 3"), &out)
                  .ok());
  v1::Decision d;
  ASSERT_TRUE(svc.Select(SlotRequest("x", 4, {"hero", "tile1", "tile2"}), &d).ok());
  auto batch = [&](std::vector<std::pair<std::string, double>> rewards) {
    v1::UpdateBatchRequest req;
    req.set_all_or_none(true);
    for (const auto& [slot, r] : rewards) {
      v1::UpdateRequest* up = req.add_requests();
      up->set_instance("x");
      up->set_event_id(d.event_id());
      up->set_slot_id(slot);
      up->set_reward(r);
    }
    return req;
  };
  const std::string before = Exported(svc, "x");
  struct Case {
    v1::UpdateBatchRequest req;
    std::string message;
  };
  v1::UpdateBatchRequest two_instances = batch({{"hero", 1.0}, {"tile1", 1.0}});
  two_instances.mutable_requests(1)->set_instance("y");
  const Case cases[] = {
      {batch({{"hero", 1.0}, {"footer", 1.0}}),
       absl::StrCat("requests[1]: slot_id 'footer' is not a slot of event '", d.event_id(),
                    "', expected one of: hero, tile1, tile2")},
      {batch({{"hero", 1.0}, {"tile1", std::nan("")}}),
       "requests[1]: reward is nan, expected a finite number of magnitude at most 1e+100"},
      {batch({{"tile1", 1.0}, {"hero", 0.5}, {"tile1", 0.0}}),
       absl::StrCat("requests[2] rewards event '", d.event_id(),
                    "' slot 'tile1' as requests[0] does, expected one reward for each")},
      {two_instances,
       "requests[1].instance is 'y', expected 'x' as requests[0]: an all_or_none batch is for "
       "one instance"},
  };
  for (const Case& c : cases) {
    v1::UpdateBatchResponse resp;
    const absl::Status s = svc.UpdateBatch(c.req, &resp);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    EXPECT_EQ(s.message(), c.message);
    EXPECT_EQ(Exported(svc, "x"), before) << c.message;
  }
  // A slot already rewarded is refused on its own; the others apply.
  ASSERT_TRUE(Reward(svc, "x", d.event_id(), "tile2", 0.5).ok());
  v1::UpdateBatchResponse resp;
  ASSERT_TRUE(svc.UpdateBatch(batch({{"hero", 1.0}, {"tile2", 1.0}, {"tile1", 0.25}}), &resp).ok());
  ASSERT_EQ(resp.statuses_size(), 3);
  EXPECT_EQ(resp.statuses(0).code(), 0);
  EXPECT_EQ(resp.statuses(1).code(), static_cast<int>(StatusCode::kFailedPrecondition));
  EXPECT_EQ(resp.statuses(2).code(), 0);
  EXPECT_EQ(Stats(svc, "x").updates(), 3);
  EXPECT_DOUBLE_EQ(Stats(svc, "x").reward_sum(), 1.75);
  EXPECT_EQ(Stats(svc, "x").pending(), 0);
}

TEST(Slots, BadSlotsAreRefusedAndChangeNothing) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("x", kEpsGreedy), &out).ok());
  ASSERT_TRUE(svc.CreateInstance(Create("arms", "policy { ucb1 {} num_arms: 3 }"), &out).ok());
  const std::string before = Exported(svc, "x");
  struct Case {
    std::string what;
    v1::SelectRequest req;
    std::string says;
  };
  std::vector<Case> cases;
  cases.push_back({"more slots than actions", SlotRequest("x", 2, {"a", "b", "c"}),
                   "slots has 3 entries, expected at most 2"});
  cases.push_back({"duplicate slot ids", SlotRequest("x", 3, {"a", "a"}), "slots[1].id 'a' repeats"});
  cases.push_back({"bad slot id", SlotRequest("x", 3, {"a b"}), "slots[0].id"});
  {
    auto r = SlotRequest("x", 3, {"a", "b"});
    r.mutable_slots(1)->set_baseline_action("2");
    r.mutable_slots(1)->add_excluded_actions("2");
    cases.push_back({"baseline excluded in its slot", r, "is excluded for that slot"});
  }
  {
    auto r = SlotRequest("x", 3, {"a", "b"});
    r.mutable_slots(0)->set_baseline_action("1");
    r.mutable_slots(1)->set_baseline_action("1");
    cases.push_back({"baseline shared", r, "is also slots[0]'s baseline"});
  }
  {
    auto r = SlotRequest("x", 3, {"a", "b"});
    r.mutable_slots(1)->add_excluded_actions("0");
    r.mutable_slots(1)->add_excluded_actions("1");
    cases.push_back({"slot left one action after one slot", r,
                     "slots[1] may choose among 1 actions, expected more than 1"});
  }
  {
    auto r = SlotRequest("x", 3, {"a"});
    r.mutable_slots(0)->add_excluded_actions("7");
    cases.push_back({"unknown excluded id", r, "slots[0].excluded_actions[0] '7'"});
  }
  {
    auto r = SlotRequest("x", 3, {"a", "b"});
    r.mutable_slots(0)->add_dense_features(1.0);
    cases.push_back({"slot features of different lengths", r, "slots[1].dense_features has 0"});
  }
  {
    auto r = SlotRequest("x", 3, {"a"});
    r.mutable_slots(0)->add_dense_features(NAN);
    cases.push_back({"non-finite slot feature", r, "slots[0].dense_features[0] is nan"});
  }
  {
    v1::SelectRequest r;
    r.set_instance("arms");
    for (const char* id : {"a", "b", "c", "d"}) r.add_slots()->set_id(id);
    cases.push_back({"more slots than arms", r, "slots has 4 entries, expected at most 3"});
  }
  {
    v1::SelectRequest r;
    r.set_instance("arms");
    r.add_slots()->set_id("a");
    r.mutable_slots(0)->add_excluded_actions("7");
    cases.push_back({"an arm id the instance lacks", r, "slots[0].excluded_actions[0] '7'"});
  }
  {
    v1::SelectRequest r;
    r.set_instance("x");
    r.add_slots()->set_id("a");
    cases.push_back({"slots over an arm set for a policy over candidates", r,
                     "slots is set without actions"});
  }
  for (const Case& c : cases) {
    v1::Decision d;
    const absl::Status s = svc.Select(c.req, &d);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.what << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.says)) << c.what;
  }
  EXPECT_EQ(Exported(svc, "x"), before);
  EXPECT_EQ(Stats(svc, "arms").rounds(), 0);
  // The limit case is accepted: as many slots as actions.
  v1::Decision d;
  { const absl::Status st = svc.Select(SlotRequest("x", 3, {"a", "b", "c"}), &d); EXPECT_TRUE(st.ok()) << st; }
}

// LinUCB is deterministic and its state a function of what it learned: equal exports mean equal
// learning.
constexpr char kLinUcb[] = "policy { linucb { dimension: 2 } } seed: 3 pending { reward_wait_ms: 1000 }";

TEST(Slots, SumAggregationLearnsTheSumOnceWhenTheWaitEnds) {
  ManualClock clock;
  DecisionService svc(&clock), twin(&clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("x", "policy { linucb { dimension: 2 } } seed: 3 pending { "
                                             "reward_wait_ms: 1000 reward_aggregation: SUM }"),
                                 &out)
                  .ok());
  ASSERT_TRUE(twin.CreateInstance(Create("x", kLinUcb), &out).ok());
  v1::Decision d, dt;
  { const absl::Status st = svc.Select(SlotRequest("x", 3, {"p", "q"}), &d); ASSERT_TRUE(st.ok()) << st; }
  { const absl::Status st = twin.Select(SlotRequest("x", 3, {"p", "q"}), &dt); ASSERT_TRUE(st.ok()) << st; }
  ASSERT_TRUE(Reward(svc, "x", d.event_id(), "p", 0.5).ok());
  ASSERT_TRUE(Reward(svc, "x", d.event_id(), "p", 0.25).ok());
  ASSERT_TRUE(Reward(svc, "x", d.event_id(), "q", 1.0).ok());
  EXPECT_EQ(Stats(svc, "x").updates(), 0);  // nothing learned within the wait
  // The twin learns the same sums at once (EARLIEST): the same learned state in the end.
  ASSERT_TRUE(Reward(twin, "x", dt.event_id(), "p", 0.75).ok());
  ASSERT_TRUE(Reward(twin, "x", dt.event_id(), "q", 1.0).ok());
  EXPECT_NE(PolicyState(svc, "x"), PolicyState(twin, "x"));
  clock.Advance(1001);
  EXPECT_EQ(Stats(svc, "x").updates(), 2);
  EXPECT_DOUBLE_EQ(Stats(svc, "x").reward_sum(), 1.75);
  EXPECT_EQ(PolicyState(svc, "x"), PolicyState(twin, "x"));
}

TEST(Slots, DeferredDecisionsLearnOnlyOnceActivated) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("x", absl::StrCat(kLinUcb, " decision_log { enabled: true }")),
                                 &out)
                  .ok());
  auto deferred = [&](std::vector<std::string> slots) {
    v1::SelectRequest req = SlotRequest("x", 3, std::move(slots));
    req.set_defer_activation(true);
    v1::Decision d;
    { const absl::Status st = svc.Select(req, &d); EXPECT_TRUE(st.ok()) << st; }
    return d.event_id();
  };
  // Reward before activation: kept, learned when activated.
  const std::string early = deferred({});
  ASSERT_TRUE(Reward(svc, "x", early, "", 1.0).ok());
  EXPECT_EQ(Reward(svc, "x", early, "", 1.0).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Stats(svc, "x").updates(), 0);
  ASSERT_TRUE(Activate(svc, "x", early).ok());
  EXPECT_EQ(Stats(svc, "x").updates(), 1);
  EXPECT_EQ(Stats(svc, "x").activated(), 1);
  EXPECT_EQ(Activate(svc, "x", early).code(), StatusCode::kFailedPrecondition);  // finished
  // Activation, then the reward: learned at once. A second activation is refused.
  const std::string late = deferred({"top", "side"});
  ASSERT_TRUE(Activate(svc, "x", late).ok());
  EXPECT_EQ(Activate(svc, "x", late).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(Reward(svc, "x", late, "side", 0.5).ok());
  EXPECT_EQ(Stats(svc, "x").updates(), 2);
  // Never activated: dropped when the wait ends, rewards and all.
  const std::string never = deferred({"top"});
  ASSERT_TRUE(Reward(svc, "x", never, "top", 1.0).ok());
  EXPECT_EQ(Activate(svc, "x", "no-such-event").code(), StatusCode::kNotFound);
  clock.Advance(1001);
  const v1::InstanceStats stats = Stats(svc, "x");
  EXPECT_EQ(stats.not_activated(), 1);
  EXPECT_EQ(stats.updates(), 3);  // late's "top" slot got the default; never got nothing
  EXPECT_EQ(Activate(svc, "x", never).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Reward(svc, "x", never, "top", 1.0).code(), StatusCode::kFailedPrecondition);
  const auto log = testing::LoggedDecisions(svc, "x");
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[0].outcome(), v1::OUTCOME_REWARDED);
  EXPECT_EQ(log[3].outcome(), v1::OUTCOME_NOT_ACTIVATED);
}

TEST(Slots, PendingSlotsActivationsAndKeptRewardsReplayExactlyAfterACrash) {
  const std::string config =
      absl::StrCat(kEpsGreedy, " pending { reward_wait_ms: 50 } decision_log { enabled: true }");
  // Round t: a 2-slot decision over 4 candidates, deferred every third round, activated a round
  // later; each slot's reward comes a round later (the first slot's only on even rounds).
  struct Open {
    std::string event;
    bool deferred;
  };
  // Returns what the round saw: the status codes of the activation and rewards (a decision
  // whose wait passed refuses them) and the arms chosen.
  auto play = [&](DecisionService& svc, ManualClock& at, int t, std::vector<Open>* open) {
    std::vector<int> arms;
    for (const Open& o : *open) {
      if (o.deferred) arms.push_back(static_cast<int>(Activate(svc, "x", o.event).code()));
      if (t % 2 == 0)
        arms.push_back(static_cast<int>(Reward(svc, "x", o.event, "s0", 0.1 * (t % 7)).code()));
      arms.push_back(static_cast<int>(Reward(svc, "x", o.event, "s1", 0.2).code()));
    }
    open->clear();
    v1::SelectRequest req = SlotRequest("x", 4, {"s0", "s1"});
    req.set_defer_activation(t % 3 == 0);
    v1::Decision d;
    { const absl::Status st = svc.Select(req, &d); EXPECT_TRUE(st.ok()) << st; }
    for (const auto& s : d.slots()) arms.push_back(s.arm_index());
    open->push_back({d.event_id(), req.defer_activation()});
    at.Advance(t % 5 == 0 ? 60 : 1);  // now and then a wait passes
    return arms;
  };
  // Round 79's decision is still pending across the crash (with its kept state) and is
  // activated and rewarded by the next round, on the restarted node as on the twin (each with
  // its own event ids: each instance has its own uid).
  testing::ReplaysAsATwinAfterACrash<std::vector<Open>>(
      config, 80, play, [](DecisionService& restarted, DecisionService& twin) {
        EXPECT_EQ(Stats(restarted, "x").updates(), Stats(twin, "x").updates());
        EXPECT_GT(Stats(twin, "x").not_activated(), 0);  // the schedule lets some waits pass
        EXPECT_GT(Stats(twin, "x").activated(), 0);
        EXPECT_EQ(Stats(restarted, "x").not_activated(), Stats(twin, "x").not_activated());
        EXPECT_DOUBLE_EQ(Stats(restarted, "x").reward_sum(), Stats(twin, "x").reward_sum());
      });
}

absl::Status DirectReward(DecisionService& svc, const std::string& name, const std::string& arm,
                          double reward) {
  v1::UpdateRequest up;
  up.set_instance(name);
  up.mutable_direct()->set_arm_id(arm);
  up.set_reward(reward);
  v1::UpdateResponse r;
  return svc.Update(up, &r);
}

// Over an instance's own arm set (no actions in the request): each slot chooses among the arms
// the slots before it left. epsilon-greedy (eps 0.3) after arm "2" alone earned a reward: slot
// 0 gives arm 2 0.7 + 0.3/4 and the others 0.3/4; slot 1 gives arm 2, when still free,
// 0.7 + 0.3/3, and when taken every remaining arm 1/3 (their means tie at 0). Checked exactly
// per decision and against the frequencies of 60,000 decisions.
TEST(Slots, ArmSetSlotsTakeDistinctArmsWithConditionalPropensities) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("arms", "policy { epsilon_greedy { epsilon: 0.3 } "
                                                "num_arms: 4 } seed: 5 pending { "
                                                "reward_wait_ms: 1 on_expiry: DROP } "
                                                "decision_log { enabled: true }"),
                                 &out)
                  .ok());
  ASSERT_TRUE(DirectReward(svc, "arms", "2", 1.0).ok());
  auto slot1 = [](int first, int second) {
    if (first == 2) return 1.0 / 3;
    return second == 2 ? 0.7 + 0.1 : 0.1;
  };
  constexpr int kDraws = 60'000;
  std::map<std::pair<int, int>, int> count;
  for (int t = 0; t < kDraws; ++t) {
    v1::SelectRequest req;
    req.set_instance("arms");
    req.add_slots()->set_id("hero");
    req.add_slots()->set_id("tile");
    req.set_return_scores(t == 0);
    v1::Decision d;
    { const absl::Status st = svc.Select(req, &d); ASSERT_TRUE(st.ok()) << st; }
    ASSERT_EQ(d.slots_size(), 2);
    const int a = d.slots(0).arm_index(), b = d.slots(1).arm_index();
    ASSERT_NE(a, b);
    EXPECT_EQ(d.slots(0).action_id(), absl::StrCat(a));  // num_arms: ids "0".."3"
    EXPECT_DOUBLE_EQ(d.slots(0).propensity(), a == 2 ? 0.7 + 0.075 : 0.075);
    EXPECT_DOUBLE_EQ(d.slots(1).propensity(), slot1(a, b));
    EXPECT_EQ(d.arm_id(), d.slots(0).action_id());
    if (t == 0) {
      EXPECT_EQ(d.slots(1).ranking_size(), 3);
      double sum = 0;
      for (const auto& r : d.slots(1).ranking()) {
        EXPECT_NE(r.id(), d.slots(0).action_id());
        sum += r.probability();
      }
      EXPECT_NEAR(sum, 1.0, 1e-12);
    }
    ++count[{a, b}];
    if (t % 1000 == 999) clock.Advance(2);  // the waits pass: nothing is learned
  }
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) {
      if (a == b) continue;
      const double p = (a == 2 ? 0.775 : 0.075) * slot1(a, b);
      const double se = std::sqrt(p * (1 - p) / kDraws);
      const double frequency = count[{a, b}] / double(kDraws);
      EXPECT_NEAR(frequency, p, 5 * se) << a << "," << b;
    }
  // The log: one entry per slot, each among the arms still free, by id.
  const auto log = testing::LoggedDecisions(svc, "arms");
  ASSERT_GE(log.size(), 2u);
  EXPECT_EQ(log[0].arm_ids_size(), 4);
  EXPECT_EQ(log[1].arm_ids_size(), 3);
  EXPECT_EQ(log[1].num_actions(), 3);
  EXPECT_EQ(log[1].arm_ids(log[1].chosen_index()), log[1].chosen_arm_id());
  for (const auto& id : log[1].arm_ids()) EXPECT_NE(id, log[0].chosen_arm_id());
}

// A single decision over an arm set with excluded arms: never one of them, probabilities over
// the rest (Thompson's by quadrature over the allowed arms' posteriors), the log among the
// allowed arms; unknown ids and excluding every arm are refused with nothing changed.
TEST(Slots, ExcludedArmsOfAnArmSetAreNeverChosen) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("ts", "policy { thompson {} arms { id: \"red\" } "
                                              "arms { id: \"green\" } arms { id: \"blue\" } } "
                                              "seed: 9 decision_log { enabled: true }"),
                                 &out)
                  .ok());
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(DirectReward(svc, "ts", "green", 1.0).ok());
  for (int t = 0; t < 300; ++t) {
    v1::SelectRequest req;
    req.set_instance("ts");
    req.add_excluded_actions("green");
    req.set_return_scores(true);
    v1::Decision d;
    { const absl::Status st = svc.Select(req, &d); ASSERT_TRUE(st.ok()) << st; }
    ASSERT_NE(d.arm_id(), "green");
    ASSERT_EQ(d.scores_size(), 3);
    EXPECT_EQ(d.scores(1), 0.0);
    EXPECT_NEAR(d.scores(0) + d.scores(2), 1.0, 1e-5);
    // Red and blue have the same posterior: each wins half the time.
    EXPECT_NEAR(d.propensity(), 0.5, 1e-5);
  }
  const auto log = testing::LoggedDecisions(svc, "ts");
  ASSERT_EQ(log.size(), 300u);
  EXPECT_THAT(std::vector<std::string>(log[0].arm_ids().begin(), log[0].arm_ids().end()),
              ::testing::ElementsAre("red", "blue"));
  EXPECT_EQ(log[0].arm_ids(log[0].chosen_index()), log[0].chosen_arm_id());

  const std::string before = Exported(svc, "ts");
  for (const auto& [ids, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"purple"}, "excluded_actions[0] 'purple' is not the id of one of the instance's arms"},
           {{"red", "green", "blue"}, "excludes every arm"}}) {
    v1::SelectRequest req;
    req.set_instance("ts");
    for (const auto& id : ids) req.add_excluded_actions(id);
    v1::Decision d;
    const absl::Status s = svc.Select(req, &d);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(says));
  }
  EXPECT_EQ(Exported(svc, "ts"), before);
}

// Arm-set slots, some deferred, through a crash: the restarted node goes on exactly as an
// uninterrupted twin (Thompson: the random engine and the pending slots come back too).
TEST(Slots, ArmSetSlotsReplayExactlyAfterACrash) {
  const std::string config =
      "policy { thompson {} num_arms: 5 } seed: 4 pending { reward_wait_ms: 50 } "
      "decision_log { enabled: true }";
  auto play = [&](DecisionService& svc, ManualClock& at, int t, std::vector<std::string>* open) {
    std::vector<std::string> seen;
    for (const auto& e : *open) {
      if (t % 3 == 1) seen.push_back(absl::StrCat(Activate(svc, "x", e).code()));
      seen.push_back(absl::StrCat(Reward(svc, "x", e, "s0", t % 2).code()));
      seen.push_back(absl::StrCat(Reward(svc, "x", e, "s1", 1.0).code()));
    }
    open->clear();
    v1::SelectRequest req;
    req.set_instance("x");
    req.add_slots()->set_id("s0");
    req.add_slots()->set_id("s1");
    req.mutable_slots(1)->add_excluded_actions(absl::StrCat(t % 5));
    req.set_defer_activation(t % 3 == 0);
    v1::Decision d;
    { const absl::Status st = svc.Select(req, &d); EXPECT_TRUE(st.ok()) << st; }
    for (const auto& s : d.slots())
      seen.push_back(absl::StrCat(s.action_id(), "@", s.propensity()));
    open->push_back(d.event_id());
    at.Advance(t % 7 == 0 ? 60 : 1);
    return seen;
  };
  testing::ReplaysAsATwinAfterACrash<std::vector<std::string>>(
      config, 60, play, [](DecisionService& restarted, DecisionService& twin) {
        EXPECT_EQ(Stats(restarted, "x").updates(), Stats(twin, "x").updates());
        EXPECT_GT(Stats(twin, "x").updates(), 60);
        EXPECT_EQ(PolicyState(restarted, "x"), PolicyState(twin, "x"));
      });
}

// Named multi-slot decisions: each slot's vectors carry the slot's features and index as VW's
// CCB builds them, and the log exports as VW's CCB DSJSON whose rules hold on every line.
// A named two-slot page, 50 decisions on instance "page" (GLM epsilon-greedy over hashed
// features): slot "hero" (features of its own, baseline article-0) rewarded on two rounds of
// three, slot "tile" (excludes article-1, baseline article-2) on one in five, the others left
// pending. Returns the log's DSJSON lines; `rewards` gets each event's reward per slot (NaN:
// none).
constexpr char kNamedPage[] =
    "policy { glm_epsilon_greedy { link: GAUSSIAN epsilon: 0.2 max_feature_norm: 10 } } "
    "feature_space { bits: 6 interactions: 'UA' } decision_log { enabled: true }";

std::vector<std::string> PlayNamedPage(DecisionService& svc,
                                       std::map<std::string, std::vector<double>>* rewards) {
  v1::Instance out;
  EXPECT_TRUE(svc.CreateInstance(Create("page", kNamedPage), &out).ok());
  // A shadow of the served config: the server's own per-slot estimates, on its own vectors.
  v1::AddShadowRequest twin;
  twin.set_name("page");
  twin.set_shadow("twin");
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "policy { glm_epsilon_greedy { link: GAUSSIAN epsilon: 0.2 max_feature_norm: 10 } }",
      twin.mutable_config()));
  EXPECT_TRUE(svc.AddShadow(twin, &out).ok());
  for (int t = 0; t < 50; ++t) {
    v1::SelectRequest req;
    req.set_instance("page");
    req.set_context(absl::StrCat(R"({"User":{"country":")", t % 2 ? "DE" : "US", R"("}})"));
    for (int a = 0; a < 5; ++a) {
      auto* action = req.add_actions();
      action->set_id(absl::StrCat("article-", a));
      action->set_features(absl::StrCat(R"({"Action":{"topic":"t)", a % 3, R"("}})"));
    }
    req.add_excluded_actions("article-4");
    auto* hero = req.add_slots();
    hero->set_id("hero");
    hero->set_features(R"({"Slot":{"size":"large"}})");
    hero->set_baseline_action("article-0");
    auto* tile = req.add_slots();
    tile->set_id("tile");
    tile->add_excluded_actions("article-1");
    tile->set_baseline_action("article-2");
    v1::Decision d;
    const absl::Status st = svc.Select(req, &d);
    EXPECT_TRUE(st.ok()) << st;
    if (!st.ok() || d.slots_size() != 2) return {};
    EXPECT_NE(d.slots(0).action_id(), "article-4");
    EXPECT_NE(d.slots(1).action_id(), "article-1");
    std::vector<double> r = {NAN, NAN};
    if (t % 3 != 0) {
      r[0] = t % 2;
      EXPECT_TRUE(Reward(svc, "page", d.event_id(), "hero", r[0]).ok());
    }
    if (t % 5 == 1) {
      r[1] = 0.5 * (t % 4);
      EXPECT_TRUE(Reward(svc, "page", d.event_id(), "tile", r[1]).ok());
    }
    (*rewards)[d.event_id()] = r;
  }
  std::vector<std::string> lines;
  client::DecisionGrouper grouper([&](std::span<const v1::LoggedDecision> decision) {
    lines.push_back(client::FormatSlots(client::LogFormat::kDsjson, decision, "page"));
  });
  for (const auto& d : testing::LoggedDecisions(svc, "page")) grouper.Add(d);
  grouper.Flush();
  return lines;
}

TEST(Slots, NamedSlotsExportAsVwsConditionalContextualBanditLines) {
  ManualClock clock;
  DecisionService svc(&clock);
  std::map<std::string, std::vector<double>> rewards;
  const std::vector<std::string> lines = PlayNamedPage(svc, &rewards);
  ASSERT_EQ(lines.size(), 50u);
  for (const std::string& line : lines) {
    const auto j = nlohmann::json::parse(line);
    const auto& multi = j["c"]["_multi"];
    const auto& slots = j["c"]["_slots"];
    const auto& outcomes = j["_outcomes"];
    const auto& ours = j["_bandit"]["slots"];
    // The excluded article was offered to no slot; the others were.
    EXPECT_EQ(multi.size(), 4u) << line;
    ASSERT_EQ(slots.size(), 2u);
    ASSERT_EQ(outcomes.size(), 2u);
    ASSERT_EQ(ours.size(), 2u);
    EXPECT_EQ(slots[0]["_id"], "hero");
    EXPECT_EQ(slots[0]["Slot"]["size"], "large");
    EXPECT_EQ(j["_ba"], nlohmann::json::array({0, 2}));
    const auto& r = rewards.at(j["EventId"].get<std::string>());
    std::set<int> taken;
    for (size_t k = 0; k < 2; ++k) {
      const auto& inc = slots[k]["_inc"];
      EXPECT_EQ(outcomes[k]["_id"], slots[k]["_id"]);
      // VW's parser (parse_example_json.cc, LabelObjectState::EndObject) labels a slot exactly
      // when its outcome has "_a" and "_p", with "_label_cost" as the cost or FLT_MAX without
      // one: a slot with a reward has all three, a slot without one has none of them, and its
      // choice and probabilities are in "_bandit".
      const bool labeled = !std::isnan(r[k]);
      EXPECT_EQ(outcomes[k].contains("_a"), labeled) << line;
      EXPECT_EQ(outcomes[k].contains("_p"), labeled) << line;
      EXPECT_EQ(outcomes[k].contains("_label_cost"), labeled) << line;
      if (labeled) {
        EXPECT_EQ(outcomes[k]["_label_cost"].get<double>(), -r[k]);
      }
      const auto& a = labeled ? outcomes[k]["_a"] : ours[k]["a"];
      const auto& p = labeled ? outcomes[k]["_p"] : ours[k]["p"];
      // The slot's actions are its included ones, chosen first, each once, none taken by an
      // earlier slot; the probabilities follow them and sum to 1.
      ASSERT_EQ(a.size(), inc.size());
      ASSERT_EQ(p.size(), a.size());
      std::set<int> inc_set(inc.begin(), inc.end()), a_set(a.begin(), a.end());
      EXPECT_EQ(inc_set, a_set);
      EXPECT_EQ(a_set.size(), a.size());
      EXPECT_EQ(taken.count(a[0].get<int>()), 0u);
      double sum = 0;
      for (const auto& v : p) sum += v.get<double>();
      EXPECT_NEAR(sum, 1.0, 1e-12);
      taken.insert(a[0].get<int>());
    }
    // Slot "tile" excludes article-1 (multi index 1).
    for (const auto& i : slots[1]["_inc"]) EXPECT_NE(i.get<int>(), 1);
  }
}

// The CCB lines read back (ParseDsjsonDecisions) into the log's own entries, slot by slot; and
// bandit-ope's evaluator, replaying them with a candidate of the served config, featurizes each
// slot as the server did (the slot's features and index, VW's CCB form: the tile has no
// features of its own, so only the decision's two slots make it a CCB slot) and scores both
// slots before learning either, as the server decided them: its probabilities are the served
// ones, so every weight is 1 and each slot's IPS and SNIPS are exactly its served mean. Its
// doubly robust estimate per slot, whose direct model is a ridge regression on the slot's
// vectors, equals the one the server's shadow of the same config made on the server's own
// vectors: the two featurizations agree.
TEST(Slots, NamedSlotLinesReadBackAndReplayAsServedPerSlot) {
  ManualClock clock;
  DecisionService svc(&clock);
  std::map<std::string, std::vector<double>> rewards;
  const std::vector<std::string> lines = PlayNamedPage(svc, &rewards);
  ASSERT_EQ(lines.size(), 50u);
  const auto logged = testing::LoggedDecisions(svc, "page");
  ASSERT_EQ(logged.size(), 100u);
  ope::Candidate twin;
  twin.name = "twin";
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(kNamedPage, &twin.config));
  twin.config.clear_decision_log();
  auto evaluator = ope::Evaluator::Create({twin}, ope::EvaluateOptions());
  ASSERT_TRUE(evaluator.ok()) << evaluator.status();
  double reward_sum[2] = {0, 0};
  int rewarded[2] = {0, 0};
  for (size_t i = 0; i < lines.size(); ++i) {
    auto back = client::ParseDsjsonDecisions(lines[i]);
    ASSERT_TRUE(back.ok()) << back.status() << "\n" << lines[i];
    ASSERT_EQ(back->size(), 2u);
    for (int k = 0; k < 2; ++k) {
      const v1::LoggedDecision& want = logged[2 * i + k];
      const v1::LoggedDecision& got = (*back)[k];
      EXPECT_EQ(got.event_id(), want.event_id());
      EXPECT_EQ(got.event_seq(), want.event_seq());
      EXPECT_EQ(got.slot_id(), want.slot_id());
      EXPECT_EQ(got.slot_index(), k);
      EXPECT_EQ(got.outcome(), want.outcome());
      EXPECT_EQ(got.reward(), want.reward());
      EXPECT_EQ(got.propensity(), want.propensity());
      EXPECT_EQ(got.num_actions(), want.num_actions());
      EXPECT_EQ(got.chosen_index(), want.chosen_index());
      EXPECT_EQ(got.chosen_arm_id(), want.chosen_arm_id());
      ASSERT_EQ(got.probabilities_size(), want.probabilities_size());
      for (int j = 0; j < got.probabilities_size(); ++j)
        EXPECT_EQ(got.probabilities(j), want.probabilities(j));
      ASSERT_EQ(got.named_actions_size(), want.named_actions_size());
      for (int j = 0; j < got.named_actions_size(); ++j) {
        EXPECT_EQ(got.named_actions(j).id(), want.named_actions(j).id());
        EXPECT_EQ(nlohmann::json::parse(got.named_actions(j).features()),
                  nlohmann::json::parse(want.named_actions(j).features()));
      }
      EXPECT_EQ(nlohmann::json::parse(got.named_context()),
                nlohmann::json::parse(want.named_context()));
      EXPECT_EQ(got.slot_features().empty(), want.slot_features().empty());
      if (!want.slot_features().empty()) {
        EXPECT_EQ(nlohmann::json::parse(got.slot_features()),
                  nlohmann::json::parse(want.slot_features()));
      }
      if (got.outcome() == v1::OUTCOME_REWARDED) {
        reward_sum[k] += got.reward();
        ++rewarded[k];
      }
    }
    const absl::Status added = (*evaluator)->AddDecision(*back, absl::StrCat("line ", i), 2);
    ASSERT_TRUE(added.ok()) << added;
  }
  ASSERT_EQ(rewarded[0], 33);
  ASSERT_EQ(rewarded[1], 10);
  const ope::CandidateResult& result = (*evaluator)->results()[0];
  ASSERT_EQ(result.slots.size(), 2u);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(result.slots[k].events(), rewarded[k]);
    EXPECT_NEAR(result.slots[k].Ips().value, reward_sum[k] / rewarded[k], 1e-12) << k;
    EXPECT_NEAR(result.slots[k].Snips().value, reward_sum[k] / rewarded[k], 1e-12) << k;
  }
  EXPECT_EQ((*evaluator)->skipped(), 100 - rewarded[0] - rewarded[1]);
  v1::GetInstanceRequest get;
  get.set_name("page");
  v1::Instance inst;
  ASSERT_TRUE(svc.GetInstance(get, &inst).ok());
  ASSERT_EQ(inst.shadows_size(), 1);
  ASSERT_EQ(inst.shadows(0).slots_size(), 2);
  for (int k = 0; k < 2; ++k) {
    const v1::ShadowSlotEstimate& server = inst.shadows(0).slots(k);
    EXPECT_EQ(server.events(), rewarded[k]);
    EXPECT_NEAR(server.ips().value(), result.slots[k].Ips().value, 1e-12) << k;
    EXPECT_NEAR(server.dr().value(), result.slots[k].DoublyRobust().value, 1e-9) << k;
  }
}

}  // namespace
}  // namespace bandit::server
