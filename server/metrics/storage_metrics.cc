#include "server/metrics/storage_metrics.h"

#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>

#include "server/env/clock.h"
#include "server/metrics/metrics.h"
#include "server/service/persistence.h"

namespace bandit::server {
namespace {

class AgeCollectorImpl final : public prometheus::Collectable {
 public:
  AgeCollectorImpl(const Persistence* p, const Clock* clock) : p_(p), clock_(clock) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    prometheus::MetricFamily f;
    f.name = "bandit_last_snapshot_age_seconds";
    f.help = "Seconds since the instance's last snapshot was written.";
    f.type = prometheus::MetricType::Gauge;
    const int64_t now = clock_->NowMs();
    for (const auto& [name, at] : p_->LastSnapshotTimes()) {
      prometheus::ClientMetric m;
      m.label = {{"instance", name}};
      m.gauge.value = static_cast<double>(now - at) / 1000.0;
      f.metric.push_back(std::move(m));
    }
    return {f};
  }

 private:
  const Persistence* p_;
  const Clock* clock_;
};

class DurableWaitCollectorImpl final : public prometheus::Collectable {
 public:
  explicit DurableWaitCollectorImpl(std::function<double()> oldest) : oldest_(std::move(oldest)) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    prometheus::MetricFamily f;
    f.name = "bandit_durable_wait_oldest_seconds";
    f.help =
        "Age of the oldest call whose change is applied but not yet acknowledged because it is "
        "waiting for durability (0 if none). Fsyncs take milliseconds: seconds mean a stuck "
        "disk or a lost wake-up.";
    f.type = prometheus::MetricType::Gauge;
    prometheus::ClientMetric m;
    m.gauge.value = oldest_();
    f.metric.push_back(std::move(m));
    return {f};
  }

 private:
  std::function<double()> oldest_;
};

}  // namespace

StorageMetrics::StorageMetrics(prometheus::Registry& registry) {
  snapshot_ = &prometheus::BuildHistogram()
                   .Name("bandit_snapshot_duration_seconds")
                   .Help("Time to write one instance snapshot (serialize, write, fsync, rename).")
                   .Register(registry)
                   .Add({}, LatencyBuckets());
  fsync_ = &prometheus::BuildHistogram()
                .Name("bandit_journal_fsync_duration_seconds")
                .Help("Duration of journal fsyncs (one per group commit).")
                .Register(registry)
                .Add({}, LatencyBuckets());
  errors_ = &prometheus::BuildCounter()
                 .Name("bandit_storage_errors_total")
                 .Help("Failed storage writes or fsyncs; after the first, writes are refused.")
                 .Register(registry)
                 .Add({});
  diverged_ = &prometheus::BuildCounter()
                   .Name("bandit_storage_diverged_instances_total")
                   .Help("Instances PostgreSQL was found to hold fewer records of than banditd "
                         "had committed (checked at every reconnect: a failover to a standby "
                         "without the last commits, an older backup restored); each is refused "
                         "(DATA_LOSS) until an operator decides.")
                   .Register(registry)
                   .Add({});
}

std::shared_ptr<prometheus::Collectable> StorageMetrics::AgeCollector(const Persistence* p,
                                                                      const Clock* clock) {
  return std::make_shared<AgeCollectorImpl>(p, clock);
}

std::shared_ptr<prometheus::Collectable> StorageMetrics::DurableWaitCollector(
    std::function<double()> oldest_seconds) {
  return std::make_shared<DurableWaitCollectorImpl>(std::move(oldest_seconds));
}

}  // namespace bandit::server
