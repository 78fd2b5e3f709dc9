// banditd: hosts named bandit instances over gRPC.
#include <pthread.h>
#include <signal.h>

#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/synchronization/mutex.h"
#include "server/env/log.h"
#include "server/instance/memory_budget.h"
#include "server/server.h"

namespace {

// Every flag's default is the option's (server/server_options.h, the one place defaults live).
const bandit::server::ServerOptions& D() { return bandit::server::DefaultServerOptions(); }
const bandit::server::InstanceLimits& DI() { return D().limits.instance; }

}  // namespace

ABSL_FLAG(std::string, listen, D().listen, "gRPC listen address (host:port; port 0 = any)");
ABSL_FLAG(std::string, metrics_listen, D().metrics_listen,
          "Prometheus /metrics listen address (empty = off)");
ABSL_FLAG(std::string, data_dir, D().data_dir, "Directory for durable state (--storage=file)");
ABSL_FLAG(std::string, storage, D().storage,
          "Where journal and snapshots live: file (under --data_dir) or postgres (--postgres_dsn)");
ABSL_FLAG(
    std::string, postgres_dsn, "",
    "libpq connection string for --storage=postgres, e.g. 'host=db dbname=bandit user=bandit' "
    "(password: PGPASSWORD, ~/.pgpass or --postgres_password_file; never logged)");
ABSL_FLAG(std::string, postgres_password_file, "",
          "File whose first line is the PostgreSQL password (--storage=postgres)");
ABSL_FLAG(bool, postgres_require_sync_standby, false,
          "With --storage=postgres --durability=always: refuse to start, and refuse writes "
          "(checked at every reconnect and every 10 s), while PostgreSQL has no synchronous "
          "standby "
          "(synchronous_standby_names empty), instead of warning that a failover can lose "
          "acknowledged writes");
ABSL_FLAG(std::string, config, "",
          "Optional text-format bandit.v1.ServerConfig of instances to create at start");
ABSL_FLAG(int64_t, grace_period_ms, D().grace_period_ms,
          "How long in-flight calls may run after SIGTERM/SIGINT");
ABSL_FLAG(int32_t, max_message_bytes, D().max_message_bytes,
          "Max gRPC message size, both directions");
ABSL_FLAG(
    std::string, durability, bandit::server::DurabilityName(D().durability),
    "Journal fsync policy: always (fsync before acknowledging, group commit), everysec, none");
ABSL_FLAG(int64_t, snapshot_every_changes, D().snapshot_every_changes,
          "Snapshot an instance after this many changes");
ABSL_FLAG(int64_t, snapshot_interval_ms, D().snapshot_interval_ms,
          "Snapshot round (all changed instances + journal compaction) interval");
// Limits (request shapes answer INVALID_ARGUMENT, server capacity RESOURCE_EXHAUSTED).
ABSL_FLAG(int64_t, max_instances, D().limits.max_instances, "Max instances on this server");
ABSL_FLAG(int64_t, max_feature_dim, DI().max_feature_dim,
          "Max feature dimension: config `dimension`/`random_features` and the length of every "
          "request vector (candidate, x, embedding, direct features)");
ABSL_FLAG(int64_t, max_diagonal_feature_dim, DI().max_diagonal_feature_dim,
          "Max dimension of a diagonal- or sketched-covariance policy (linucb / glb_omd with "
          "covariance: COVARIANCE_DIAGONAL or COVARIANCE_SKETCHED; O(dimension) state): caps "
          "feature_space.bits for them (2^22 = bits 22)");
ABSL_FLAG(int64_t, max_candidates, DI().max_candidates, "Max candidate vectors (arms) per Select");
ABSL_FLAG(int64_t, max_arms, DI().max_arms, "Max arms of one instance (config and after AddArms)");
ABSL_FLAG(int64_t, max_arms_per_request, DI().max_arms_per_request,
          "Max arms per AddArms/RemoveArms request");
ABSL_FLAG(int64_t, max_batch_items, D().limits.max_batch_items,
          "Max items per SelectBatch/UpdateBatch");
ABSL_FLAG(int64_t, max_pending_capacity, DI().max_pending_capacity,
          "Max config.pending.capacity (decisions awaiting rewards) of one instance");
ABSL_FLAG(int64_t, max_name_length, DI().max_name_length, "Max instance name length (1..128)");
ABSL_FLAG(int64_t, max_shadows, DI().max_shadows,
          "Max shadow policies per instance (0..1000; 0 refuses every AddShadow). Each shadow "
          "costs about one more policy Select and Update per round. Checked at AddShadow only: "
          "a restart with a lower value keeps the shadows already added");
ABSL_FLAG(std::string, max_memory_bytes, "",
          "Memory budget of this node: instances (policy state, pending decisions, decision logs, "
          "shadows) are admitted against it before anything is allocated, RESOURCE_EXHAUSTED "
          "beyond. Bytes, with an optional suffix K, M or G; 0 = no limit; empty = 60% of the "
          "smaller of the machine's memory and the cgroup's limit (docs/memory.md)");
ABSL_FLAG(int32_t, max_page_size, D().limits.max_page_size, "Max ListInstances page size");
ABSL_FLAG(int64_t, max_named_features, DI().named.max_features,
          "Max features parsed from one JSON document of a named Select or Update (the context, "
          "or one action's features)");
ABSL_FLAG(int64_t, max_named_namespaces, DI().named.max_namespaces,
          "Max namespaces opened in one JSON document");
ABSL_FLAG(int64_t, max_json_depth, DI().named.max_depth,
          "Max nesting of objects and arrays in one JSON document");
ABSL_FLAG(int64_t, max_json_string_bytes, DI().named.max_string_bytes,
          "Max bytes of one JSON key or string value");
ABSL_FLAG(int64_t, max_json_bytes, DI().named.max_json_bytes, "Max bytes of one JSON document");
ABSL_FLAG(int64_t, max_named_terms, DI().named.max_terms,
          "Max terms of one named action's vector (its features, the context's and their "
          "interactions)");
// Security.
ABSL_FLAG(std::string, tls_cert, "", "PEM server certificate chain (enables TLS)");
ABSL_FLAG(std::string, tls_key, "", "PEM server private key");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle; when set, clients must present a certificate it signed (mutual TLS)");
ABSL_FLAG(std::string, tokens_file, "",
          "Token file, lines 'ROLE TOKEN [LABEL]' with ROLE admin|writer|reader (enables auth)");
ABSL_FLAG(bool, cluster, false,
          "Run as one node of a cluster sharing the --postgres_dsn database (needs "
          "--storage=postgres, --durability=always): instance leases, fencing, forwarding");
ABSL_FLAG(std::string, node_id, "",
          "Cluster node id, unique per node, [A-Za-z0-9_.:-] (default: <hostname>-<port>)");
ABSL_FLAG(std::string, advertise, "",
          "host:port other nodes and clients reach this node's gRPC port at (default: the "
          "--listen host, or the hostname if it listens on every address, and the bound port)");
ABSL_FLAG(int64_t, lease_ms, D().lease_ms,
          "Cluster membership lease: a node that has not renewed it for this long loses its "
          "instances to the other nodes (heartbeat every lease_ms/3)");
ABSL_FLAG(int64_t, forward_deadline_ms, D().forward_deadline_ms,
          "Cluster mode: the longest a call forwarded to an instance's owner may run (the "
          "caller's deadline when sooner)");
ABSL_FLAG(std::string, http_listen, "",
          "Azure Personalizer's REST API over HTTP/JSON on this address (host:port, port 0 = any; "
          "empty = off); same TLS files, tokens and --max_message_bytes body limit as gRPC");
ABSL_FLAG(int32_t, http_threads, D().http_threads,
          "Threads handling HTTP requests: requests run at once (a write may wait for its fsync "
          "on one); open connections hold none");
ABSL_FLAG(int32_t, evaluation_threads, D().evaluation_threads,
          "Threads running offline evaluation jobs (CreateEvaluation, Personalizer's "
          "evaluations): the cores evaluations may take from serving");
ABSL_FLAG(int32_t, http_io_threads, D().http_io_threads,
          "Threads reading and writing every HTTP connection");
ABSL_FLAG(int64_t, http_header_timeout_ms, D().http_header_timeout_ms,
          "A request's whole header must arrive within this of its first byte (of the accept, "
          "TLS handshake included, on a new connection), else the connection is closed");
ABSL_FLAG(int64_t, http_body_timeout_ms, D().http_body_timeout_ms,
          "A request's whole body must arrive within this of its header's end");
ABSL_FLAG(int64_t, http_idle_timeout_ms, D().http_idle_timeout_ms,
          "An idle keep-alive HTTP connection is closed when no request began for this long");
ABSL_FLAG(int64_t, http_write_timeout_ms, D().http_write_timeout_ms,
          "The client must take a whole HTTP response within this, else the connection is closed");
ABSL_FLAG(int32_t, http_max_connections, D().http_max_connections,
          "HTTP connections open at once; beyond, a connection is answered 503 and closed");
ABSL_FLAG(int32_t, http_max_connections_per_address, D().http_max_connections_per_address,
          "HTTP connections open at once from one client address; beyond, 503 and closed "
          "(behind a proxy every client shares its address: raise it)");
ABSL_FLAG(std::string, personalizer_default_instance, "",
          "Instance of Personalizer API requests at the root path (/personalizer/...) whose key "
          "is bound to none (or without --tokens_file)");
ABSL_FLAG(bool, personalizer_auto_create, false,
          "Create an unknown instance with Personalizer's default learning settings at its "
          "first Personalizer API request (as `banditctl create NAME --personalizer`)");
ABSL_FLAG(std::string, port_file, "",
          "If set, write the bound gRPC and metrics ports to this file (\"GRPC METRICS\\n\"; "
          "\"GRPC METRICS HTTP\\n\" with --http_listen)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("banditd: the Bandit Decision Service");
  absl::ParseCommandLine(argc, argv);
  // Debian's Abseil is built without NDEBUG, so every absl::Mutex::Lock (ours and gRPC's)
  // maintains the deadlock-detection graph: ~3% of the CPU under load. It is a debugging aid;
  // release builds of Abseil have it off.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  // Block the shutdown signals in every thread (threads inherit the mask), then wait for them
  // synchronously on the main thread: no work inside a signal handler.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  bandit::server::ServerOptions options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  options.data_dir = absl::GetFlag(FLAGS_data_dir);
  options.config_path = absl::GetFlag(FLAGS_config);
  options.storage = absl::GetFlag(FLAGS_storage);
  options.postgres_dsn = absl::GetFlag(FLAGS_postgres_dsn);
  options.postgres_password_file = absl::GetFlag(FLAGS_postgres_password_file);
  options.postgres_require_sync_standby = absl::GetFlag(FLAGS_postgres_require_sync_standby);
  options.grace_period_ms = absl::GetFlag(FLAGS_grace_period_ms);
  options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  auto durability = bandit::server::ParseDurability(absl::GetFlag(FLAGS_durability));
  if (!durability.ok()) {
    BANDIT_LOG_ERROR(durability.status().message());
    return 2;
  }
  options.durability = *durability;
  options.snapshot_every_changes = absl::GetFlag(FLAGS_snapshot_every_changes);
  options.snapshot_interval_ms = absl::GetFlag(FLAGS_snapshot_interval_ms);
  auto& limits = options.limits;
  limits.max_instances = absl::GetFlag(FLAGS_max_instances);
  limits.max_batch_items = absl::GetFlag(FLAGS_max_batch_items);
  limits.max_page_size = absl::GetFlag(FLAGS_max_page_size);
  limits.instance.max_feature_dim = absl::GetFlag(FLAGS_max_feature_dim);
  limits.instance.max_diagonal_feature_dim = absl::GetFlag(FLAGS_max_diagonal_feature_dim);
  limits.instance.max_candidates = absl::GetFlag(FLAGS_max_candidates);
  limits.instance.max_arms = absl::GetFlag(FLAGS_max_arms);
  limits.instance.max_arms_per_request = absl::GetFlag(FLAGS_max_arms_per_request);
  limits.instance.max_pending_capacity = absl::GetFlag(FLAGS_max_pending_capacity);
  limits.instance.max_name_length = absl::GetFlag(FLAGS_max_name_length);
  limits.instance.max_shadows = absl::GetFlag(FLAGS_max_shadows);
  auto memory = bandit::server::ParseMemoryBytes(absl::GetFlag(FLAGS_max_memory_bytes));
  if (!memory.ok()) {
    BANDIT_LOG_ERROR(memory.status().message());
    return 2;
  }
  limits.max_memory_bytes = *memory;
  limits.instance.named.max_features = absl::GetFlag(FLAGS_max_named_features);
  limits.instance.named.max_namespaces = absl::GetFlag(FLAGS_max_named_namespaces);
  limits.instance.named.max_depth = absl::GetFlag(FLAGS_max_json_depth);
  limits.instance.named.max_string_bytes = absl::GetFlag(FLAGS_max_json_string_bytes);
  limits.instance.named.max_json_bytes = absl::GetFlag(FLAGS_max_json_bytes);
  limits.instance.named.max_terms = absl::GetFlag(FLAGS_max_named_terms);
  options.tls.cert_path = absl::GetFlag(FLAGS_tls_cert);
  options.tls.key_path = absl::GetFlag(FLAGS_tls_key);
  options.tls.client_ca_path = absl::GetFlag(FLAGS_tls_client_ca);
  options.tokens_file = absl::GetFlag(FLAGS_tokens_file);
  options.cluster = absl::GetFlag(FLAGS_cluster);
  options.node_id = absl::GetFlag(FLAGS_node_id);
  options.advertise = absl::GetFlag(FLAGS_advertise);
  options.lease_ms = absl::GetFlag(FLAGS_lease_ms);
  options.forward_deadline_ms = absl::GetFlag(FLAGS_forward_deadline_ms);
  options.http_listen = absl::GetFlag(FLAGS_http_listen);
  options.http_threads = absl::GetFlag(FLAGS_http_threads);
  options.evaluation_threads = absl::GetFlag(FLAGS_evaluation_threads);
  options.http_io_threads = absl::GetFlag(FLAGS_http_io_threads);
  options.http_header_timeout_ms = absl::GetFlag(FLAGS_http_header_timeout_ms);
  options.http_body_timeout_ms = absl::GetFlag(FLAGS_http_body_timeout_ms);
  options.http_idle_timeout_ms = absl::GetFlag(FLAGS_http_idle_timeout_ms);
  options.http_write_timeout_ms = absl::GetFlag(FLAGS_http_write_timeout_ms);
  options.http_max_connections = absl::GetFlag(FLAGS_http_max_connections);
  options.http_max_connections_per_address =
      absl::GetFlag(FLAGS_http_max_connections_per_address);
  options.personalizer.default_instance = absl::GetFlag(FLAGS_personalizer_default_instance);
  options.personalizer.auto_create = absl::GetFlag(FLAGS_personalizer_auto_create);
  // Flags that do not fit together exit 2, as flags that do not parse; Start sanitizes again
  // (the same function), for in-process callers.
  auto sane = bandit::server::SanitizeOptions(options);
  if (!sane.ok()) {
    BANDIT_LOG_ERROR(sane.status().message());
    return 2;
  }
  auto server = bandit::server::BanditServer::Start(*sane);
  if (!server.ok()) {
    BANDIT_LOG_ERROR("banditd failed to start: ", server.status().ToString());
    return 1;
  }
  if (const std::string port_file = absl::GetFlag(FLAGS_port_file); !port_file.empty()) {
    const std::string tmp = port_file + ".tmp";
    if (FILE* f = std::fopen(tmp.c_str(), "w")) {
      // The HTTP port only when it is on: readers of the two-number form keep working.
      if ((*server)->http_port() != 0)
        std::fprintf(f, "%d %d %d\n", (*server)->port(), (*server)->metrics_port(),
                     (*server)->http_port());
      else
        std::fprintf(f, "%d %d\n", (*server)->port(), (*server)->metrics_port());
      std::fclose(f);
      std::rename(tmp.c_str(), port_file.c_str());
    }
  }
  int sig = 0;
  sigwait(&signals, &sig);
  BANDIT_LOG_INFO("received signal ", sig);
  (*server)->Shutdown();
  return 0;
}
