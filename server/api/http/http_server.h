// The HTTP/JSON listener (--http_listen): cpp-httplib (Debian's libcpp-httplib, 0.11) parses
// HTTP/1.1, terminates TLS with the gRPC port's certificate files and runs requests on its
// thread pool; every request goes to PersonalizerApi, which calls the same DecisionService as
// the gRPC adapter. Bodies are limited (--max_message_bytes, like gRPC messages), every answer is
// counted per route and status, and shutdown drains: no new connections, requests in flight
// finish, and those still waiting for durability at the grace period's end are answered 503.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/api/http/personalizer_api.h"
#include "server/api/tls.h"

namespace httplib {
class Server;
}

namespace bandit::server::http {

// bandit_http_request_duration_seconds{route, code}: one histogram child per route and HTTP
// status, the common ones created up front (zero counts visible), the rest on first use.
class HttpMetrics {
 public:
  explicit HttpMetrics(prometheus::Registry& registry);
  void Observe(Route route, int status, double seconds);

 private:
  prometheus::Histogram& Child(Route route, int status);
  prometheus::Family<prometheus::Histogram>* family_;
  absl::Mutex mu_;
  std::map<std::pair<int, int>, prometheus::Histogram*> children_ ABSL_GUARDED_BY(mu_);
};

struct HttpServerOptions {
  std::string listen;  // host:port; port 0 = any free port
  TlsOptions tls;
  int64_t max_body_bytes = 16 << 20;
  int threads = 64;  // connections served at once (each keep-alive connection holds one)
};

class HttpServer {
 public:
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           PersonalizerApi* api,
                                                           HttpMetrics* metrics);
  ~HttpServer();

  int port() const { return port_; }
  // Closes the listening socket: no new connections; requests in flight go on.
  void StopAccepting();
  // Shutdown: stops accepting, lets the requests in flight finish until `deadline`, then
  // answers those still waiting for durability 503, and returns once every connection ended
  // (an idle keep-alive connection is closed within 2 s).
  void Drain(absl::Time deadline);

 private:
  HttpServer() = default;
  std::unique_ptr<httplib::Server> server_;
  PersonalizerApi* api_ = nullptr;
  HttpMetrics* metrics_ = nullptr;
  std::thread listener_;
  absl::Notification listener_done_;
  std::atomic<bool> stopped_{false};
  int port_ = 0;
};

}  // namespace bandit::server::http
