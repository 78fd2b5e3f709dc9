#include "server/api/http/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/env/log.h"
#include "server/metrics/metrics.h"

namespace bandit::server::http {
namespace {

constexpr int kPrecreatedStatuses[] = {200, 201, 204, 400, 401, 403, 404, 405, 429, 500, 503};
constexpr time_t kKeepAliveSeconds = 2;
// The listening socket's accept queue. cpp-httplib 0.11 listens with a backlog of 5
// (CPPHTTPLIB_LISTEN_BACKLOG, compiled into Debian's library), which keep-alive clients opening
// their connections at once overflow: the kernel drops their SYNs and answers the rest with SYN
// cookies, and a cookie connection whose first segment meets the full queue is reset at its next
// one, after the client sent its request (the client sees the connection closed before the
// response). The kernel caps this at net.core.somaxconn.
constexpr int kListenBacklog = SOMAXCONN;

// The answer to a request the library refused before routing it (too large, malformed), in
// Personalizer's shape. Its 413 becomes Personalizer's 400 PayloadSizeExceeded.
void RenderLibraryError(const httplib::Request& req, httplib::Response& res, int64_t max_body) {
  ApiError e;
  if (res.status == 413 &&
      req.get_header_value("Content-Type") == "application/x-www-form-urlencoded") {
    e = {400, "PayloadSizeExceeded",
         absl::StrCat("a body sent as a form (application/x-www-form-urlencoded) is limited to ",
                      CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH,
                      " bytes; send the JSON as Content-Type: application/json"),
         ""};
  } else if (res.status == 413) {
    e = {400, "PayloadSizeExceeded",
         absl::StrCat("the request body is larger than ", max_body, " bytes (--max_message_bytes)"),
         ""};
  } else if (res.status == 414) {
    e = {400, "BadRequest", "the request line is too long", ""};
  } else if (res.status >= 500) {
    e = {res.status, "InternalServerError", "the request could not be served", ""};
  } else {
    e = {res.status == 404 ? 404 : 400, res.status == 404 ? "ResourceNotFound" : "BadRequest",
         absl::StrCat("the request is not well-formed HTTP (", req.method, " ", req.path, ")"), ""};
  }
  res.status = e.http_status;
  res.set_content(ErrorBody(e), "application/json; charset=utf-8");
}

}  // namespace

HttpMetrics::HttpMetrics(prometheus::Registry& registry)
    : family_(&prometheus::BuildHistogram()
                   .Name("bandit_http_request_duration_seconds")
                   .Help("Personalizer HTTP API requests by route and HTTP status: latency")
                   .Register(registry)) {
  for (int r = 0; r < static_cast<int>(Route::kCount); ++r)
    for (int status : kPrecreatedStatuses) Child(static_cast<Route>(r), status);
}

prometheus::Histogram& HttpMetrics::Child(Route route, int status) {
  absl::MutexLock lock(&mu_);
  prometheus::Histogram*& child = children_[{static_cast<int>(route), status}];
  if (child == nullptr)
    child = &family_->Add({{"route", RouteName(route)}, {"code", absl::StrCat(status)}},
                          LatencyBuckets());
  return *child;
}

void HttpMetrics::Observe(Route route, int status, double seconds) {
  Child(route, status).Observe(seconds);
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              PersonalizerApi* api,
                                                              HttpMetrics* metrics) {
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->api_ = api;
  s->metrics_ = metrics;
  const size_t colon = options.listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(options.listen.substr(colon + 1), &port) ||
      port < 0 || port > 65535)
    return absl::InvalidArgumentError(
        absl::StrCat("--http_listen=", options.listen, " is not host:port"));
  std::string host = options.listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "0.0.0.0";
  if (options.tls.enabled()) {
    auto tls = std::make_unique<httplib::SSLServer>(
        options.tls.cert_path.c_str(), options.tls.key_path.c_str(),
        options.tls.client_ca_path.empty() ? nullptr : options.tls.client_ca_path.c_str());
    if (!tls->is_valid())
      return absl::InvalidArgumentError(
          absl::StrCat("--http_listen: the TLS files (--tls_cert=", options.tls.cert_path,
                       ", --tls_key", options.tls.client_ca_path.empty() ? "" : ", --tls_client_ca",
                       ") could not be loaded as PEM certificate and key"));
    s->server_ = std::move(tls);
  } else {
    s->server_ = std::make_unique<httplib::Server>();
  }
  httplib::Server& server = *s->server_;
  const int threads = options.threads;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_payload_max_length(static_cast<size_t>(options.max_body_bytes));
  server.set_keep_alive_max_count(100'000);
  server.set_keep_alive_timeout(kKeepAliveSeconds);
  server.set_tcp_nodelay(true);
  // The listening socket, to raise its backlog once the library has bound it and listened on it
  // (listen() again on a listening socket only changes the backlog). The library calls this for
  // each address it tries; the last call is the socket that bound. Its options are the library's
  // defaults but SO_REUSEPORT, which would let a second banditd bind the same port and the
  // kernel split connections between two servers of different state: SO_REUSEADDR only.
  auto listen_fd = std::make_shared<int>(-1);
  server.set_socket_options([listen_fd](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    *listen_fd = sock;
  });
  const int64_t max_body = options.max_body_bytes;
  auto handle = [api, metrics](const httplib::Request& req, httplib::Response& res) {
    const auto start = std::chrono::steady_clock::now();
    ApiRequest request;
    request.method = req.method;
    request.path = req.path;
    std::string key;
    if (req.has_header("Ocp-Apim-Subscription-Key")) {
      key = req.get_header_value("Ocp-Apim-Subscription-Key");
      request.key = &key;
    }
    request.body = req.body;
    ApiResponse answer = api->Handle(request);
    res.status = answer.status;
    for (auto& [name, value] : answer.headers) res.set_header(name.c_str(), value);
    if (!answer.content_type.empty())
      res.set_content(std::move(answer.body), answer.content_type.c_str());
    if (metrics != nullptr)
      metrics->Observe(
          answer.route, answer.status,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  };
  server.Get(".*", handle);
  server.Post(".*", handle);
  server.Put(".*", handle);
  server.Delete(".*", handle);
  server.Patch(".*", handle);
  server.Options(".*", handle);
  server.set_error_handler(httplib::Server::HandlerWithResponse(
      [metrics, max_body](const httplib::Request& req, httplib::Response& res) {
        // Answers made by the handler above already have their body; only the library's own
        // refusals (no handler was run) are rendered and counted here.
        if (!res.body.empty() || res.status == 204 || res.status == 405)
          return httplib::Server::HandlerResponse::Unhandled;
        RenderLibraryError(req, res, max_body);
        if (metrics != nullptr) metrics->Observe(PersonalizerApi::RouteOf(req.path), res.status, 0);
        return httplib::Server::HandlerResponse::Handled;
      }));
  server.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        res.status = 500;
        res.set_content(ErrorBody({500, "InternalServerError", "the request failed", ""}),
                        "application/json; charset=utf-8");
      });
  if (port == 0) {
    s->port_ = server.bind_to_any_port(host);
    if (s->port_ <= 0)
      return absl::UnavailableError(
          absl::StrCat("--http_listen=", options.listen, ": could not bind a port on ", host));
  } else {
    if (!server.bind_to_port(host, port))
      return absl::UnavailableError(
          absl::StrCat("--http_listen=", options.listen, ": could not bind (in use?)"));
    s->port_ = port;
  }
  if (::listen(*listen_fd, kListenBacklog) != 0)
    return absl::UnavailableError(absl::StrCat("--http_listen=", options.listen,
                                               ": could not set the accept queue to ",
                                               kListenBacklog, ": ", std::strerror(errno)));
  s->listener_ = std::thread([self = s.get()] {
    self->server_->listen_after_bind();
    self->listener_done_.Notify();
  });
  // stop() only takes effect on a running server: wait until it runs (it starts at once).
  for (int i = 0; i < 5000 && !server.is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  BANDIT_LOG_INFO("Personalizer HTTP API on ", host, ":", s->port_,
                  options.tls.enabled() ? " (TLS)" : " (plaintext)", ", ", threads,
                  " connections at once, bodies up to ", max_body, " bytes");
  return s;
}

void HttpServer::StopAccepting() {
  if (server_ != nullptr && !stopped_.exchange(true)) server_->stop();
}

void HttpServer::Drain(absl::Time deadline) {
  StopAccepting();
  if (!listener_done_.WaitForNotificationWithDeadline(deadline)) api_->CutWaits();
  if (listener_.joinable()) listener_.join();
}

HttpServer::~HttpServer() { Drain(absl::Now()); }

}  // namespace bandit::server::http
