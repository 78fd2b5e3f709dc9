// The whole server: gRPC (BanditService + health + reflection), the metrics exposer and the
// expiry sweeper. main.cc and in-process tests both use it.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/server.h>
#include <prometheus/exposer.h>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "server/auth.h"
#include "server/decision_service.h"
#include "server/grpc_service.h"
#include "server/http/http_server.h"
#include "server/http/personalizer_api.h"
#include "server/metrics.h"
#include "server/persistence.h"
#include "server/storage_metrics.h"
#include "server/tls.h"

namespace bandit::server::cluster {
class ClusterNode;
class ClusterMetrics;
}  // namespace bandit::server::cluster

namespace bandit::server {

struct ServerOptions {
  std::string listen = "127.0.0.1:50051";
  // Empty = no metrics endpoint.
  std::string metrics_listen = "127.0.0.1:9464";
  std::string data_dir = "./data";
  // Optional text-format bandit.v1.ServerConfig of instances to create at start.
  std::string config_path;
  int64_t grace_period_ms = 5'000;
  int max_message_bytes = 16 << 20;
  int64_t keepalive_time_ms = 60'000;
  int64_t keepalive_timeout_ms = 20'000;
  int64_t expiry_sweep_ms = 1'000;
  // Durable state under data_dir (journal + snapshots). Off only for throwaway servers.
  bool persistent = true;
  Durability durability = Durability::kAlways;
  int64_t snapshot_every_changes = 10'000;
  int64_t snapshot_interval_ms = 60'000;
  FileSystem* fs = PosixFileSystem();
  // Where journal records and snapshots live: "file" (data_dir, the default) or "postgres"
  // (the database named by postgres_dsn; data_dir is then unused for state).
  std::string storage = "file";
  std::string postgres_dsn;
  std::string postgres_password_file;
  // durability=always without a synchronous standby: refuse writes instead of warning.
  bool postgres_require_sync_standby = false;
  ServiceLimits limits;
  // Time and timers (expiry, decision times, the snapshot interval, everysec's fsync).
  const Clock* clock = SystemClock::Get();
  // Uids (event-id prefixes) of new instances.
  UidSource* uids = RandomUids();
  // TLS on the gRPC port (off = plaintext; a warning is logged unless listening on loopback).
  TlsOptions tls;
  // Token file (see server/auth.h); empty = no authentication.
  std::string tokens_file;
  // Cluster mode (server/cluster/cluster_node.h): several nodes on one PostgreSQL database
  // (storage = postgres, durability = always). node_id empty = "<hostname>-<port>"; advertise
  // empty = the listen host (the hostname if it listens on every address) and bound port.
  bool cluster = false;
  std::string node_id;
  std::string advertise;
  int64_t lease_ms = 5'000;
  // Azure Personalizer's REST API over HTTP/JSON (server/http/): empty = off. Same TLS files,
  // tokens and body limit (max_message_bytes) as gRPC.
  std::string http_listen;
  int http_threads = 64;
  http::PersonalizerOptions personalizer;
};

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
  absl::Status LoadConfig(const std::string& path);
  absl::Status StartCluster();
  // Stops the metrics endpoint without waiting out its HTTP server's poll interval.
  void StopExposer();

  ServerOptions options_;
  std::string postgres_password_;  // from --postgres_password_file (never logged)
  std::unique_ptr<DecisionService> service_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<StorageMetrics> storage_metrics_;
  std::shared_ptr<prometheus::Collectable> snapshot_age_;
  std::shared_ptr<prometheus::Collectable> durable_wait_;
  std::unique_ptr<Persistence> persistence_;
  std::unique_ptr<cluster::ClusterNode> cluster_;  // after persistence_: destroyed first
  std::shared_ptr<prometheus::Collectable> cluster_metrics_;
  std::atomic<cluster::ClusterNode*> cluster_ptr_{nullptr};  // read by storage callbacks
  std::atomic<cluster::ClusterMetrics*> cluster_metrics_impl_{nullptr};
  RecoveryReport recovery_;
  std::unique_ptr<Authorizer> auth_;
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
