// Time seam: logic under test never reads the wall clock directly.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace bandit::server {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch.
  virtual int64_t NowMs() const = 0;
};

class SystemClock final : public Clock {
 public:
  int64_t NowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  static SystemClock* Get() {
    static SystemClock clock;
    return &clock;
  }
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

// A clock tests move by hand.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_ms = 1'700'000'000'000) : now_(start_ms) {}
  int64_t NowMs() const override { return now_.load(); }
  void Advance(int64_t ms) { now_ += ms; }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace bandit::server
