// PendingTable against a plain reference model (a vector scanned linearly): the same decisions
// come out, in expiry order, whatever mix of inserts, rewards and expiries; the memory of
// finished events is bounded and answers with the right fate.
#include "server/pending_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/rng.h"

namespace bandit::server {
namespace {

PendingDecision Decision(int i, int64_t expires) {
  PendingDecision d;
  d.event_id = "e" + std::to_string(i);
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
