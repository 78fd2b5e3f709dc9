// Time seam (the time half of LevelDB's Env; files are server/env/file_system.h): logic
// under test never reads the wall clock or sleeps on it directly. A Clock tells the time and
// runs periodic timers; tests use a ManualClock, whose timers fire on the thread that advances
// it, so a test that moves time by hand knows the timer's work is done when Advance returns.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace bandit::server {

// A periodic timer; destroying it cancels it and waits for a tick that is running (so the
// owner may destroy what the tick uses right after). Never destroy a timer from its own tick.
class Timer {
 public:
  virtual ~Timer() = default;
};

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch.
  virtual int64_t NowMs() const = 0;
  // Calls `tick` every `period_ms` (> 0) milliseconds of this clock until the returned timer is
  // destroyed. Fixed delay: the next tick is due `period_ms` after the previous one ran, and a
  // late timer ticks once, not once per missed period. Ticks of one timer never overlap.
  virtual std::unique_ptr<Timer> Every(int64_t period_ms, std::function<void()> tick) const = 0;
};

class SystemClock final : public Clock {
 public:
  int64_t NowMs() const override;
  // Each timer waits on the steady clock on a thread of its own.
  std::unique_ptr<Timer> Every(int64_t period_ms, std::function<void()> tick) const override;
  static SystemClock* Get();
};

// A clock tests move by hand. Its timers tick only inside Advance, on the calling thread, in
// due order; a tick may block (e.g. wait for an fsync) but must not advance the clock itself.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_ms = 1'700'000'000'000) : now_(start_ms) {}
  ~ManualClock() override;
  int64_t NowMs() const override { return now_.load(); }
  std::unique_ptr<Timer> Every(int64_t period_ms, std::function<void()> tick) const override;
  // Moves the time forward by `ms`, then runs every timer that fell due (each once).
  void Advance(int64_t ms);

 private:
  class ManualTimer;
  struct Entry {
    ManualTimer* timer;
    int64_t period_ms;
    int64_t due_ms;
    std::function<void()> tick;
  };
  void Cancel(ManualTimer* timer) const;

  std::atomic<int64_t> now_;
  std::mutex advance_mu_;  // one Advance at a time: ticks never overlap
  mutable std::mutex mu_;
  mutable std::condition_variable tick_done_;
  mutable std::vector<Entry> timers_;       // guarded by mu_
  mutable ManualTimer* running_ = nullptr;  // guarded by mu_: the timer whose tick is running
};

// Where new instances get their uid (the event-id prefix that keeps event ids unique across
// instances and restarts). Random in production; tests inject a sequence.
class UidSource {
 public:
  virtual ~UidSource() = default;
  virtual uint64_t NewUid() = 0;  // never 0
};

// 64 bits from std::random_device.
UidSource* RandomUids();

// 1, 2, 3, ...: deterministic event ids for tests.
class SequentialUids final : public UidSource {
 public:
  uint64_t NewUid() override { return ++last_; }

 private:
  std::atomic<uint64_t> last_{0};
};

}  // namespace bandit::server
