// Everything banditd is configured with, its defaults (the one place they are written: the
// flags in main.cc take theirs from DefaultServerOptions()) and the one check of a whole set
// (SanitizeOptions), which BanditServer::Start runs before it builds anything.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "server/api/http/personalizer_api.h"
#include "server/api/tls.h"
#include "server/env/clock.h"
#include "server/env/file_system.h"
#include "server/service/decision_service.h"
#include "server/storage/durability.h"

namespace bandit::server {

// The largest --max_shadows: every shadow runs in every Select of its instance.
inline constexpr int64_t kMaxShadows = 1000;
// The largest --http_threads.
inline constexpr int kMaxHttpThreads = 10'000;
// The largest --http_io_threads.
inline constexpr int kMaxHttpIoThreads = 64;
// The largest --http_max_connections (each open connection holds a file descriptor).
inline constexpr int kMaxHttpConnections = 1'000'000;
// The longest HTTP deadline, --http_*_timeout_ms: one day.
inline constexpr int64_t kMaxHttpTimeoutMs = 86'400'000;

// banditd's limits. Not ServiceLimits{}: an in-process service (and recovery) defaults to "no
// limit" on the sizes below, so that it never refuses what a server once accepted; a server
// starts with real ones.
ServiceLimits DefaultServerLimits();

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
  // The sizes of every limit; limits.max_message_bytes and limits.instance.max_vector_size
  // are derived (from max_message_bytes and limits.instance.max_feature_dim) by
  // SanitizeOptions.
  ServiceLimits limits = DefaultServerLimits();
  // Time and timers (expiry, decision times, the snapshot interval, everysec's fsync).
  const Clock* clock = SystemClock::Get();
  // Uids (event-id prefixes) of new instances.
  UidSource* uids = RandomUids();
  // TLS on the gRPC port (off = plaintext; a warning is logged unless listening on loopback).
  TlsOptions tls;
  // Token file (see server/api/auth.h); empty = no authentication.
  std::string tokens_file;
  // Cluster mode (server/cluster/cluster_node.h): several nodes on one PostgreSQL database
  // (storage = postgres, durability = always). node_id empty = "<hostname>-<port>"; advertise
  // empty = the listen host (the hostname if it listens on every address) and bound port.
  bool cluster = false;
  std::string node_id;
  std::string advertise;
  int64_t lease_ms = 5'000;
  // Cluster mode: the longest a call forwarded to an instance's owner may run (the caller's
  // deadline when sooner), so that a forward never outlives a shutdown's grace period by much.
  int64_t forward_deadline_ms = 30'000;
  // Azure Personalizer's REST API over HTTP/JSON (server/api/http/): empty = off. Same TLS files,
  // tokens and body limit (max_message_bytes) as gRPC.
  std::string http_listen;
  // Threads running Personalizer API requests (a write may wait for its fsync on one).
  int http_threads = 64;
  // Threads running offline evaluation jobs (CreateEvaluation): the cores evaluations may take.
  int evaluation_threads = 1;
  // CPU seconds an evaluation's offline experimentation may search for (EvaluationLimits).
  double evaluation_cpu_seconds = 600;
  // Threads reading and writing every HTTP connection.
  int http_io_threads = 2;
  // Rounds that wait on nothing served on the I/O thread that read them
  // (http::HttpServerOptions::rounds_on_io_threads).
  bool http_rounds_on_io_threads = true;
  // Deadlines (server/api/http/http_server.h): the whole request header from its first byte (a
  // new connection's from its accept), the body from the header's end, the next request's first
  // byte on an idle keep-alive connection, a whole response's write.
  int64_t http_header_timeout_ms = 10'000;
  int64_t http_body_timeout_ms = 30'000;
  int64_t http_idle_timeout_ms = 2'000;
  int64_t http_write_timeout_ms = 30'000;
  // Connections open at once, in all and from one client address (503 beyond).
  int http_max_connections = 10'000;
  int http_max_connections_per_address = 256;
  // personalizer.max_json_depth is derived from limits.instance.named.max_depth.
  http::PersonalizerOptions personalizer;
};

// The defaults, as the flags show them.
const ServerOptions& DefaultServerOptions();

// Checks a whole set of options against each other and the ranges every limit must be in
// (INVALID_ARGUMENT naming the flag and what was expected), and fills what is derived: the
// cluster node id when empty, the vector-size and message limits of the service, the HTTP
// API's JSON depth. Applying it twice gives the same options.
absl::StatusOr<ServerOptions> SanitizeOptions(ServerOptions options);

// This machine's host name (the default node id and advertised address in cluster mode).
std::string HostName();

}  // namespace bandit::server
