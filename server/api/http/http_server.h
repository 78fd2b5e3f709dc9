// The HTTP/JSON listener (--http_listen): Boost.Beast on Boost.Asio. A connection costs memory,
// not a thread: a few I/O threads run every connection's reads and writes as events, and a
// request is handed to a pool of handler threads only once its header and body have arrived;
// its answer is written back by the I/O threads. A client that sends slowly therefore holds
// only its own connection, and deadlines end even that: the whole request header must arrive
// within one deadline from its first byte, the body within another, an idle keep-alive
// connection is closed after a third, a response must be taken within a fourth. Connections in
// all and per client address are limited; beyond a limit a connection is answered 503 with
// Personalizer's error body and closed.
//
// Every request goes to PersonalizerApi, which calls the same DecisionService as the gRPC adapter.
// TLS uses the gRPC port's certificate files. Bodies are limited (--max_message_bytes, like gRPC
// messages), every answer is counted per route and status, and shutdown drains: no new
// connections, idle ones closed, requests in flight finish, and those still waiting for
// durability at the grace period's end are answered 503.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/api/http/personalizer_api.h"
#include "server/api/tls.h"

namespace bandit::server::http {

// Why a connection was refused at accept.
enum class Refusal : int { kMaxConnections, kMaxConnectionsPerAddress, kCount };
// Which deadline ended a connection.
enum class Deadline : int { kHeader, kBody, kIdle, kWrite, kCount };

// bandit_http_request_duration_seconds{route, code}: one histogram child per route and HTTP
// status, the common ones created up front (zero counts visible), the rest on first use.
// bandit_http_connections_open, bandit_http_connections_refused_total{reason} and
// bandit_http_connections_cut_total{reason}: the connections and what ended them early.
class HttpMetrics {
 public:
  explicit HttpMetrics(prometheus::Registry& registry);
  void Observe(Route route, int status, double seconds);
  void Opened() { open_->Increment(); }
  void Closed() { open_->Decrement(); }
  void Refused(Refusal why) { refused_[static_cast<int>(why)]->Increment(); }
  void Cut(Deadline which) { cut_[static_cast<int>(which)]->Increment(); }

  double open() const { return open_->Value(); }
  double refused(Refusal why) const { return refused_[static_cast<int>(why)]->Value(); }
  double cut(Deadline which) const { return cut_[static_cast<int>(which)]->Value(); }

 private:
  prometheus::Histogram& Child(Route route, int status);
  prometheus::Family<prometheus::Histogram>* family_;
  absl::Mutex mu_;
  std::map<std::pair<int, int>, prometheus::Histogram*> children_ ABSL_GUARDED_BY(mu_);
  prometheus::Gauge* open_;
  prometheus::Counter* refused_[static_cast<int>(Refusal::kCount)];
  prometheus::Counter* cut_[static_cast<int>(Deadline::kCount)];
};

struct HttpServerOptions {
  std::string listen;  // host:port; port 0 = any free port
  TlsOptions tls;
  int64_t max_body_bytes = 16 << 20;
  int threads = 64;    // handler threads: requests run at once (a write may wait for an fsync)
  int io_threads = 2;  // threads reading and writing every connection
  // Rounds (rank, reward, activate) that wait on nothing (PersonalizerApi::ServesWithoutWaiting)
  // are served on the I/O thread that read them: two thread hand-offs fewer per request. Off:
  // every request goes to a handler thread, so an administrative call holding an instance's
  // lock for long (a model import, a policy trained on the log) delays only that instance's
  // requests, never the I/O of other connections.
  bool rounds_on_io_threads = true;
  // The whole request header (and, on a new connection, the TLS handshake) must arrive within
  // header_timeout of its first byte (of the accept, on a new connection).
  absl::Duration header_timeout = absl::Seconds(10);
  // The whole body within body_timeout of the header's end.
  absl::Duration body_timeout = absl::Seconds(30);
  // A keep-alive connection waits this long for the next request's first byte.
  absl::Duration idle_timeout = absl::Seconds(2);
  // The client must take a whole response within write_timeout.
  absl::Duration write_timeout = absl::Seconds(30);
  int max_connections = 10'000;
  int max_connections_per_address = 256;
};

class HttpDoor;  // the listener, its connections and threads (http_server.cc)

class HttpServer {
 public:
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           PersonalizerApi* api,
                                                           HttpMetrics* metrics);
  ~HttpServer();

  int port() const;
  // Closes the listening socket: no new connections; requests in flight go on.
  void StopAccepting();
  // Shutdown: stops accepting, closes idle keep-alive connections at once, lets the requests in
  // flight finish until `deadline`, then answers those still waiting for durability 503 (and
  // closes connections still sending a request), and returns once every connection ended.
  void Drain(absl::Time deadline);


 private:
  HttpServer() = default;
  std::unique_ptr<HttpDoor> door_;
};

}  // namespace bandit::server::http
