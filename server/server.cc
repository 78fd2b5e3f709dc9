#include "server/server.h"

#include <netdb.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>

#include <google/protobuf/text_format.h>
#include <grpc/grpc.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "bandit/v1/config.pb.h"
#include "server/cluster/cluster_metrics.h"
#include "server/cluster/cluster_node.h"
#include "server/cluster/router.h"
#include "server/env/log.h"
#include "server/storage/storage_factory.h"

namespace bandit::server {

// The composition root: options are sanitized once, then each component is built from them and
// handed to the ones that use it, in the order they depend on each other: the service, its
// storage (chosen by the factory) and recovery, authentication, the gRPC front door, the metrics
// endpoint, the HTTP front door, the cluster node, the background threads.
absl::StatusOr<std::unique_ptr<BanditServer>> BanditServer::Start(const ServerOptions& given) {
  absl::StatusOr<ServerOptions> sane = SanitizeOptions(given);
  if (!sane.ok()) return sane.status();
  std::unique_ptr<BanditServer> s(new BanditServer());
  s->options_ = *std::move(sane);
  const ServerOptions& options = s->options_;
  std::error_code ec;
  std::filesystem::create_directories(options.data_dir, ec);
  if (ec)
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create --data_dir=", options.data_dir, ": ", ec.message()));
  s->service_ = std::make_unique<DecisionService>(options.clock, options.limits, options.uids);
  s->metrics_ = std::make_unique<Metrics>(s->service_.get());
  s->storage_metrics_ = std::make_unique<StorageMetrics>(*s->metrics_->registry());
  if (options.persistent) {
    if (auto st = s->OpenStorage(); !st.ok()) return st;
  }
  if (auto st = s->LoadAuth(); !st.ok()) return st;
  if (auto st = s->StartGrpc(); !st.ok()) return st;
  if (auto st = s->StartMetrics(); !st.ok()) {
    s->server_->Shutdown();
    return st;
  }
  if (auto st = s->StartHttp(); !st.ok()) {
    s->server_->Shutdown();
    return st;
  }
  if (options.cluster) {
    if (auto st = s->StartCluster(); !st.ok()) {
      s->server_->Shutdown();
      return st;
    }
    if (!options.config_path.empty()) {
      if (auto st = s->LoadConfig(options.config_path); !st.ok()) return st;
    }
  }
  if (s->persistence_) s->persistence_->StartBackground();
  // Offline evaluations: their own threads; those a restart interrupted run again.
  s->evaluations_ = std::make_unique<EvaluationRunner>(
      s->service_.get(), options.evaluation_threads,
      EvaluationLimits{.cpu_budget_seconds = options.evaluation_cpu_seconds,
                       .cpu_seconds = {},
                       .low_priority = true});
  s->service_->SetEvaluationJobs(s->evaluations_->Jobs());
  if (const int64_t resumed = s->service_->ResumeEvaluations(); resumed > 0)
    BANDIT_LOG_INFO("evaluations: ", resumed, " interrupted by the restart run again");
  s->StartSweeper();
  s->LogStarted();
  return s;
}

absl::Status BanditServer::OpenStorage() {
  const ServerOptions& options = options_;
  PersistenceOptions po;
  po.data_dir = options.data_dir;
  po.durability = options.durability;
  po.snapshot_every_changes = options.snapshot_every_changes;
  po.snapshot_interval_ms = options.snapshot_interval_ms;
  po.fs = options.fs;
  po.clock = options.clock;
  BanditServer* self = this;
  po.on_snapshot = [self](double sec) { self->storage_metrics_->ObserveSnapshot(sec); };
  po.observer.on_fsync = [self](double sec) { self->storage_metrics_->ObserveFsync(sec); };
  po.observer.on_error = [self](const absl::Status& e) {
    // The journal failed. Never retried silently: writes are refused from now on, health
    // says so.
    self->storage_metrics_->CountError();
    BANDIT_LOG_ERROR("storage failed, refusing writes and reporting NOT_SERVING: ", e.ToString());
    if (self->server_) self->server_->GetHealthCheckService()->SetServingStatus(false);
  };
  // A snapshot not stored is counted and logged, and health stays with the commit path: the
  // journal (or PostgreSQL's journal table) still holds every change and keeps accepting
  // writes, and the next round retries the snapshot.
  po.on_snapshot_error = [self](const absl::Status& e) {
    self->storage_metrics_->CountError();
    BANDIT_LOG_ERROR("snapshot not stored (the journal keeps every change; retried next round): ",
                     e.ToString());
  };

  StorageSettings settings;
  settings.kind = options.storage;
  settings.file.fs = po.fs;
  settings.file.dir = po.data_dir;
  settings.file.durability = po.durability;
  settings.file.observer = po.observer;
  settings.file.clock = po.clock;
  if (options.storage == "postgres") {
    PostgresStorageOptions& pg = settings.postgres;
    pg.dsn = options.postgres_dsn;
    if (!options.postgres_password_file.empty()) {
      // The first line is the password (read through the FileSystem seam; never logged).
      auto text = options.fs->ReadFile(options.postgres_password_file);
      if (!text.ok())
        return absl::FailedPreconditionError(
            absl::StrCat("cannot read the password from --postgres_password_file=",
                         options.postgres_password_file, ": ", text.status().message()));
      const absl::string_view first = absl::string_view(*text).substr(0, text->find('\n'));
      postgres_password_ = std::string(absl::StripTrailingAsciiWhitespace(first));
      if (postgres_password_.empty())
        return absl::FailedPreconditionError(
            absl::StrCat("--postgres_password_file=", options.postgres_password_file,
                         " is empty: expected the password on its first line"));
    }
    pg.password = postgres_password_;
    pg.durability = options.durability;
    pg.on_commit = po.observer.on_fsync;
    pg.on_error = [self](const absl::Status& e) {
      // Not retried as if it had succeeded: nothing is acknowledged while PostgreSQL is away;
      // the storage reconnects by itself and on_recovered turns health back.
      self->storage_metrics_->CountError();
      if (self->server_) self->server_->GetHealthCheckService()->SetServingStatus(false);
    };
    if (options.cluster) {
      pg.cluster_node_id = options.node_id;
      pg.on_fenced = [self](const std::vector<std::string>& names) {
        if (auto* m = self->cluster_metrics_impl_.load())
          m->CountFencingRefusal(static_cast<int64_t>(names.size()));
        if (auto* node = self->cluster_ptr_.load()) node->OnFenced(names);
      };
    }
    pg.require_synchronous_standby = options.postgres_require_sync_standby;
    pg.loaded_instances = [self] {
      std::vector<std::string> names;
      for (const auto& inst : self->service_->registry().All()) names.push_back(inst->name());
      return names;
    };
    pg.on_diverged = [self](const std::vector<PostgresStorageOptions::Divergence>& diverged) {
      // Never served from memory again: the database does not hold what this copy holds.
      // Calls still holding the copy are answered UNAVAILABLE (released), later ones DATA_LOSS.
      self->storage_metrics_->CountDiverged(static_cast<int64_t>(diverged.size()));
      std::map<std::string, std::shared_ptr<Instance>> loaded;
      for (auto& inst : self->service_->registry().All()) loaded[inst->name()] = inst;
      for (const auto& d : diverged) {
        self->service_->registry().Refuse(d.instance, absl::DataLossError(d.why));
        if (auto it = loaded.find(d.instance); it != loaded.end()) it->second->MarkReleased();
      }
    };
    pg.on_recovered = [self] {
      BANDIT_LOG_INFO("storage healthy again: reporting SERVING");
      if (self->server_ && !self->shut_down_)
        self->server_->GetHealthCheckService()->SetServingStatus(true);
    };
  }
  absl::StatusOr<BuiltStorage> built = MakeStorage(std::move(settings));
  if (!built.ok()) return built.status();
  fence_ = built->fence;
  storage_description_ = built->description;
  absl::StatusOr<std::unique_ptr<Persistence>> p =
      Persistence::Open(std::move(built->storage), po, service_.get(), &recovery_);
  if (!p.ok()) return p.status();
  persistence_ = *std::move(p);
  snapshot_age_ = StorageMetrics::AgeCollector(persistence_.get(), options.clock);
  return absl::OkStatus();
}

absl::Status BanditServer::LoadAuth() {
  if (options_.tokens_file.empty()) return absl::OkStatus();
  auto auth = Authorizer::FromFile(options_.tokens_file, options_.fs);
  if (!auth.ok()) return auth.status();
  auth_ = *std::move(auth);
  BANDIT_LOG_INFO("auth: ", auth_->size(), " tokens from --tokens_file=", options_.tokens_file,
                  " (admin ", auth_->count(Role::kAdmin), ", writer ", auth_->count(Role::kWriter),
                  ", reader ", auth_->count(Role::kReader), ")");
  return absl::OkStatus();
}

absl::Status BanditServer::StartGrpc() {
  const ServerOptions& options = options_;
  auto creds = MakeServerCredentials(options.tls, options.fs);
  if (!creds.ok()) return creds.status();
  if (!IsLoopbackListen(options.listen)) {
    if (!options.tls.enabled())
      BANDIT_LOG_WARN("listening on non-loopback address ", options.listen, " WITHOUT TLS: traffic",
                      auth_ ? " (including bearer tokens)" : "",
                      " is plaintext; set --tls_cert and --tls_key");
    if (!auth_)
      BANDIT_LOG_WARN("listening on non-loopback address ", options.listen,
                      " WITHOUT authentication: anyone who reaches the port is admin; set "
                      "--tokens_file");
  }
  if (options.cluster) {
    // The one routing module both front doors call; it answers "joining" until StartCluster
    // hands it the cluster node.
    cluster::RouterOptions ro;
    ro.forward_deadline = std::chrono::milliseconds(options.forward_deadline_ms);
    router_ = std::make_unique<cluster::Router>(ro);
  }
  grpc_service_ = std::make_unique<GrpcBanditService>(service_.get(), metrics_.get(), auth_.get(),
                                                      router_.get());
  if (options.cluster) {
    auto metrics = std::make_shared<cluster::ClusterMetrics>(
        [router = router_.get()] { return router->forwarded_calls(); });
    cluster_metrics_impl_.store(metrics.get());
    cluster_metrics_ = metrics;
    // A name not loaded here: the cluster decides (claim and load it, or UNAVAILABLE naming
    // the owner for the calls that are not forwarded whole, e.g. a mixed batch's items).
    service_->registry().SetMissHandler([self = this](const std::string& name) {
      cluster::ClusterNode* node = self->cluster_ptr_.load();
      if (node == nullptr) return absl::UnavailableError("this node is joining the cluster; retry");
      auto route = node->RouteFor(name, /*create=*/false, /*forwarded=*/true);
      if (!route.ok()) return route.status();
      return absl::OkStatus();
    });
  }
  durable_wait_ = StorageMetrics::DurableWaitCollector(
      [grpc = grpc_service_.get()] { return grpc->OldestDurableWaitSeconds(); });
  if (!options.config_path.empty() && !options.cluster) {
    if (auto st = LoadConfig(options.config_path); !st.ok()) return st;
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, *creds, &port_);
  builder.RegisterService(grpc_service_.get());
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                             static_cast<int>(options.keepalive_time_ms));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             static_cast<int>(options.keepalive_timeout_ms));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // gRPC sets SO_REUSEPORT by default, so a second banditd (a double start, a restart whose old
  // process has not exited) would bind the same port and the kernel would split connections
  // between two servers of different state. One process per port: the second one fails here.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0)
    return absl::UnavailableError(absl::StrCat("cannot listen on --listen=", options.listen));
  // SERVING only if storage accepts writes (PostgreSQL may have gone away since recovery: the
  // storage's on_recovered turns it on then).
  server_->GetHealthCheckService()->SetServingStatus(persistence_ == nullptr ||
                                                     persistence_->storage()->health().ok());
  return absl::OkStatus();
}

absl::Status BanditServer::StartMetrics() {
  if (options_.metrics_listen.empty()) return absl::OkStatus();
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(options_.metrics_listen);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot listen on --metrics_listen=",
                                               options_.metrics_listen, ": ", e.what()));
  }
  exposer_->RegisterCollectable(metrics_->registry());
  exposer_->RegisterCollectable(metrics_->collector());
  if (snapshot_age_) exposer_->RegisterCollectable(snapshot_age_);
  exposer_->RegisterCollectable(durable_wait_);
  if (cluster_metrics_) exposer_->RegisterCollectable(cluster_metrics_);
  const auto ports = exposer_->GetListeningPorts();
  metrics_port_ = ports.empty() ? 0 : ports[0];
  return absl::OkStatus();
}

absl::Status BanditServer::StartHttp() {
  const ServerOptions& options = options_;
  if (options.http_listen.empty()) return absl::OkStatus();
  if (!IsLoopbackListen(options.http_listen) && !options.tls.enabled())
    BANDIT_LOG_WARN("HTTP API on non-loopback address ", options.http_listen,
                    " WITHOUT TLS: keys travel in plaintext; set --tls_cert and --tls_key");
  // Every open HTTP connection holds a file descriptor, and the soft limit is often 1024
  // (systemd's default): raise it to the hard limit, and say so when even that is short.
  const rlim_t wanted = static_cast<rlim_t>(options.http_max_connections) + 1024;
  if (rlimit files{}; getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < wanted) {
    files.rlim_cur = std::min(wanted, files.rlim_max);
    setrlimit(RLIMIT_NOFILE, &files);
    getrlimit(RLIMIT_NOFILE, &files);
    if (files.rlim_cur < wanted)
      BANDIT_LOG_WARN("open files limited to ", files.rlim_cur, " (RLIMIT_NOFILE): fewer than ",
                      "--http_max_connections=", options.http_max_connections,
                      " connections can be open; raise the hard limit (LimitNOFILE=, ulimit -Hn)");
  }
  http_metrics_ = std::make_unique<http::HttpMetrics>(*metrics_->registry());
  personalizer_ = std::make_unique<http::PersonalizerApi>(service_.get(), auth_.get(),
                                                         options.personalizer, router_.get());
  http::HttpServerOptions http_options;
  http_options.listen = options.http_listen;
  http_options.tls = options.tls;
  http_options.max_body_bytes = options.max_message_bytes;
  http_options.threads = options.http_threads;
  http_options.io_threads = options.http_io_threads;
  http_options.rounds_on_io_threads = options.http_rounds_on_io_threads;
  http_options.header_timeout = absl::Milliseconds(options.http_header_timeout_ms);
  http_options.body_timeout = absl::Milliseconds(options.http_body_timeout_ms);
  http_options.idle_timeout = absl::Milliseconds(options.http_idle_timeout_ms);
  http_options.write_timeout = absl::Milliseconds(options.http_write_timeout_ms);
  http_options.max_connections = options.http_max_connections;
  http_options.max_connections_per_address = options.http_max_connections_per_address;
  auto http = http::HttpServer::Start(http_options, personalizer_.get(), http_metrics_.get());
  if (!http.ok()) return http.status();
  http_ = *std::move(http);
  return absl::OkStatus();
}

void BanditServer::StartSweeper() {
  sweeper_ = std::thread([srv = this] {
    auto last_trim = std::chrono::steady_clock::now();
    auto last_auto = std::chrono::steady_clock::now() - std::chrono::seconds(1);
    while (!srv->stop_.WaitForNotificationWithTimeout(
        absl::Milliseconds(srv->options_.expiry_sweep_ms))) {
      srv->service_->ExpireAll();
      // Automatic optimizations due (their frequencies are minutes at the least): once a second.
      if (std::chrono::steady_clock::now() - last_auto >= std::chrono::seconds(1)) {
        srv->service_->StartDueAutoOptimizations();
        last_auto = std::chrono::steady_clock::now();
      }
      // At the memory budget (something was refused since the last sweep), after large frees,
      // or once a minute, the allocator's free pages go back to the system
      // (server/instance/memory_budget.h).
      if (srv->service_->memory()->TakeTrimWanted() ||
          std::chrono::steady_clock::now() - last_trim > std::chrono::minutes(1)) {
        TrimAllocator();
        last_trim = std::chrono::steady_clock::now();
      }
    }
  });
}

void BanditServer::LogStarted() const {
  const ServerOptions& options = options_;
  BANDIT_LOG_INFO(
      "banditd listening on ", options.listen, " (port ", port_, "), metrics on ",
      options.metrics_listen.empty() ? "(off)" : options.metrics_listen, " (port ", metrics_port_,
      "), storage=", persistence_ ? storage_description_ : "off",
      ", max_message_bytes=", options.max_message_bytes,
      ", keepalive_time_ms=", options.keepalive_time_ms,
      ", keepalive_timeout_ms=", options.keepalive_timeout_ms,
      ", grace_period_ms=", options.grace_period_ms,
      ", durability=", options.persistent ? DurabilityName(options.durability) : "off", ", tls=",
      !options.tls.enabled()               ? "off"
      : options.tls.client_ca_path.empty() ? "on"
                                           : "mutual",
      ", auth=", auth_ ? "tokens" : "off");
  const ServiceLimits& l = options.limits;
  BANDIT_LOG_INFO(
      "limits: max_instances=", l.max_instances, ", max_batch_items=", l.max_batch_items,
      ", max_page_size=", l.max_page_size, ", max_candidates=", l.instance.max_candidates,
      ", max_vector_size=", l.instance.max_vector_size,
      ", max_feature_dim=", l.instance.max_feature_dim,
      ", max_diagonal_feature_dim=", l.instance.max_diagonal_feature_dim,
      ", max_arms=", l.instance.max_arms,
      ", max_arms_per_request=", l.instance.max_arms_per_request,
      ", max_pending_capacity=", l.instance.max_pending_capacity,
      ", max_name_length=", l.instance.max_name_length, ", max_shadows=", l.instance.max_shadows,
      ", max_memory_bytes=", l.max_memory_bytes,
      l.max_memory_bytes == 0 ? " (no limit)" : "");
}

absl::Status BanditServer::StartCluster() {
  cluster::ClusterOptions co;
  co.node_id = options_.node_id;
  co.advertise = options_.advertise;
  if (co.advertise.empty()) {
    std::string host = options_.listen.substr(0, options_.listen.rfind(':'));
    if (host.empty() || host == "0.0.0.0" || host == "[::]" || host == "::") host = HostName();
    co.advertise = absl::StrCat(host, ":", port_);
  }
  co.lease = std::chrono::milliseconds(options_.lease_ms);
  co.dsn = options_.postgres_dsn;
  co.password = postgres_password_;
  co.uids = options_.uids;
  cluster::ClusterNode::Hooks hooks;
  Persistence* p = persistence_.get();
  DecisionService* service = service_.get();
  // A node without room for an instance it is asked to own refuses it before building it
  // (LoadInstance admits the footprint its stored config declares, then charges what was
  // built); the cluster node then leaves it to the next node in placement order.
  hooks.load = [p](const std::string& name, uint64_t* max_seq, int64_t* needed_bytes) {
    return p->LoadInstance(name, max_seq, needed_bytes);
  };
  hooks.add = [service](std::shared_ptr<Instance> inst) {
    const std::string name = inst->name();
    if (auto s = service->registry().Add(std::move(inst)); !s.ok()) return s;
    // Its evaluations still pending (their jobs were on the node it left) run here from the start.
    service->ResumeEvaluations(name);
    return absl::OkStatus();
  };
  hooks.has_room = [service](int64_t bytes) { return bytes <= service->memory()->left(); };
  hooks.drop = [service](const std::string& name) {
    // The dropped copy refuses calls still holding it: a later claim of the same instance by
    // this node loads a new copy from storage, which would not contain their changes.
    if (auto inst = service->registry().Take(name)) inst->MarkReleased();
  };
  hooks.snapshot = [p](const std::string& name) { return p->SnapshotOne(name); };
  hooks.on_takeover = [m = cluster_metrics_impl_.load()](double seconds) {
    if (m) m->ObserveTakeover(seconds);
  };
  if (fence_ == nullptr)
    return absl::FailedPreconditionError(
        "--cluster needs a storage backend the nodes share (--storage=postgres)");
  auto node = cluster::ClusterNode::Start(co, fence_, std::move(hooks));
  if (!node.ok()) return node.status();
  cluster_ = *std::move(node);
  cluster_ptr_.store(cluster_.get());
  if (auto* m = cluster_metrics_impl_.load()) m->SetNode(cluster_.get());
  router_->SetNode(cluster_.get());
  return absl::OkStatus();
}

absl::Status BanditServer::LoadConfig(const std::string& path) {
  auto text = options_.fs->ReadFile(path);
  if (!text.ok())
    return absl::NotFoundError(
        absl::StrCat("cannot read --config=", path, ": ", text.status().message()));
  bandit::v1::ServerConfig config;
  if (!google::protobuf::TextFormat::ParseFromString(*text, &config))
    return absl::InvalidArgumentError(
        absl::StrCat("--config=", path, " is not a text-format bandit.v1.ServerConfig"));
  for (const auto& req : config.instances()) {
    bandit::v1::Instance out;
    if (cluster_ != nullptr) {
      // Created by whichever node the name is placed on (this one claims it if it is free);
      // an instance another node already owns is left to it.
      auto route = cluster_->RouteFor(req.name(), /*create=*/true, /*forwarded=*/false);
      if (!route.ok() || !route->local) continue;
    }
    absl::Status st = service_->CreateInstance(req, &out);
    if (st.code() == absl::StatusCode::kAlreadyExists) continue;
    if (!st.ok())
      return absl::Status(st.code(), absl::StrCat("--config=", path, ": instance '", req.name(),
                                                  "': ", st.message()));
    BANDIT_LOG_INFO("created instance '", req.name(), "' from ", path);
  }
  return absl::OkStatus();
}

namespace {

// Opens and closes a TCP connection to `host`:`port` (a wildcard host means this machine).
void Knock(std::string host, int port) {
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  if (host == "::") host = "::1";
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const bool connected = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
    close(fd);
    if (connected) break;
  }
  freeaddrinfo(found);
}

}  // namespace

void BanditServer::StopExposer() {
  if (exposer_ == nullptr) return;
  // The exposer's HTTP server (CivetWeb) looks at its stop flag only when the poll of its
  // listening socket returns, and that poll times out every 2 s: stopping it waited up to 2 s
  // (1.7 s measured) on every shutdown. A connection wakes the poll, so knock until it is gone.
  std::string host = options_.metrics_listen.substr(0, options_.metrics_listen.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  absl::Notification stopped;
  std::thread knocker([&, ports = exposer_->GetListeningPorts()] {
    while (!stopped.WaitForNotificationWithTimeout(absl::Milliseconds(20)))
      for (int port : ports) Knock(host, port);
  });
  exposer_.reset();
  stopped.Notify();
  knocker.join();
}

void BanditServer::Shutdown() {
  if (shut_down_ || server_ == nullptr) return;  // never started: nothing to drain
  shut_down_ = true;
  BANDIT_LOG_INFO("shutting down: health NOT_SERVING, draining for up to ",
                  options_.grace_period_ms, " ms");
  if (cluster_ != nullptr) cluster_->BeginLeave();
  server_->GetHealthCheckService()->SetServingStatus(false);
  // New calls are refused from here (gRPC's GOAWAY); a Rounds stream would take requests until
  // the deadline, so each takes no new one and ends once its answers are written.
  grpc_service_->EndStreams(absl::UnavailableError(
      "the server is shutting down: requests on this stream that got no answer were not served; "
      "open a new stream (to another node)"));
  if (http_ != nullptr) http_->StopAccepting();
  const auto deadline =
      std::chrono::system_clock::now() + std::chrono::milliseconds(options_.grace_period_ms);
  // grpc::Server::Shutdown(deadline) cancels what still runs at the deadline, but then waits
  // for every call's reactor to finish: one call whose answer never comes would hold it (and
  // the final snapshot) forever. So it runs on its own thread, and at the deadline the calls
  // still waiting for durability or snapshot I/O are answered here.
  auto drained = std::make_shared<absl::Notification>();
  auto shutting_down = std::make_shared<absl::Notification>();
  std::thread drain([grpc = server_.get(), deadline, drained, shutting_down] {
    shutting_down->Notify();
    grpc->Shutdown(deadline);
    drained->Notify();
  });
  // gRPC's drain also waits for every client connection to close after its GOAWAY, and an idle
  // client may read the GOAWAY only at its next poll (gRPC C++ clients with no call running
  // poll every 5 s), so a shutdown with no call left could wait out the whole grace period.
  // Once no call of this service has been in flight for a few polls, the connections are closed
  // here, as gRPC itself closes them at the deadline (cancelling what else still runs there:
  // health watches, reflection streams).
  shutting_down->WaitForNotification();
  constexpr absl::Duration kPoll = absl::Milliseconds(10);
  constexpr int kIdlePolls = 3;
  int idle_polls = 0;
  bool closed_idle = false;
  while (!drained->WaitForNotificationWithTimeout(kPoll) &&
         std::chrono::system_clock::now() < deadline) {
    idle_polls = grpc_service_->ActiveCalls() == 0 ? idle_polls + 1 : 0;
    if (idle_polls >= kIdlePolls && !closed_idle) {
      grpc_server_cancel_all_calls(server_->c_server());
      closed_idle = true;
    }
  }
  if (drained->WaitForNotificationWithDeadline(absl::FromChrono(deadline))) {
    BANDIT_LOG_INFO("drained: every call was answered within the grace period",
                    closed_idle ? " (then the idle connections were closed)" : "");
  } else {
    const int cut = grpc_service_->CutPendingCalls(absl::UnavailableError(
        "the server is shutting down and its grace period ended before this call was answered; "
        "the change may or may not have been applied"));
    BANDIT_LOG_WARN("grace period of ", options_.grace_period_ms, " ms over: ", cut,
                    " call(s) still in flight cut (answered UNAVAILABLE)");
  }
  // Cut calls finish at once; only a handler stuck inside its own code could still hold gRPC.
  // Do not wait for it beyond a bound: the final snapshot matters more.
  if (drained->WaitForNotificationWithTimeout(absl::Seconds(1))) {
    drain.join();
  } else {
    BANDIT_LOG_ERROR(
        "gRPC shutdown still waits for a handler 1 s after the grace period; "
        "writing the final snapshot without it");
    drain.detach();
    (void)server_.release();  // the detached shutdown still uses it; the process is ending
  }
  // The HTTP requests in flight had the same grace period; those still waiting are cut now.
  if (http_ != nullptr) http_->Drain(absl::FromChrono(deadline));
  // Evaluations still running stop here (journaled pending: the next start runs them again).
  service_->SetEvaluationJobs({});
  evaluations_.reset();
  stop_.Notify();
  if (sweeper_.joinable()) sweeper_.join();
  if (persistence_) {
    if (auto st = persistence_->Close(); !st.ok())
      BANDIT_LOG_ERROR("final snapshot failed: ", st.ToString());
    else
      BANDIT_LOG_INFO("final snapshot written, journal flushed");
  }
  if (cluster_ != nullptr) {
    // Graceful leave: the final round snapshotted every owned instance; releasing the leases
    // now lets the other nodes claim them at once instead of after --lease_ms.
    cluster_ptr_.store(nullptr);
    if (auto st = cluster_->Leave(); !st.ok())
      BANDIT_LOG_ERROR("leaving the cluster failed (the leases expire after --lease_ms): ",
                       st.ToString());
  }
  StopExposer();
  BANDIT_LOG_INFO("shutdown complete");
}

BanditServer::~BanditServer() { Shutdown(); }

}  // namespace bandit::server
