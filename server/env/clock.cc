#include "server/env/clock.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

namespace bandit::server {

int64_t SystemClock::NowMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

SystemClock* SystemClock::Get() {
  static SystemClock clock;
  return &clock;
}

namespace {

// One thread per timer, waiting on the steady clock (a wall-clock step must not fire or stall
// a timer).
class ThreadTimer final : public Timer {
 public:
  ThreadTimer(int64_t period_ms, std::function<void()> tick)
      : period_(period_ms), tick_(std::move(tick)), thread_([this] { Run(); }) {}

  ~ThreadTimer() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      const auto due = std::chrono::steady_clock::now() + period_;
      if (cv_.wait_until(lock, due, [&] { return stop_; })) return;
      lock.unlock();
      tick_();
      lock.lock();
    }
  }

  const std::chrono::milliseconds period_;
  const std::function<void()> tick_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;   // guarded by mu_
  std::thread thread_;  // last: starts after the fields it reads
};

}  // namespace

std::unique_ptr<Timer> SystemClock::Every(int64_t period_ms, std::function<void()> tick) const {
  return std::make_unique<ThreadTimer>(std::max<int64_t>(period_ms, 1), std::move(tick));
}

class ManualClock::ManualTimer final : public Timer {
 public:
  explicit ManualTimer(const ManualClock* clock) : clock_(clock) {}
  ~ManualTimer() override { clock_->Cancel(this); }

 private:
  const ManualClock* const clock_;
};

ManualClock::~ManualClock() = default;

std::unique_ptr<Timer> ManualClock::Every(int64_t period_ms, std::function<void()> tick) const {
  auto timer = std::make_unique<ManualTimer>(this);
  std::lock_guard<std::mutex> lock(mu_);
  period_ms = std::max<int64_t>(period_ms, 1);
  timers_.push_back({timer.get(), period_ms, now_.load() + period_ms, std::move(tick)});
  return timer;
}

void ManualClock::Cancel(ManualTimer* timer) const {
  std::unique_lock<std::mutex> lock(mu_);
  tick_done_.wait(lock, [&] { return running_ != timer; });
  std::erase_if(timers_, [&](const Entry& e) { return e.timer == timer; });
}

void ManualClock::Advance(int64_t ms) {
  std::lock_guard<std::mutex> advancing(advance_mu_);
  const int64_t now = now_ += ms;
  std::vector<ManualTimer*> fired;  // each due timer ticks once per Advance
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    // The earliest due timer that has not ticked yet (timers may be added or cancelled by
    // other threads while a tick runs, so look again each time).
    Entry* next = nullptr;
    for (Entry& e : timers_) {
      if (e.due_ms > now || std::find(fired.begin(), fired.end(), e.timer) != fired.end()) continue;
      if (next == nullptr || e.due_ms < next->due_ms) next = &e;
    }
    if (next == nullptr) return;
    ManualTimer* timer = next->timer;
    fired.push_back(timer);
    next->due_ms = now + next->period_ms;
    std::function<void()> tick = next->tick;
    running_ = timer;
    lock.unlock();
    tick();
    lock.lock();
    running_ = nullptr;
    tick_done_.notify_all();
  }
}

UidSource* RandomUids() {
  class Random final : public UidSource {
   public:
    uint64_t NewUid() override {
      uint64_t uid = 0;
      while (uid == 0)
        uid = std::random_device{}() ^ (static_cast<uint64_t>(std::random_device{}()) << 32);
      return uid;
    }
  };
  static Random* uids = new Random();
  return uids;
}

}  // namespace bandit::server
