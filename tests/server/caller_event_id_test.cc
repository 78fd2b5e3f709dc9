// Caller-chosen event ids (SelectRequest.event_id, Personalizer's eventId): the decision carries
// the id, its reward joins on it, a taken or malformed id is refused with nothing changed, and
// every journal form of a Select (the request, the decision log entry, the decided outcome)
// replays it exactly after a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/service/decision_service.h"
#include "tests/server/file_node.h"
#include "tests/server/server_test_util.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

using absl::StatusCode;
using ::testing::HasSubstr;
using testing::Create;
using testing::Exported;
namespace v1 = bandit::v1;

// Two candidates whose features depend on the round.
v1::SelectRequest Request(const std::string& instance, int round, const std::string& event_id) {
  v1::SelectRequest req;
  req.set_instance(instance);
  req.set_event_id(event_id);
  for (int a = 0; a < 2; ++a) {
    auto* c = req.add_candidates();
    c->add_values(0.5);
    c->add_values(((round + a) % 3) * 0.25);  // norms below 1, as the GLM policies require
  }
  return req;
}

TEST(CallerEventId, TheDecisionCarriesItAndItsRewardJoinsOnIt) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("x", "policy { linucb { dimension: 2 } } "
                                             "decision_log { enabled: true }"),
                                 &out)
                  .ok());
  v1::Decision d;
  ASSERT_TRUE(svc.Select(Request("x", 0, "order-17.a:b~c_d"), &d).ok());
  EXPECT_EQ(d.event_id(), "order-17.a:b~c_d");
  v1::Decision server_made;
  ASSERT_TRUE(svc.Select(Request("x", 1, ""), &server_made).ok());
  EXPECT_NE(server_made.event_id(), "");
  v1::UpdateRequest up;
  up.set_instance("x");
  up.set_event_id("order-17.a:b~c_d");
  up.set_reward(0.75);
  v1::UpdateResponse r;
  ASSERT_TRUE(svc.Update(up, &r).ok());
  EXPECT_EQ(svc.Update(up, &r).code(), StatusCode::kFailedPrecondition);  // rewarded once

  // The decision log has it under its id, with its reward, in decision order.
  const std::vector<v1::LoggedDecision> logged = testing::LoggedDecisions(svc, "x");
  ASSERT_EQ(logged.size(), 2u);
  EXPECT_EQ(logged[0].event_id(), "order-17.a:b~c_d");
  EXPECT_EQ(logged[0].outcome(), v1::OUTCOME_REWARDED);
  EXPECT_EQ(logged[0].reward(), 0.75);
  EXPECT_EQ(logged[1].event_id(), server_made.event_id());
  EXPECT_LT(logged[0].event_seq(), logged[1].event_seq());

  // A finished decision's id names no new decision while the instance remembers it (the log's
  // join would be ambiguous), and nothing changes.
  const std::string before = Exported(svc, "x");
  const absl::Status reused = svc.Select(Request("x", 2, "order-17.a:b~c_d"), &d);
  EXPECT_EQ(reused.code(), StatusCode::kAlreadyExists) << reused;
  EXPECT_THAT(std::string(reused.message()), HasSubstr("finished"));
  EXPECT_EQ(Exported(svc, "x"), before);
  // An expired one's too.
  ASSERT_TRUE(svc.Select(Request("x", 3, "will-expire"), &d).ok());
  clock.Advance(24LL * 3600 * 1000);
  ASSERT_TRUE(svc.Select(Request("x", 4, "after-expiry"), &d).ok());  // expiry runs
  EXPECT_EQ(svc.Select(Request("x", 5, "will-expire"), &d).code(), StatusCode::kAlreadyExists);
}

TEST(CallerEventId, ATakenOrMalformedIdIsRefusedAndChangesNothing) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("x", "policy { linucb { dimension: 2 } } "
                                             "decision_log { enabled: true }"),
                                 &out)
                  .ok());
  v1::Decision d;
  ASSERT_TRUE(svc.Select(Request("x", 0, "page-1"), &d).ok());
  const std::string before = Exported(svc, "x");

  struct Case {
    std::string id;
    StatusCode code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"page-1", StatusCode::kAlreadyExists, "still waiting for its reward"},
      {std::string(257, 'a'), StatusCode::kInvalidArgument, "at most 256"},
      {"has space", StatusCode::kInvalidArgument, "position 3"},
      {"slash/x", StatusCode::kInvalidArgument, "letters, digits and . _ : ~ -"},
      {"caf\xc3\xa9", StatusCode::kInvalidArgument, "position 3"},
      // The server's own form: it could collide with an id the server makes.
      {"00000000000000ab-1f", StatusCode::kInvalidArgument, "server-made"},
  };
  for (const Case& c : cases) {
    const absl::Status s = svc.Select(Request("x", 1, c.id), &d);
    EXPECT_EQ(s.code(), c.code) << c.id << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.says)) << c.id;
    EXPECT_EQ(Exported(svc, "x"), before) << c.id;
  }
  // 256 characters is the limit, not past it; a batch refuses its second use of an id.
  ASSERT_TRUE(svc.Select(Request("x", 1, std::string(256, 'z')), &d).ok());
  v1::SelectBatchRequest batch;
  *batch.add_requests() = Request("x", 2, "twice");
  *batch.add_requests() = Request("x", 3, "twice");
  v1::SelectBatchResponse resp;
  ASSERT_TRUE(svc.SelectBatch(batch, &resp).ok());
  ASSERT_EQ(resp.statuses_size(), 2);
  EXPECT_EQ(resp.statuses(0).code(), 0);
  EXPECT_EQ(resp.statuses(1).code(), static_cast<int>(StatusCode::kAlreadyExists));
}

// Each config journals its Selects differently: a read-only policy by outcome (decided), with
// the decision log by its log entry (logged_select), a policy that draws by request (select).
class CallerEventIdReplay : public ::testing::TestWithParam<const char*> {};

TEST_P(CallerEventIdReplay, ReplaysExactlyAfterACrash) {
  // Every third round names its own event; each reward comes a round after its decision.
  // Returns the caller-chosen id (server-made ids differ between the two: each has its own
  // uid) and the arm.
  const bool arm_set = std::string(GetParam()).find("num_arms") != std::string::npos;
  auto play = [&](DecisionService& svc, ManualClock&, int round,
                  std::vector<std::string>* unrewarded) {
    v1::SelectRequest req = arm_set ? v1::SelectRequest() : Request("x", round, "");
    req.set_instance("x");
    if (round % 3 == 0) req.set_event_id(absl::StrCat("user-", round));
    v1::Decision d;
    EXPECT_TRUE(svc.Select(req, &d).ok());
    for (const std::string& id : *unrewarded) {
      v1::UpdateRequest up;
      up.set_instance("x");
      up.set_event_id(id);
      up.set_reward((round % 2) * 1.0);
      v1::UpdateResponse r;
      EXPECT_TRUE(svc.Update(up, &r).ok()) << id;
    }
    unrewarded->clear();
    unrewarded->push_back(d.event_id());
    return std::make_pair(req.event_id().empty() ? std::string() : d.event_id(), d.arm_index());
  };
  // Round 59's decision is still pending: its reward, sent after the restart, joins.
  testing::ReplaysAsATwinAfterACrash<std::vector<std::string>>(
      GetParam(), 60, play, [](DecisionService&, DecisionService&) {});
}

INSTANTIATE_TEST_SUITE_P(
    JournalForms, CallerEventIdReplay,
    ::testing::Values(
        "policy { linucb { dimension: 2 } } seed: 3",
        "policy { linucb { dimension: 2 } } decision_log { enabled: true } seed: 3",
        "policy { glm_epsilon_greedy { dimension: 2 link: GAUSSIAN epsilon: 0.3 } } seed: 3",
        "policy { thompson { } num_arms: 3 } decision_log { enabled: true } seed: 3"));

}  // namespace
}  // namespace bandit::server
