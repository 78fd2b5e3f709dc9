// The whole server and its composition root: Start sanitizes the options (server_options.h)
// and builds every component from them (the service, storage by the factory, authentication,
// the gRPC and HTTP front doors, the cluster node, the metrics endpoint, the expiry sweeper),
// handing each to those that use it. main.cc and in-process tests both use it.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/server.h>
#include <prometheus/exposer.h>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "server/api/auth.h"
#include "server/api/grpc_service.h"
#include "server/api/http/http_server.h"
#include "server/api/http/personalizer_api.h"
#include "server/api/tls.h"
#include "server/metrics/metrics.h"
#include "server/metrics/storage_metrics.h"
#include "server/server_options.h"
#include "server/service/decision_service.h"
#include "server/service/evaluation_runner.h"
#include "server/service/persistence.h"
#include "server/storage/instance_fence.h"

namespace bandit::server::cluster {
class ClusterNode;
class ClusterMetrics;
class Router;
}  // namespace bandit::server::cluster

namespace bandit::server {

class BanditServer {
 public:
  static absl::StatusOr<std::unique_ptr<BanditServer>> Start(const ServerOptions& options);
  ~BanditServer();

  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  int http_port() const { return http_ != nullptr ? http_->port() : 0; }
  DecisionService& service() { return *service_; }
  Persistence* persistence() { return persistence_.get(); }
  cluster::ClusterNode* cluster() { return cluster_.get(); }
  const RecoveryReport& recovery() const { return recovery_; }

  // Health -> NOT_SERVING, stop accepting, let in-flight calls finish within the grace period,
  // stop the sweeper. Idempotent.
  void Shutdown();

 private:
  BanditServer() = default;
  // The steps of Start, in order.
  absl::Status OpenStorage();
  absl::Status LoadAuth();
  absl::Status StartGrpc();
  absl::Status StartMetrics();
  absl::Status StartHttp();
  absl::Status StartCluster();
  absl::Status LoadConfig(const std::string& path);
  void StartSweeper();
  void LogStarted() const;
  // Stops the metrics endpoint without waiting out its HTTP server's poll interval.
  void StopExposer();

  ServerOptions options_;
  std::string postgres_password_;  // from --postgres_password_file (never logged)
  std::unique_ptr<DecisionService> service_;
  std::unique_ptr<EvaluationRunner> evaluations_;  // after service_: destroyed first
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<StorageMetrics> storage_metrics_;
  std::shared_ptr<prometheus::Collectable> snapshot_age_;
  std::shared_ptr<prometheus::Collectable> durable_wait_;
  std::unique_ptr<Persistence> persistence_;
  InstanceFence* fence_ = nullptr;  // owned by persistence_'s storage (cluster mode only)
  std::string storage_description_;
  std::unique_ptr<cluster::ClusterNode> cluster_;  // after persistence_: destroyed first
  std::shared_ptr<prometheus::Collectable> cluster_metrics_;
  std::atomic<cluster::ClusterNode*> cluster_ptr_{nullptr};  // read by storage callbacks
  std::atomic<cluster::ClusterMetrics*> cluster_metrics_impl_{nullptr};
  RecoveryReport recovery_;
  std::unique_ptr<Authorizer> auth_;
  std::unique_ptr<cluster::Router> router_;  // cluster mode; used by both front doors
  std::unique_ptr<GrpcBanditService> grpc_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<http::HttpMetrics> http_metrics_;
  std::unique_ptr<http::PersonalizerApi> personalizer_;
  std::unique_ptr<http::HttpServer> http_;  // after personalizer_: destroyed first
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
  int metrics_port_ = 0;
  absl::Notification stop_;
  std::thread sweeper_;
  std::atomic<bool> shut_down_{false};  // read by storage callbacks on other threads
};

}  // namespace bandit::server
