// banditd's flags, each defined once: its type, name, option, help and (through the option) its
// default. main.cc expands these lists twice, into the flag definitions (there, so that --help
// lists them as the program's own) and into the copy of every flag into ServerOptions, so a
// flag and its option cannot drift apart. Defaults stay in ServerOptions
// (server/server_options.h). README.md's "Server flags" table is checked against
// `banditd --helpfull` (tests/docs/readme_flags_check.py): a new flag is an entry here and a row
// there.
#pragma once

#include "server/instance/memory_budget.h"
#include "server/server_options.h"

// FLAG(type, name, option, help): the flag `name` of `type`, copied into ServerOptions::option
// (a member path such as limits.instance.max_arms), defaulting to DefaultServerOptions().option.
#define BANDIT_SERVER_FLAGS(FLAG)                                                                 \
  FLAG(std::string, listen, listen, "gRPC listen address (host:port; port 0 = any)")              \
  FLAG(std::string, metrics_listen, metrics_listen,                                               \
       "Prometheus /metrics listen address (empty = off)")                                        \
  FLAG(std::string, data_dir, data_dir, "Directory for durable state (--storage=file)")           \
  FLAG(std::string, storage, storage,                                                             \
       "Where journal and snapshots live: file (under --data_dir) or postgres (--postgres_dsn)")  \
  FLAG(std::string, postgres_dsn, postgres_dsn,                                                   \
       "libpq connection string for --storage=postgres, e.g. 'host=db dbname=bandit "             \
       "user=bandit' (password: PGPASSWORD, ~/.pgpass or --postgres_password_file; never "        \
       "logged)")                                                                                 \
  FLAG(std::string, postgres_password_file, postgres_password_file,                               \
       "File whose first line is the PostgreSQL password (--storage=postgres)")                   \
  FLAG(bool, postgres_require_sync_standby, postgres_require_sync_standby,                        \
       "With --storage=postgres --durability=always: refuse to start, and refuse writes "         \
       "(checked at every reconnect and every 10 s), while PostgreSQL has no synchronous "        \
       "standby (synchronous_standby_names empty), instead of warning that a failover can lose "  \
       "acknowledged writes")                                                                     \
  FLAG(std::string, config, config_path,                                                          \
       "Optional text-format bandit.v1.ServerConfig of instances to create at start")             \
  FLAG(int64_t, grace_period_ms, grace_period_ms,                                                 \
       "How long in-flight calls may run after SIGTERM/SIGINT")                                   \
  FLAG(int32_t, max_message_bytes, max_message_bytes, "Max gRPC message size, both directions")   \
  FLAG(int64_t, snapshot_every_changes, snapshot_every_changes,                                   \
       "Snapshot an instance after this many changes")                                            \
  FLAG(int64_t, snapshot_interval_ms, snapshot_interval_ms,                                       \
       "Snapshot round (all changed instances + journal compaction) interval")                    \
  /* Limits (request shapes answer INVALID_ARGUMENT, server capacity RESOURCE_EXHAUSTED). */      \
  FLAG(int64_t, max_instances, limits.max_instances, "Max instances on this server")              \
  FLAG(int64_t, max_feature_dim, limits.instance.max_feature_dim,                                 \
       "Max feature dimension: config `dimension`/`random_features` and the length of every "     \
       "request vector (candidate, x, embedding, direct features)")                               \
  FLAG(int64_t, max_diagonal_feature_dim, limits.instance.max_diagonal_feature_dim,               \
       "Max dimension of a diagonal- or sketched-covariance policy (linucb / glb_omd with "       \
       "covariance: COVARIANCE_DIAGONAL or COVARIANCE_SKETCHED; O(dimension) state): caps "       \
       "feature_space.bits for them (2^22 = bits 22)")                                            \
  FLAG(int64_t, max_candidates, limits.instance.max_candidates,                                   \
       "Max candidate vectors (arms) per Select")                                                 \
  FLAG(int64_t, max_arms, limits.instance.max_arms,                                               \
       "Max arms of one instance (config and after AddArms)")                                     \
  FLAG(int64_t, max_arms_per_request, limits.instance.max_arms_per_request,                       \
       "Max arms per AddArms/RemoveArms request")                                                 \
  FLAG(int64_t, max_batch_items, limits.max_batch_items, "Max items per SelectBatch/UpdateBatch") \
  FLAG(int64_t, max_pending_capacity, limits.instance.max_pending_capacity,                       \
       "Max config.pending.capacity (decisions awaiting rewards) of one instance")                \
  FLAG(int64_t, max_name_length, limits.instance.max_name_length,                                 \
       "Max instance name length (1..128)")                                                       \
  FLAG(int64_t, max_shadows, limits.instance.max_shadows,                                         \
       "Max shadow policies per instance (0..1000; 0 refuses every AddShadow). Each shadow "      \
       "costs about one more policy Select and Update per round. Checked at AddShadow only: a "   \
       "restart with a lower value keeps the shadows already added")                              \
  FLAG(int32_t, max_page_size, limits.max_page_size, "Max ListInstances page size")               \
  FLAG(int64_t, max_named_features, limits.instance.named.max_features,                           \
       "Max features parsed from one JSON document of a named Select or Update (the context, "    \
       "or one action's features)")                                                               \
  FLAG(int64_t, max_named_namespaces, limits.instance.named.max_namespaces,                       \
       "Max namespaces opened in one JSON document")                                              \
  FLAG(int64_t, max_json_depth, limits.instance.named.max_depth,                                  \
       "Max nesting of objects and arrays in one JSON document")                                  \
  FLAG(int64_t, max_json_string_bytes, limits.instance.named.max_string_bytes,                    \
       "Max bytes of one JSON key or string value")                                               \
  FLAG(int64_t, max_json_bytes, limits.instance.named.max_json_bytes,                             \
       "Max bytes of one JSON document")                                                          \
  FLAG(int64_t, max_named_terms, limits.instance.named.max_terms,                                 \
       "Max terms of one named action's vector (its features, the context's and their "           \
       "interactions)")                                                                           \
  /* Security. */                                                                                 \
  FLAG(std::string, tls_cert, tls.cert_path, "PEM server certificate chain (enables TLS)")        \
  FLAG(std::string, tls_key, tls.key_path, "PEM server private key")                              \
  FLAG(std::string, tls_client_ca, tls.client_ca_path,                                            \
       "PEM CA bundle; when set, clients must present a certificate it signed (mutual TLS)")      \
  FLAG(std::string, tokens_file, tokens_file,                                                     \
       "Token file, lines 'ROLE TOKEN [LABEL]' with ROLE admin|writer|reader (enables auth)")     \
  /* Cluster mode. */                                                                             \
  FLAG(bool, cluster, cluster,                                                                    \
       "Run as one node of a cluster sharing the --postgres_dsn database (needs "                 \
       "--storage=postgres, --durability=always): instance leases, fencing, forwarding")          \
  FLAG(std::string, node_id, node_id,                                                             \
       "Cluster node id, unique per node, [A-Za-z0-9_.:-] (default: <hostname>-<port>)")          \
  FLAG(std::string, advertise, advertise,                                                         \
       "host:port other nodes and clients reach this node's gRPC port at (default: the "          \
       "--listen host, or the hostname if it listens on every address, and the bound port)")      \
  FLAG(int64_t, lease_ms, lease_ms,                                                               \
       "Cluster membership lease: a node that has not renewed it for this long loses its "        \
       "instances to the other nodes (heartbeat every lease_ms/3)")                               \
  FLAG(int64_t, forward_deadline_ms, forward_deadline_ms,                                         \
       "Cluster mode: the longest a call forwarded to an instance's owner may run (the "          \
       "caller's deadline when sooner)")                                                          \
  /* Azure Personalizer's REST API over HTTP. */                                                  \
  FLAG(std::string, http_listen, http_listen,                                                     \
       "Azure Personalizer's REST API over HTTP/JSON on this address (host:port, port 0 = any; "  \
       "empty = off); same TLS files, tokens and --max_message_bytes body limit as gRPC")         \
  FLAG(int32_t, http_threads, http_threads,                                                       \
       "Threads handling HTTP requests: requests run at once (a write may wait for its fsync "    \
       "on one); open connections hold none")                                                     \
  FLAG(int32_t, evaluation_threads, evaluation_threads,                                           \
       "Threads running offline evaluation jobs (CreateEvaluation, Personalizer's "               \
       "evaluations): the cores evaluations may take from serving")                               \
  FLAG(double, evaluation_cpu_seconds, evaluation_cpu_seconds,                                    \
       "CPU seconds an evaluation's offline experimentation may search learning settings for "   \
       "(the search stops, a stage cut short, once spent)")                                       \
  FLAG(int32_t, http_io_threads, http_io_threads,                                                 \
       "Threads reading and writing every HTTP connection")                                       \
  FLAG(bool, http_rounds_on_io_threads, http_rounds_on_io_threads,                                \
       "Serve rank, reward and activate requests on the I/O thread that read them when they "     \
       "wait on nothing (not --durability=always, not --cluster): two thread hand-offs fewer "    \
       "per request; off: every request on a handler thread")                                     \
  FLAG(int64_t, http_header_timeout_ms, http_header_timeout_ms,                                   \
       "A request's whole header must arrive within this of its first byte (of the accept, TLS "  \
       "handshake included, on a new connection), else the connection is closed")                 \
  FLAG(int64_t, http_body_timeout_ms, http_body_timeout_ms,                                       \
       "A request's whole body must arrive within this of its header's end")                      \
  FLAG(int64_t, http_idle_timeout_ms, http_idle_timeout_ms,                                       \
       "An idle keep-alive HTTP connection is closed when no request began for this long")        \
  FLAG(int64_t, http_write_timeout_ms, http_write_timeout_ms,                                     \
       "The client must take a whole HTTP response within this, else the connection is closed")   \
  FLAG(int32_t, http_max_connections, http_max_connections,                                       \
       "HTTP connections open at once; beyond, a connection is answered 503 and closed")          \
  FLAG(int32_t, http_max_connections_per_address, http_max_connections_per_address,               \
       "HTTP connections open at once from one client address; beyond, 503 and closed (behind "   \
       "a proxy every client shares its address: raise it)")                                      \
  FLAG(std::string, personalizer_default_instance, personalizer.default_instance,                 \
       "Instance of Personalizer API requests at the root path (/personalizer/...) whose key "    \
       "is bound to none (or without --tokens_file)")                                             \
  FLAG(bool, personalizer_auto_create, personalizer.auto_create,                                  \
       "Create an unknown instance with Personalizer's default learning settings at its first "   \
       "Personalizer API request (as `banditctl create NAME --personalizer`)")

// FLAG(name, default, option, parse, help): a string flag `name`, showing `default`, that
// `parse` (text -> absl::StatusOr of the option's type) turns into ServerOptions::option; a text
// it refuses stops banditd with exit code 2, like a flag that does not parse.
#define BANDIT_PARSED_SERVER_FLAGS(FLAG)                                                          \
  FLAG(durability,                                                                                \
       bandit::server::DurabilityName(bandit::server::DefaultServerOptions().durability),         \
       durability, bandit::server::ParseDurability,                                               \
       "Journal fsync policy: always (fsync before acknowledging, group commit), everysec, "      \
       "none")                                                                                    \
  FLAG(max_memory_bytes, "", limits.max_memory_bytes, bandit::server::ParseMemoryBytes,           \
       "Memory budget of this node: instances (policy state, pending decisions, decision logs, "  \
       "shadows) are admitted against it before anything is allocated, RESOURCE_EXHAUSTED "       \
       "beyond. Bytes, with an optional suffix K, M or G; 0 = no limit; empty = 60% of the "      \
       "smaller of the machine's memory and the cgroup's limit (docs/memory.md)")
