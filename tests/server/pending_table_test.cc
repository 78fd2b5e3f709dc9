// PendingTable against a plain reference model (a vector scanned linearly): the same decisions
// come out, in expiry order, whatever mix of inserts, rewards and expiries; the memory of
// finished events is bounded and answers with the right fate.
#include "server/instance/pending_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/rng.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

// Ids of both kinds the table keys differently: an instance's (FormatEventId) and any other.
PendingDecision Decision(int i, int64_t expires) {
  PendingDecision d;
  d.event_id = i % 2 == 0 ? FormatEventId(0x5eed, i + 1) : "e" + std::to_string(i);
  d.arm = i % 3;
  d.arm_id = "arm" + std::to_string(i % 3);
  d.features = Eigen::VectorXd::Constant(2, i);
  d.expires_at_ms = expires;
  return d;
}

TEST(PendingTable, MatchesALinearScanModelUnderRandomOperations) {
  PendingTable table(50);
  std::vector<PendingDecision> model;  // insertion order = expiry order
  Rng rng(11);
  int64_t now = 0;
  int next = 0;
  for (int step = 0; step < 20000; ++step) {
    const uint64_t op = rng.UniformInt(10);
    if (op < 5) {
      if (table.full()) {
        ASSERT_EQ(static_cast<int64_t>(model.size()), table.capacity());
        continue;
      }
      PendingDecision d = Decision(next++, now + 100);
      model.push_back(d);
      table.Insert(std::move(d));
    } else if (op < 8 && !model.empty()) {
      const size_t k = rng.UniformInt(model.size());
      const std::string id = model[k].event_id;
      auto taken = table.Take(id, EventFate::kRewarded);
      ASSERT_TRUE(taken.has_value()) << id;
      EXPECT_EQ(taken->arm_id, model[k].arm_id);
      model.erase(model.begin() + k);
      EXPECT_EQ(table.Find(id), nullptr);
      EXPECT_EQ(table.FateOf(id), EventFate::kRewarded);
      EXPECT_FALSE(table.Take(id, EventFate::kRewarded).has_value());  // once only
    } else {
      now += static_cast<int64_t>(rng.UniformInt(40));
      auto expired = table.TakeExpired(now);
      std::vector<std::string> want;
      while (!model.empty() && model.front().expires_at_ms <= now) {
        want.push_back(model.front().event_id);
        model.erase(model.begin());
      }
      std::vector<std::string> got;
      for (const auto& d : expired) got.push_back(d.event_id);
      ASSERT_EQ(got, want) << "at " << now;
    }
    ASSERT_EQ(table.size(), static_cast<int64_t>(model.size()));
    const auto in_order = table.InOrder();
    ASSERT_EQ(in_order.size(), model.size());
    for (size_t i = 0; i < model.size(); ++i) ASSERT_EQ(in_order[i]->event_id, model[i].event_id);
  }
}

TEST(PendingTable, FinishedEventsAreRememberedUpToABound) {
  PendingTable table(10);  // fate memory: max(capacity, 1024) events
  for (int i = 0; i < 3000; ++i) table.RecordFate("f" + std::to_string(i), EventFate::kExpired);
  EXPECT_EQ(table.FateOf("f2999"), EventFate::kExpired);
  EXPECT_EQ(table.FateOf("f1976"), EventFate::kExpired);  // the newest 1024 are kept
  EXPECT_EQ(table.FateOf("f1975"), EventFate::kUnknown);  // older ones are forgotten
  EXPECT_EQ(table.FateOf("never"), EventFate::kUnknown);
  table.Clear();
  EXPECT_EQ(table.FateOf("f2999"), EventFate::kUnknown);
}

TEST(PendingTable, EventIdsFormatLikePrintfAndParseBackExactly) {
  Rng rng(5);
  std::vector<std::pair<uint64_t, uint64_t>> cases = {
      {0, 0}, {1, 1}, {0xffffffffffffffffULL, 0xffffffffffffffffULL}, {0x10, 0x10}, {7, 0xf}};
  for (int i = 0; i < 2000; ++i) {
    const uint64_t uid = rng.NextU64();
    const uint64_t seq = rng.NextU64() >> (rng.NextU64() % 64);  // short and long sequences
    cases.emplace_back(uid, seq);
  }
  for (const auto& [uid, seq] : cases) {
    const std::string id = FormatEventId(uid, seq);
    ASSERT_EQ(id, absl::StrFormat("%016x-%x", uid, seq));
    uint64_t u = 1, q = 1;
    ASSERT_TRUE(ParseEventId(id, &u, &q)) << id;
    EXPECT_EQ(u, uid);
    EXPECT_EQ(q, seq);
  }
  // Anything FormatEventId does not write is not parsed (so each (uid, seq) has one text).
  for (const char* id : {"", "e1", "0000000000000001-", "0000000000000001-01",
                         "0000000000000001-A", "000000000000000A-1", "000000000000001-1",
                         "0000000000000001_1", "0000000000000001-1 ", "0000000000000001-10000000000000000",
                         "00000000000000011-1", "0000000000000001-g"}) {
    uint64_t u, q;
    EXPECT_FALSE(ParseEventId(id, &u, &q)) << id;
  }
}

TEST(PendingTable, FateMemoryForgetsOldestFirstAcrossBothKindsOfIds) {
  PendingTable table(10);  // fate memory: 1024 events
  // Alternating instance-style ids and other text, plus an id that differs from an
  // instance-style one only by a leading zero (a different event).
  for (int i = 0; i < 3000; ++i) {
    const std::string id = i % 2 == 0 ? FormatEventId(42, i) : "other-" + std::to_string(i);
    table.RecordFate(id, i % 3 == 0 ? EventFate::kRewarded : EventFate::kExpired);
  }
  table.RecordFate("", EventFate::kDropped);  // an empty id is text, not (0, 0)
  table.RecordFate(FormatEventId(42, 2998), EventFate::kRewarded);  // known: not re-added
  EXPECT_EQ(table.FateOf(FormatEventId(42, 2998)), EventFate::kRewarded);
  EXPECT_EQ(table.FateOf(""), EventFate::kDropped);
  EXPECT_EQ(table.FateOf(FormatEventId(0, 0)), EventFate::kUnknown);
  // 3001 recorded, the newest 1024 kept: events 1977..2999 and "".
  EXPECT_EQ(table.FateOf("other-1977"), EventFate::kRewarded);  // 1977 % 3 == 0
  EXPECT_EQ(table.FateOf(FormatEventId(42, 1978)), EventFate::kExpired);
  EXPECT_EQ(table.FateOf(FormatEventId(42, 1980)), EventFate::kRewarded);  // 1980 % 3 == 0
  EXPECT_EQ(table.FateOf(FormatEventId(42, 1976)), EventFate::kUnknown);
  EXPECT_EQ(table.FateOf("other-1975"), EventFate::kUnknown);
  EXPECT_EQ(table.FateOf("000000000000002a-07c8"), EventFate::kUnknown);  // 0x7c8 = 1992
  EXPECT_EQ(table.FateOf("000000000000002a-7c8"), EventFate::kRewarded);
  EXPECT_EQ(table.FateOf(FormatEventId(43, 2998)), EventFate::kUnknown);  // another instance
}

TEST(PendingTable, RecordRoundTripKeepsEveryField) {
  PendingDecision d = Decision(7, 12345);
  d.memo = Eigen::VectorXd::LinSpaced(3, 0.5, 1.5);
  bandit::v1::PendingDecisionRecord r;
  ToRecord(d, &r);
  const PendingDecision back = FromRecord(r);
  EXPECT_EQ(back.event_id, d.event_id);
  EXPECT_EQ(back.arm, d.arm);
  EXPECT_EQ(back.arm_id, d.arm_id);
  EXPECT_EQ(back.features, d.features);
  EXPECT_EQ(back.memo, d.memo);
  EXPECT_EQ(back.expires_at_ms, d.expires_at_ms);
}

}  // namespace
}  // namespace bandit::server
