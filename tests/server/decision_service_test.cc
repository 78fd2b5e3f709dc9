// DecisionService in-process, with a manual clock: the request logic the gRPC layer adapts.
#include "server/service/decision_service.h"
#include "server/instance/pending_table.h"
#include "server/storage/snapshot_store.h"
#include "tests/server/server_test_util.h"

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include "absl/strings/str_cat.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

using absl::StatusCode;
namespace v1 = bandit::v1;

using testing::Create;

class DecisionServiceTest : public ::testing::Test {
 protected:
  ManualClock clock_;
  DecisionService svc_{&clock_};

  void MakeEps(const std::string& name, const std::string& extra = "") {
    v1::Instance out;
    ASSERT_TRUE(
        svc_.CreateInstance(
                Create(name, "policy { epsilon_greedy { epsilon: 0.2 } num_arms: 3 } " + extra),
                &out)
            .ok());
  }
  v1::Decision Select(const std::string& name) {
    v1::SelectRequest req;
    req.set_instance(name);
    v1::Decision d;
    EXPECT_TRUE(svc_.Select(req, &d).ok());
    return d;
  }
  absl::Status Reward(const std::string& name, const std::string& event, double r) {
    v1::UpdateRequest req;
    req.set_instance(name);
    req.set_event_id(event);
    req.set_reward(r);
    v1::UpdateResponse resp;
    return svc_.Update(req, &resp);
  }
  v1::InstanceStats Stats(const std::string& name) {
    v1::GetInstanceRequest req;
    req.set_name(name);
    v1::Instance out;
    EXPECT_TRUE(svc_.GetInstance(req, &out).ok());
    return out.stats();
  }
  std::string PolicyState(const std::string& name) {
    auto inst = svc_.registry().Get(name);
    EXPECT_TRUE(inst.ok());
    v1::Instance out;
    (*inst)->Describe(&out);
    return out.stats().SerializeAsString();
  }
};

TEST_F(DecisionServiceTest, LifecycleAndExactErrorCodes) {
  MakeEps("a");
  v1::Instance out;
  EXPECT_EQ(svc_.CreateInstance(Create("a", "policy { ucb1 {} num_arms: 2 }"), &out).code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(svc_.CreateInstance(Create("bad name", "policy { ucb1 {} num_arms: 2 }"), &out).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      svc_.CreateInstance(Create(std::string(129, 'x'), "policy { ucb1 {} num_arms: 2 }"), &out)
          .code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(svc_.CreateInstance(Create("nopolicy", "seed: 3"), &out).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(svc_.CreateInstance(
                    Create("eps", "policy { epsilon_greedy { epsilon: 2 } num_arms: 2 }"), &out)
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      svc_.CreateInstance(
              Create("w",
                     "policy { epsilon_greedy {} num_arms: 2 } pending { reward_wait_ms: -5 }"),
              &out)
          .code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(svc_.registry().size(), 1);

  v1::GetInstanceRequest get;
  get.set_name("missing");
  EXPECT_EQ(svc_.GetInstance(get, &out).code(), StatusCode::kNotFound);
  v1::DeleteInstanceRequest del;
  del.set_name("a");
  EXPECT_TRUE(svc_.DeleteInstance(del).ok());
  EXPECT_EQ(svc_.DeleteInstance(del).code(), StatusCode::kNotFound);
}

// A copy taken out of the registry and released (cluster mode: the instance moved) refuses the
// calls still holding it, reads of its events included, and changes nothing.
TEST_F(DecisionServiceTest, AReleasedCopyRefusesTheCallsStillHoldingIt) {
  MakeEps("x");
  const v1::Decision d = Select("x");
  std::shared_ptr<Instance> held = svc_.registry().Take("x");
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(svc_.registry().Take("x"), nullptr);
  EXPECT_EQ(svc_.registry().Get("x").status().code(), absl::StatusCode::kNotFound);
  v1::Instance before;
  held->Describe(&before);
  held->MarkReleased();
  v1::SelectRequest sel;
  sel.set_instance("x");
  v1::Decision out;
  EXPECT_EQ(held->Select(sel, &out, nullptr).code(), absl::StatusCode::kUnavailable);
  v1::UpdateRequest up;
  up.set_instance("x");
  up.set_event_id(d.event_id());
  up.set_reward(1.0);
  v1::UpdateResponse resp;
  EXPECT_EQ(held->Update(up, &resp, nullptr).code(), absl::StatusCode::kUnavailable);
  up.set_event_id("no-such-event");
  EXPECT_EQ(held->Update(up, &resp, nullptr).code(), absl::StatusCode::kUnavailable);
  v1::Instance after;
  held->Describe(&after);
  EXPECT_EQ(after.stats().SerializeAsString(), before.stats().SerializeAsString());
}

TEST_F(DecisionServiceTest, ARewardedEventStaysFinishedInACopyLoadedFromALaterSnapshot) {
  // A retried reward whose first answer was lost (hand-off, crash) reaches a copy loaded from a
  // snapshot taken after the reward: the fate memory is not in the snapshot, but the event was
  // issued by this instance and is not pending, so it is finished, not unknown.
  MakeEps("e");
  const v1::Decision rewarded = Select("e");
  const v1::Decision open = Select("e");
  ASSERT_TRUE(Reward("e", rewarded.event_id(), 1.0).ok());
  v1::ExportInstanceRequest ex;
  ex.set_name("e");
  v1::ExportInstanceResponse exported;
  ASSERT_TRUE(svc_.ExportInstance(ex, &exported).ok());

  ManualClock clock;
  DecisionService copy(&clock);
  v1::ImportInstanceRequest imp;
  imp.set_snapshot(exported.snapshot());
  v1::Instance out;
  ASSERT_TRUE(copy.ImportInstance(imp, &out).ok());
  auto reward = [&](const std::string& id) {
    v1::UpdateRequest req;
    req.set_instance("e");
    req.set_event_id(id);
    req.set_reward(1.0);
    v1::UpdateResponse resp;
    return copy.Update(req, &resp);
  };
  EXPECT_EQ(reward(rewarded.event_id()).code(), StatusCode::kFailedPrecondition);
  // An id this instance never issued (the next number) is still unknown.
  const std::string next = FormatEventId(std::stoull(open.event_id().substr(0, 16), nullptr, 16),
                                         std::stoull(open.event_id().substr(17), nullptr, 16) + 1);
  EXPECT_EQ(reward(next).code(), StatusCode::kNotFound);
  // The still-pending event is joined once in the copy.
  EXPECT_TRUE(reward(open.event_id()).ok());
  EXPECT_EQ(reward(open.event_id()).code(), StatusCode::kFailedPrecondition);
}

TEST_F(DecisionServiceTest, ListPaginatesInNameOrder) {
  for (int i = 24; i >= 0; --i) MakeEps(absl::StrCat("inst-", i < 10 ? "0" : "", i));
  std::vector<std::string> seen;
  std::string token;
  int pages = 0;
  do {
    v1::ListInstancesRequest req;
    req.set_page_size(10);
    req.set_page_token(token);
    v1::ListInstancesResponse resp;
    ASSERT_TRUE(svc_.ListInstances(req, &resp).ok());
    for (const auto& i : resp.instances()) seen.push_back(i.name());
    token = resp.next_page_token();
    ++pages;
  } while (!token.empty());
  EXPECT_EQ(pages, 3);
  ASSERT_EQ(seen.size(), 25u);
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_EQ(seen.front(), "inst-00");
  v1::ListInstancesRequest bad;
  bad.set_page_size(-1);
  v1::ListInstancesResponse resp;
  EXPECT_EQ(svc_.ListInstances(bad, &resp).code(), StatusCode::kInvalidArgument);
}

TEST_F(DecisionServiceTest, RewardIsJoinedOnceAndLateOrUnknownRewardsAreRefused) {
  MakeEps("a");
  const v1::Decision d = Select("a");
  EXPECT_FALSE(d.event_id().empty());
  EXPECT_GT(d.propensity(), 0.0);
  EXPECT_EQ(Stats("a").pending(), 1);
  ASSERT_TRUE(Reward("a", d.event_id(), 1.0).ok());
  EXPECT_EQ(Reward("a", d.event_id(), 1.0).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Reward("a", "no-such-event", 1.0).code(), StatusCode::kNotFound);
  EXPECT_EQ(Reward("missing", d.event_id(), 1.0).code(), StatusCode::kNotFound);
  const auto s = Stats("a");
  EXPECT_EQ(s.rounds(), 1);
  EXPECT_EQ(s.updates(), 1);
  EXPECT_EQ(s.pending(), 0);
  EXPECT_EQ(s.rejected_rewards(), 2);
  EXPECT_DOUBLE_EQ(s.reward_sum(), 1.0);
}

TEST_F(DecisionServiceTest, BadRewardChangesNothingAndTheEventStaysOpen) {
  MakeEps("a");
  const v1::Decision d = Select("a");
  const std::string before = PolicyState("a");
  EXPECT_EQ(Reward("a", d.event_id(), std::nan("")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Reward("a", d.event_id(), INFINITY).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PolicyState("a"), before);
  EXPECT_TRUE(Reward("a", d.event_id(), 0.5).ok());
}

TEST_F(DecisionServiceTest, ExpiredDecisionGetsTheDefaultRewardOnce) {
  MakeEps("a", "pending { reward_wait_ms: 1000 default_reward: 0.25 }");
  const v1::Decision d = Select("a");
  EXPECT_EQ(d.expires_at_ms(), clock_.NowMs() + 1000);
  clock_.Advance(999);
  EXPECT_EQ(svc_.ExpireAll(), 0);
  clock_.Advance(1);
  EXPECT_EQ(Reward("a", d.event_id(), 1.0).code(), StatusCode::kFailedPrecondition);
  const auto s = Stats("a");
  EXPECT_EQ(s.expired(), 1);
  EXPECT_EQ(s.updates(), 1);
  EXPECT_DOUBLE_EQ(s.reward_sum(), 0.25);
  EXPECT_EQ(s.pending(), 0);
}

TEST_F(DecisionServiceTest, DroppedExpiryLearnsNothing) {
  MakeEps("a", "pending { reward_wait_ms: 10 on_expiry: DROP }");
  Select("a");
  Select("a");
  clock_.Advance(10);
  EXPECT_EQ(svc_.ExpireAll(), 2);
  const auto s = Stats("a");
  EXPECT_EQ(s.expired(), 2);
  EXPECT_EQ(s.updates(), 0);
}

TEST_F(DecisionServiceTest, FullPendingTableRefusesWithoutChange) {
  MakeEps("a", "pending { capacity: 2 }");
  Select("a");
  const v1::Decision second = Select("a");
  v1::SelectRequest req;
  req.set_instance("a");
  v1::Decision d;
  EXPECT_EQ(svc_.Select(req, &d).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(Stats("a").rounds(), 2);
  ASSERT_TRUE(Reward("a", second.event_id(), 1.0).ok());
  EXPECT_TRUE(svc_.Select(req, &d).ok());
}

TEST_F(DecisionServiceTest, ContextShapeIsChecked) {
  MakeEps("a");
  v1::SelectRequest req;
  req.set_instance("a");
  req.add_candidates()->add_values(1.0);
  v1::Decision d;
  EXPECT_EQ(svc_.Select(req, &d).code(), StatusCode::kInvalidArgument);
  v1::Instance out;
  ASSERT_TRUE(svc_.CreateInstance(Create("lin", "policy { linucb { dimension: 2 } }"), &out).ok());
  req.set_instance("lin");
  req.clear_candidates();
  EXPECT_EQ(svc_.Select(req, &d).code(), StatusCode::kInvalidArgument);  // no candidates
  auto* c = req.add_candidates();
  c->add_values(0.1);
  c->add_values(NAN);
  auto s = svc_.Select(req, &d);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("candidates[0].values[1]"), std::string::npos) << s.message();
  c->set_values(1, 0.2);
  c = req.add_candidates();
  c->add_values(0.3);  // wrong length
  EXPECT_EQ(svc_.Select(req, &d).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Stats("lin").rounds(), 0);
  c->add_values(0.4);
  ASSERT_TRUE(svc_.Select(req, &d).ok());
  EXPECT_GE(d.arm_index(), 0);
  EXPECT_LE(d.arm_index(), 1);
}

TEST_F(DecisionServiceTest, DirectUpdatesServeLoggedData) {
  MakeEps("a");
  v1::UpdateRequest req;
  req.set_instance("a");
  req.mutable_direct()->set_arm_id("2");
  req.set_reward(3.0);
  v1::UpdateResponse resp;
  ASSERT_TRUE(svc_.Update(req, &resp).ok());
  EXPECT_EQ(resp.updates(), 1);
  req.mutable_direct()->set_arm_id("9");
  EXPECT_EQ(svc_.Update(req, &resp).code(), StatusCode::kNotFound);
  req.clear_direct();
  EXPECT_EQ(svc_.Update(req, &resp).code(), StatusCode::kInvalidArgument);  // no target
  // The logged reward made arm "2" the greedy arm.
  v1::SelectRequest sel;
  sel.set_instance("a");
  sel.set_return_scores(true);
  v1::Decision d;
  ASSERT_TRUE(svc_.Select(sel, &d).ok());
  EXPECT_NEAR(d.scores(2), 0.8 + 0.2 / 3, 1e-12);
}

TEST_F(DecisionServiceTest, ArmChangesAreAllOrNothing) {
  MakeEps("a");
  v1::AddArmsRequest add;
  add.set_name("a");
  add.add_arms()->set_id("new");
  add.add_arms()->set_id("1");  // duplicate: the whole request fails
  v1::Instance out;
  EXPECT_EQ(svc_.AddArms(add, &out).code(), StatusCode::kInvalidArgument);
  v1::GetInstanceRequest get;
  get.set_name("a");
  ASSERT_TRUE(svc_.GetInstance(get, &out).ok());
  EXPECT_EQ(out.arm_ids_size(), 3);
  add.mutable_arms()->RemoveLast();
  ASSERT_TRUE(svc_.AddArms(add, &out).ok());
  EXPECT_EQ(out.arm_ids_size(), 4);
  v1::RemoveArmsRequest rm;
  rm.set_name("a");
  rm.add_arm_ids("0");
  rm.add_arm_ids("zzz");
  EXPECT_EQ(svc_.RemoveArms(rm, &out).code(), StatusCode::kNotFound);
  ASSERT_TRUE(svc_.GetInstance(get, &out).ok());
  EXPECT_EQ(out.arm_ids_size(), 4);
  rm.mutable_arm_ids()->RemoveLast();
  ASSERT_TRUE(svc_.RemoveArms(rm, &out).ok());
  EXPECT_EQ(std::vector<std::string>(out.arm_ids().begin(), out.arm_ids().end()),
            (std::vector<std::string>{"1", "2", "new"}));
  // Reset keeps the current arm set and forgets what was learned.
  v1::ResetInstanceRequest reset;
  reset.set_name("a");
  Select("a");
  ASSERT_TRUE(svc_.ResetInstance(reset, &out).ok());
  EXPECT_EQ(out.arm_ids_size(), 3);
  EXPECT_EQ(out.stats().rounds(), 0);
  EXPECT_EQ(out.stats().pending(), 0);
}

TEST_F(DecisionServiceTest, BatchItemsSucceedOrFailIndependently) {
  MakeEps("a");
  v1::SelectBatchRequest sb;
  sb.add_requests()->set_instance("a");
  sb.add_requests()->set_instance("missing");
  sb.add_requests()->set_instance("a");
  v1::SelectBatchResponse sr;
  ASSERT_TRUE(svc_.SelectBatch(sb, &sr).ok());
  ASSERT_EQ(sr.decisions_size(), 3);
  ASSERT_EQ(sr.statuses_size(), 3);
  EXPECT_EQ(sr.statuses(0).code(), 0);
  EXPECT_EQ(sr.statuses(1).code(), static_cast<int>(StatusCode::kNotFound));
  EXPECT_TRUE(sr.decisions(1).event_id().empty());
  v1::UpdateBatchRequest ub;
  for (int i : {0, 2, 0}) {
    auto* u = ub.add_requests();
    u->set_instance("a");
    u->set_event_id(sr.decisions(i).event_id());
    u->set_reward(1.0);
  }
  v1::UpdateBatchResponse ur;
  ASSERT_TRUE(svc_.UpdateBatch(ub, &ur).ok());
  EXPECT_EQ(ur.statuses(0).code(), 0);
  EXPECT_EQ(ur.statuses(1).code(), 0);
  EXPECT_EQ(ur.statuses(2).code(), static_cast<int>(StatusCode::kFailedPrecondition));
  EXPECT_EQ(Stats("a").updates(), 2);
  v1::SelectBatchRequest huge;
  for (int i = 0; i < 1001; ++i) huge.add_requests()->set_instance("a");
  EXPECT_EQ(svc_.SelectBatch(huge, &sr).code(), StatusCode::kInvalidArgument);
}

TEST_F(DecisionServiceTest, PseudoRegretAccumulatesReportedGaps) {
  MakeEps("a");
  for (double expected : {0.5, 0.75}) {
    const v1::Decision d = Select("a");
    v1::UpdateRequest req;
    req.set_instance("a");
    req.set_event_id(d.event_id());
    req.set_reward(1.0);
    req.set_best_expected_reward(1.0);
    req.set_expected_reward(expected);
    v1::UpdateResponse resp;
    ASSERT_TRUE(svc_.Update(req, &resp).ok());
  }
  EXPECT_DOUBLE_EQ(Stats("a").pseudo_regret(), 0.5 + 0.25);
}

// ---- SetMixtureReference ----

// FD mixture over 3 generators in d = 2, warm start 4 samples per arm.
std::string FdMixture(const std::string& reference) {
  return "policy { mixture { objective: FD num_arms: 3 dimension: 2 warm_start: 4 " + reference +
         " } } seed: 9";
}
constexpr char kRefA[] = "reference_mean: [0, 0] reference_covariance: [1, 0, 0, 1]";
constexpr char kRefB[] = "reference_mean: [1, -1] reference_covariance: [2, 0.5, 0.5, 1]";

// Rounds whose Update carries a deterministic embedding for round i of the chosen generator.
std::vector<std::pair<int, double>> MixtureRounds(DecisionService& svc, const std::string& name,
                                                  int from, int n) {
  return testing::PlayRounds(svc, name, from, n, [](const v1::Decision& d, int i, auto* up) {
    up->set_reward(0);
    up->add_embedding(std::sin(0.7 * i + d.arm_index()) + d.arm_index());
    up->add_embedding(std::cos(1.3 * i) - 0.5 * d.arm_index());
  });
}

v1::Instance Describe(DecisionService& svc, const std::string& name) {
  v1::GetInstanceRequest g;
  g.set_name(name);
  v1::Instance out;
  EXPECT_TRUE(svc.GetInstance(g, &out).ok());
  return out;
}

// During the warm start (round-robin, no EG step) nothing depends on the reference, so an
// instance switched from reference A to B must from then on behave exactly like one created
// with B: same decisions, same weights, same summary.
TEST_F(DecisionServiceTest, SetMixtureReferenceContinuesLikeAnInstanceBornWithIt) {
  v1::Instance out;
  ASSERT_TRUE(svc_.CreateInstance(Create("switched", FdMixture(kRefA)), &out).ok());
  ASSERT_TRUE(svc_.CreateInstance(Create("born_b", FdMixture(kRefB)), &out).ok());
  EXPECT_EQ(MixtureRounds(svc_, "switched", 0, 12), MixtureRounds(svc_, "born_b", 0, 12));

  v1::SetMixtureReferenceRequest set;
  set.set_name("switched");
  for (double v : {1.0, -1.0}) set.add_mean(v);
  for (double v : {2.0, 0.5, 0.5, 1.0}) set.add_covariance(v);
  ASSERT_TRUE(svc_.SetMixtureReference(set, &out).ok());
  EXPECT_EQ(out.config().policy().mixture().reference_mean(1), -1.0);
  EXPECT_EQ(out.stats().updates(), 12);  // learned state kept

  EXPECT_EQ(MixtureRounds(svc_, "switched", 12, 200), MixtureRounds(svc_, "born_b", 12, 200));
  const v1::Instance a = Describe(svc_, "switched"), b = Describe(svc_, "born_b");
  ASSERT_EQ(a.weights_size(), 3);
  for (int i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(a.weights(i), b.weights(i));
  EXPECT_DOUBLE_EQ(a.summary().at("score"), b.summary().at("score"));
}

// Embeddings instead of statistics: FD uses their mean and covariance, exactly as a config
// with the same reference_samples does; `append` accumulates them.
TEST_F(DecisionServiceTest, SetMixtureReferenceFromEmbeddingsInTwoParts) {
  const std::vector<std::array<double, 2>> ref = {{0, 1}, {2, 0}, {1, 1}, {-1, 2}, {0.5, -0.5}};
  std::string samples = "reference_samples: [";
  for (size_t i = 0; i < ref.size(); ++i)
    samples += absl::StrCat(i ? ", " : "", ref[i][0], ", ", ref[i][1]);
  samples += "]";
  v1::Instance out;
  ASSERT_TRUE(svc_.CreateInstance(Create("uploaded", FdMixture(kRefA)), &out).ok());
  ASSERT_TRUE(svc_.CreateInstance(Create("born", FdMixture(samples)), &out).ok());
  for (int part = 0; part < 2; ++part) {
    v1::SetMixtureReferenceRequest set;
    set.set_name("uploaded");
    set.set_append(part == 1);
    for (size_t i = part == 0 ? 0 : 3; i < (part == 0 ? 3 : ref.size()); ++i) {
      auto* e = set.add_embeddings();
      e->add_values(ref[i][0]);
      e->add_values(ref[i][1]);
    }
    ASSERT_TRUE(svc_.SetMixtureReference(set, &out).ok());
  }
  EXPECT_EQ(out.config().policy().mixture().reference_samples_size(), 10);
  EXPECT_EQ(out.config().policy().mixture().reference_mean_size(), 0);
  EXPECT_EQ(MixtureRounds(svc_, "uploaded", 0, 150), MixtureRounds(svc_, "born", 0, 150));
  EXPECT_DOUBLE_EQ(Describe(svc_, "uploaded").summary().at("score"),
                   Describe(svc_, "born").summary().at("score"));
}

TEST_F(DecisionServiceTest, SetMixtureReferenceRefusesBadRequestsWithoutChange) {
  v1::Instance out;
  ASSERT_TRUE(svc_.CreateInstance(Create("fd", FdMixture(kRefA)), &out).ok());
  ASSERT_TRUE(
      svc_.CreateInstance(
              Create("vendi", "policy { mixture { objective: VENDI num_arms: 2 dimension: 2 } }"),
              &out)
          .ok());
  MakeEps("eps");
  MixtureRounds(svc_, "fd", 0, 20);
  v1::ExportInstanceRequest ex;
  ex.set_name("fd");
  v1::ExportInstanceResponse before, after;
  ASSERT_TRUE(svc_.ExportInstance(ex, &before).ok());

  auto code = [&](const std::string& name, auto fill) {
    v1::SetMixtureReferenceRequest r;
    r.set_name(name);
    fill(r);
    return svc_.SetMixtureReference(r, &out).code();
  };
  auto stats = [](v1::SetMixtureReferenceRequest& r) {
    r.add_mean(0);
    r.add_mean(0);
    for (double v : {1.0, 0.0, 0.0, 1.0}) r.add_covariance(v);
  };
  auto embedding = [](v1::SetMixtureReferenceRequest& r) {
    auto* e = r.add_embeddings();
    e->add_values(1);
    e->add_values(2);
  };
  EXPECT_EQ(code("nosuch", stats), StatusCode::kNotFound);
  EXPECT_EQ(code("eps", stats), StatusCode::kFailedPrecondition);
  EXPECT_EQ(code("vendi", embedding), StatusCode::kFailedPrecondition);
  EXPECT_EQ(code("fd", [](auto&) {}), StatusCode::kInvalidArgument);  // neither
  EXPECT_EQ(code("fd",
                 [&](auto& r) {
                   stats(r);
                   embedding(r);
                 }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code("fd",
                 [&](auto& r) {
                   stats(r);
                   r.set_append(true);
                 }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code("fd", [](auto& r) { r.add_embeddings()->add_values(1); }),  // d = 1, not 2
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code("fd",
                 [](auto& r) {
                   auto* e = r.add_embeddings();
                   e->add_values(1);
                   e->add_values(std::nan(""));
                 }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code("fd",
                 [](auto& r) {  // not positive semi-definite
                   r.add_mean(0);
                   r.add_mean(0);
                   for (double v : {1.0, 3.0, 3.0, 1.0}) r.add_covariance(v);
                 }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code("fd",
                 [](auto& r) {  // mean of the wrong length
                   r.add_mean(0);
                   for (double v : {1.0, 0.0, 0.0, 1.0}) r.add_covariance(v);
                 }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code("fd",
                 [](auto& r) {  // not symmetric
                   r.add_mean(0);
                   r.add_mean(0);
                   for (double v : {1.0, 0.2, 0.0, 1.0}) r.add_covariance(v);
                 }),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(svc_.ExportInstance(ex, &after).ok());
  EXPECT_EQ(after.snapshot(), before.snapshot());
}

// ImportInstance with `replace`: the name's instance becomes the imported one in one step. A
// refused import (a snapshot that does not decode, more shadows than allowed, a policy that
// does not build) leaves the existing instance byte for byte as it was; without `replace` a
// taken name is ALREADY_EXISTS as before; a call still holding the replaced copy is refused.
TEST_F(DecisionServiceTest, ImportWithReplaceSwapsTheInstanceOrLeavesItAsItWas) {
  MakeEps("source");
  MakeEps("target");
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(Reward("source", Select("source").event_id(), 1).ok());
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(Reward("target", Select("target").event_id(), 0).ok());
  const v1::Decision open = Select("target");  // a pending decision of the old instance
  auto export_of = [&](const std::string& name) {
    v1::ExportInstanceRequest ex;
    ex.set_name(name);
    v1::ExportInstanceResponse resp;
    EXPECT_TRUE(svc_.ExportInstance(ex, &resp).ok());
    return resp.snapshot();
  };
  const std::string model = export_of("source");
  const std::string before = export_of("target");
  std::shared_ptr<Instance> old = *svc_.registry().Get("target");

  v1::ImportInstanceRequest im;
  im.set_name("target");
  im.set_snapshot(model);
  v1::Instance out;
  EXPECT_EQ(svc_.ImportInstance(im, &out).code(), StatusCode::kAlreadyExists);
  im.set_replace(true);
  im.set_snapshot("not a snapshot");
  EXPECT_EQ(svc_.ImportInstance(im, &out).code(), StatusCode::kInvalidArgument);
  im.set_snapshot(model.substr(0, model.size() - 3));
  EXPECT_EQ(svc_.ImportInstance(im, &out).code(), StatusCode::kInvalidArgument);
  // A snapshot that decodes but whose policy does not build (an epsilon out of range).
  v1::InstanceSnapshot bad;
  ASSERT_TRUE(SnapshotStore::Decode(model).ok());
  bad = *SnapshotStore::Decode(model);
  bad.mutable_config()->mutable_policy()->mutable_epsilon_greedy()->set_epsilon(3);
  im.set_snapshot(SnapshotStore::Encode(bad));
  EXPECT_EQ(svc_.ImportInstance(im, &out).code(), StatusCode::kInvalidArgument);
  // A VW model file that is not one.
  im.clear_snapshot();
  im.set_vw_model("VW model? no");
  EXPECT_EQ(svc_.ImportInstance(im, &out).code(), StatusCode::kInvalidArgument);
  im.clear_vw_model();
  EXPECT_EQ(export_of("target"), before);
  EXPECT_EQ(*svc_.registry().Get("target"), old);  // the same instance, not a copy

  im.set_snapshot(model);
  ASSERT_TRUE(svc_.ImportInstance(im, &out).ok());
  EXPECT_EQ(out.stats().updates(), 30);
  EXPECT_EQ(Stats("target").updates(), 30);
  EXPECT_EQ(svc_.registry().size(), 2);
  // The old copy's pending decision went with it: its reward is unknown to the new instance,
  // and a call still holding the old copy is refused, changing nothing.
  EXPECT_EQ(Reward("target", open.event_id(), 1).code(), StatusCode::kNotFound);
  v1::UpdateRequest up;
  up.set_instance("target");
  up.set_event_id(open.event_id());
  up.set_reward(1);
  v1::UpdateResponse resp;
  EXPECT_EQ(old->Update(up, &resp).code(), StatusCode::kUnavailable);
  EXPECT_EQ(Stats("target").updates(), 30);
  // With `replace` and a free name, an import creates it.
  im.set_name("fresh");
  ASSERT_TRUE(svc_.ImportInstance(im, &out).ok());
  EXPECT_EQ(Stats("fresh").updates(), 30);
}

}  // namespace
}  // namespace bandit::server
