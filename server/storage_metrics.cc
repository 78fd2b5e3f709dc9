#include "server/storage_metrics.h"

#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>

#include "server/clock.h"
#include "server/metrics.h"
#include "server/persistence.h"

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
}

std::shared_ptr<prometheus::Collectable> StorageMetrics::AgeCollector(const Persistence* p,
                                                                      const Clock* clock) {
  return std::make_shared<AgeCollectorImpl>(p, clock);
}

}  // namespace bandit::server
