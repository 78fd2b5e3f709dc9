#include "server/cluster/cluster_metrics.h"

#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>

namespace bandit::server::cluster {

void ClusterMetrics::ObserveTakeover(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t i = 0;
  while (i < std::size(kBuckets) && seconds > kBuckets[i]) ++i;
  ++bucket_counts_[i];
  sum_ += seconds;
  ++count_;
}

std::vector<prometheus::MetricFamily> ClusterMetrics::Collect() const {
  auto one = [](const char* name, const char* help, prometheus::MetricType type, double v) {
    prometheus::MetricFamily f;
    f.name = name;
    f.help = help;
    f.type = type;
    prometheus::ClientMetric m;
    if (type == prometheus::MetricType::Counter)
      m.counter.value = v;
    else
      m.gauge.value = v;
    f.metric.push_back(std::move(m));
    return f;
  };
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  const ClusterNode* node = node_.load();
  out.push_back(one("bandit_cluster_owned_instances",
                    "Instances whose lease this node holds and serves.", MetricType::Gauge,
                    node ? static_cast<double>(node->owned()) : 0));
  out.push_back(one("bandit_cluster_forwarded_calls_total",
                    "Calls this node forwarded to the instance's owner.", MetricType::Counter,
                    static_cast<double>(forwarded_calls_())));
  out.push_back(one("bandit_cluster_lease_acquisitions_total",
                    "Instance leases this node claimed (new instances, free or expired leases).",
                    MetricType::Counter,
                    node ? static_cast<double>(node->counters().acquisitions.load()) : 0));
  out.push_back(one("bandit_cluster_lease_losses_total",
                    "Instances this node lost because another node took their lease over.",
                    MetricType::Counter,
                    node ? static_cast<double>(node->counters().losses.load()) : 0));
  out.push_back(one("bandit_cluster_handoffs_total",
                    "Instances this node snapshotted and released because placement moved "
                    "them (a node joined).",
                    MetricType::Counter,
                    node ? static_cast<double>(node->counters().handoffs.load()) : 0));
  out.push_back(one("bandit_cluster_declined_instances_total",
                    "Instances this node was to own but did not load for want of room in its "
                    "memory budget (--max_memory_bytes); their lease was freed and placement "
                    "passes over this node for them until it has room.",
                    MetricType::Counter,
                    node ? static_cast<double>(node->counters().declined.load()) : 0));
  out.push_back(one("bandit_cluster_fencing_refusals_total",
                    "Instances whose commit PostgreSQL refused because this node no longer "
                    "held their lease epoch (nothing of it was acknowledged).",
                    MetricType::Counter, static_cast<double>(fencing_refusals_.load())));
  prometheus::MetricFamily h;
  h.name = "bandit_cluster_takeover_seconds";
  h.help = "Time to claim an instance's lease and load it (snapshot + journal replay).";
  h.type = MetricType::Histogram;
  prometheus::ClientMetric m;
  {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < std::size(kBuckets); ++i) {
      cumulative += bucket_counts_[i];
      m.histogram.bucket.push_back({cumulative, kBuckets[i]});
    }
    cumulative += bucket_counts_.back();
    m.histogram.bucket.push_back({cumulative, std::numeric_limits<double>::infinity()});
    m.histogram.sample_count = count_;
    m.histogram.sample_sum = sum_;
  }
  h.metric.push_back(std::move(m));
  out.push_back(std::move(h));
  return out;
}

}  // namespace bandit::server::cluster
