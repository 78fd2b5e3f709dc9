// bandit_cluster_* metrics of one node, read at scrape time from the node and the gRPC adapter.
#pragma once

#include <atomic>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include <prometheus/collectable.h>

#include "server/cluster/cluster_node.h"

namespace bandit::server::cluster {

class ClusterMetrics final : public prometheus::Collectable {
 public:
  // `node` may be set later (the node starts after the gRPC port is bound).
  explicit ClusterMetrics(std::function<int64_t()> forwarded_calls)
      : forwarded_calls_(std::move(forwarded_calls)) {}
  void SetNode(const ClusterNode* node) { node_.store(node); }
  // A claim + load of an instance (a takeover, or a free instance's first call) took `seconds`.
  void ObserveTakeover(double seconds);
  void CountFencingRefusal(int64_t instances) { fencing_refusals_ += instances; }
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  static constexpr double kBuckets[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
  std::function<int64_t()> forwarded_calls_;
  std::atomic<const ClusterNode*> node_{nullptr};
  std::atomic<int64_t> fencing_refusals_{0};
  mutable std::mutex mu_;
  std::vector<uint64_t> bucket_counts_ = std::vector<uint64_t>(std::size(kBuckets) + 1, 0);
  double sum_ = 0;
  uint64_t count_ = 0;
};

}  // namespace bandit::server::cluster
