// Regression tests for what fuzzing found (fuzz/, docs/security.md "Hardening").
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include "server/service/decision_service.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

namespace v1 = bandit::v1;

// snapshot_fuzz: an instance imported from a server whose clock was ahead holds pending
// decisions that expire later than the ones it makes next; its own snapshot used to be refused
// ("pending decisions are not in expiry order"), so export/import and recovery lost it.
TEST(FuzzRegressions, SnapshotWithPendingOutOfExpiryOrderRestores) {
  ManualClock ahead(1'700'000'000'000 + 3'600'000);
  ManualClock behind(1'700'000'000'000);
  DecisionService a(&ahead), b(&behind), c(&behind);
  v1::CreateInstanceRequest cr;
  cr.set_name("x");
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString("policy { ucb1 {} num_arms: 2 }",
                                                            cr.mutable_config()));
  v1::Instance out;
  ASSERT_TRUE(a.CreateInstance(cr, &out).ok());
  v1::SelectRequest sel;
  sel.set_instance("x");
  v1::Decision d;
  ASSERT_TRUE(a.Select(sel, &d).ok());
  v1::ExportInstanceRequest ex;
  ex.set_name("x");
  v1::ExportInstanceResponse snap;
  ASSERT_TRUE(a.ExportInstance(ex, &snap).ok());
  v1::ImportInstanceRequest im;
  im.set_snapshot(snap.snapshot());
  ASSERT_TRUE(b.ImportInstance(im, &out).ok());
  v1::Decision later;
  ASSERT_TRUE(b.Select(sel, &later).ok());
  EXPECT_LT(later.expires_at_ms(), d.expires_at_ms());  // the out-of-order situation
  ASSERT_TRUE(b.ExportInstance(ex, &snap).ok());
  im.set_snapshot(snap.snapshot());
  ASSERT_TRUE(c.ImportInstance(im, &out).ok());
  EXPECT_EQ(out.stats().pending(), 2);
  // Both decisions are still rewardable on the restored copy.
  for (const std::string& ev : {d.event_id(), later.event_id()}) {
    v1::UpdateRequest up;
    up.set_instance("x");
    up.set_event_id(ev);
    up.set_reward(1);
    v1::UpdateResponse ur;
    EXPECT_TRUE(c.Update(up, &ur).ok()) << ev;
  }
}

}  // namespace
}  // namespace bandit::server
