// Persistence metrics: snapshot and fsync durations, storage errors, snapshot age per instance.
#pragma once

#include <functional>
#include <memory>

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace bandit::server {

class Persistence;
class Clock;

class StorageMetrics {
 public:
  explicit StorageMetrics(prometheus::Registry& registry);
  void ObserveSnapshot(double seconds) { snapshot_->Observe(seconds); }
  void ObserveFsync(double seconds) { fsync_->Observe(seconds); }
  void CountError() { errors_->Increment(); }
  // Instances found behind in PostgreSQL at a reconnect (refused, DATA_LOSS).
  void CountDiverged(int64_t instances) { diverged_->Increment(static_cast<double>(instances)); }
  // Scrape-time gauge bandit_last_snapshot_age_seconds{instance}.
  static std::shared_ptr<prometheus::Collectable> AgeCollector(const Persistence* persistence,
                                                               const Clock* clock);
  // Scrape-time gauge bandit_durable_wait_oldest_seconds: how long the oldest call still
  // waiting for its change to become durable has waited (0 if none).
  static std::shared_ptr<prometheus::Collectable> DurableWaitCollector(
      std::function<double()> oldest_seconds);

 private:
  prometheus::Histogram* snapshot_;
  prometheus::Histogram* fsync_;
  prometheus::Counter* errors_;
  prometheus::Counter* diverged_;
};

}  // namespace bandit::server
