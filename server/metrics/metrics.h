// Prometheus metrics. RPC latency is observed on the hot path through cached histogram children
// (one per method x code, created once); everything per instance is read from the instances'
// own counters at scrape time, so Select/Update pay nothing for it.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <string>

#include <grpcpp/support/status.h>
#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "absl/synchronization/mutex.h"
#include "server/service/decision_service.h"
#include "server/service/rpcs.h"

namespace bandit::server {

// gRPC's A66 latency buckets (sub-millisecond first).
const prometheus::Histogram::BucketBoundaries& LatencyBuckets();

class Metrics {
 public:
  explicit Metrics(DecisionService* service);

  void ObserveRpc(Rpc rpc, grpc::StatusCode code, double seconds);
  // A request whose payload did not parse as the method's message (answered INVALID_ARGUMENT).
  void CountUnparseable(Rpc rpc) { unparseable_[static_cast<int>(rpc)]->Increment(); }

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }
  // Per-instance and process metrics, computed at scrape time.
  std::shared_ptr<prometheus::Collectable> collector() const { return collector_; }

 private:
  static constexpr int kCodes = 17;
  prometheus::Histogram& Child(Rpc rpc, grpc::StatusCode code);

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Histogram>* rpc_duration_;
  absl::Mutex mu_;  // guards creation of children
  std::array<std::array<std::atomic<prometheus::Histogram*>, kCodes>, static_cast<int>(Rpc::kCount)>
      children_{};
  std::array<prometheus::Counter*, static_cast<int>(Rpc::kCount)> unparseable_{};
  std::shared_ptr<prometheus::Collectable> collector_;
};

}  // namespace bandit::server
