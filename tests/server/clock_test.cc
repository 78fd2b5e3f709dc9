// The time seam: ManualClock's timers tick exactly when the clock is moved past their due time
// (fixed delay, once per Advance, never after cancellation); SystemClock's timers tick on their
// own thread and stop when destroyed; the snapshot interval runs on the injected clock.
#include "server/env/clock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "server/service/decision_service.h"
#include "server/service/persistence.h"
#include "tests/server/fault_injection_fs.h"
#include "tests/server/server_test_util.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

TEST(ManualClock, TimersTickWhenTheClockPassesTheirDueTime) {
  ManualClock clock(1000);
  std::vector<int64_t> ticks;
  auto timer = clock.Every(100, [&] { ticks.push_back(clock.NowMs()); });
  clock.Advance(99);
  EXPECT_TRUE(ticks.empty());
  clock.Advance(1);
  EXPECT_EQ(ticks, std::vector<int64_t>({1100}));
  clock.Advance(100);
  EXPECT_EQ(ticks, std::vector<int64_t>({1100, 1200}));
  // A late timer ticks once, then is due a full period after that tick (fixed delay).
  clock.Advance(1000);
  EXPECT_EQ(ticks, std::vector<int64_t>({1100, 1200, 2200}));
  clock.Advance(99);
  EXPECT_EQ(ticks.size(), 3u);
  clock.Advance(1);
  EXPECT_EQ(ticks.back(), 2300);
}

TEST(ManualClock, TimersTickInDueOrderAndStopWhenDestroyed) {
  ManualClock clock(0);
  std::vector<char> order;
  auto slow = clock.Every(30, [&] { order.push_back('s'); });
  auto fast = clock.Every(20, [&] { order.push_back('f'); });
  clock.Advance(30);  // fast was due at 20, slow at 30
  EXPECT_EQ(order, std::vector<char>({'f', 's'}));
  fast.reset();
  clock.Advance(100);
  EXPECT_EQ(order, std::vector<char>({'f', 's', 's'}));
  slow.reset();
  clock.Advance(1000);
  EXPECT_EQ(order.size(), 3u);
}

TEST(ManualClock, CancellingWaitsForARunningTick) {
  ManualClock clock(0);
  absl::Notification in_tick, release;
  std::atomic<bool> tick_finished{false};
  auto timer = clock.Every(10, [&] {
    in_tick.Notify();
    release.WaitForNotification();
    tick_finished = true;
  });
  std::thread advancer([&] { clock.Advance(10); });
  in_tick.WaitForNotification();
  std::thread canceller([&] {
    timer.reset();
    // The tick had finished before the timer was gone.
    EXPECT_TRUE(tick_finished.load());
  });
  release.Notify();
  canceller.join();
  advancer.join();
}

TEST(SystemClock, TimersTickOnTheirOwnThreadUntilDestroyed) {
  std::atomic<int> ticks{0};
  absl::Notification three;
  auto timer = SystemClock::Get()->Every(1, [&] {
    if (++ticks == 3) three.Notify();
  });
  three.WaitForNotification();
  timer.reset();  // joins the timer's thread; a hang here is the failure
  EXPECT_GE(ticks.load(), 3);
}

// The snapshot interval is a timer of the injected clock: moving a manual clock past it runs
// one full round (the instance's snapshot is written) before Advance returns.
TEST(Persistence, SnapshotIntervalRunsOnTheInjectedClock) {
  FaultInjectionFs fs;
  ManualClock clock;
  DecisionService svc(&clock);
  PersistenceOptions o;
  o.fs = &fs;
  o.data_dir = "/data";
  o.clock = &clock;
  o.snapshot_every_changes = 1'000'000;
  o.snapshot_interval_ms = 60'000;
  auto p = Persistence::Open(o, &svc);
  ASSERT_TRUE(p.ok()) << p.status();
  v1::Instance out;
  ASSERT_TRUE(
      svc.CreateInstance(
             testing::Create("x", "policy { epsilon_greedy { epsilon: 0.3 } num_arms: 4 }"), &out)
          .ok());
  (*p)->StartBackground();
  clock.Advance(59'999);
  EXPECT_TRUE((*p)->LastSnapshotTimes().empty());
  clock.Advance(1);
  const auto times = (*p)->LastSnapshotTimes();
  ASSERT_EQ(times.size(), 1u);
  EXPECT_EQ(times[0].first, "x");
  EXPECT_EQ(times[0].second, clock.NowMs());
  ASSERT_TRUE((*p)->Close().ok());
}

}  // namespace
}  // namespace bandit::server
