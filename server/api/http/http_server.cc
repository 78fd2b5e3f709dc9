#include "server/api/http/http_server.h"

#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <optional>
#include <type_traits>
#include <utility>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "server/env/log.h"
#include "server/metrics/metrics.h"

namespace bandit::server::http {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

constexpr int kPrecreatedStatuses[] = {200, 201, 204, 400, 401, 403, 404, 405, 429, 500, 503};
// The listening socket's accept queue. A burst of keep-alive clients connecting at once must not
// overflow it: past the queue the kernel drops SYNs and answers with SYN cookies, and a cookie
// connection whose first segment meets the full queue is reset at its next one, after the client
// sent its request (the client sees the connection closed before the response). cpp-httplib,
// the previous listener, listened with a backlog of 5 and lost requests so. The kernel caps this
// at net.core.somaxconn.
constexpr int kListenBacklog = SOMAXCONN;
// A request's header, request line included. Personalizer's requests carry a few short headers;
// the limit bounds what one connection can make the server hold before its request is complete.
constexpr uint32_t kMaxHeaderBytes = 16 << 10;
// The request target (path and query), as cpp-httplib limited it (CPPHTTPLIB_REQUEST_URI_MAX_LENGTH).
constexpr size_t kMaxTargetBytes = 8192;
// What a connection reads at once while it waits for a request to begin: a rank of 50 actions
// (about 10 KB) then arrives in a few reads rather than a dozen growing ones. An idle
// connection's buffer is this size.
constexpr size_t kFirstReadBytes = 4096;
// After the last response on a connection: how long to read and discard what the client still
// sends while it closes its side. Closing a socket with unread data resets the connection, and a
// reset can destroy the response in the client's receive buffer before the client read it.
constexpr auto kLingerTime = std::chrono::seconds(1);
// A connection over a limit: the 503 (and, with TLS, the handshake before it) must be done
// within this, and at most this many are answered at once; beyond, a connection is closed at once.
constexpr auto kRefusalTime = std::chrono::seconds(1);
constexpr int kMaxRefusing = 1024;
// After a failed accept (out of file descriptors): the connection waits in the accept queue,
// and the next try comes after this rather than at once and again.
constexpr auto kAcceptRetry = std::chrono::milliseconds(100);

SteadyClock::duration Chrono(absl::Duration d) {
  return std::chrono::duration_cast<SteadyClock::duration>(absl::ToChronoNanoseconds(d));
}

// Beast's string_body reserves a request's whole Content-Length when its header arrives, so a
// client announcing 16 MB and sending nothing would hold 16 MB until the body deadline; this body
// grows with the bytes that arrived.
struct ArrivedBody {
  using value_type = std::string;
  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(bhttp::header<isRequest, Fields>&, value_type& body) : body_(body) {}
    void init(const boost::optional<std::uint64_t>&, beast::error_code& ec) { ec = {}; }
    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers, beast::error_code& ec) {
      std::size_t n = 0;
      for (const auto b : beast::buffers_range_ref(buffers)) {
        body_.append(static_cast<const char*>(b.data()), b.size());
        n += b.size();
      }
      ec = {};
      return n;
    }
    void finish(beast::error_code& ec) { ec = {}; }

   private:
    value_type& body_;
  };
};

int HexValue(char c) {
  return absl::ascii_isdigit(c) ? c - '0' : absl::ascii_tolower(c) - 'a' + 10;
}

// The path of a request target: without the query, percent-decoded ('+' stays '+').
std::string PathOf(beast::string_view target) {
  const beast::string_view path = target.substr(0, target.find('?'));
  std::string out;
  out.reserve(path.size());
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '%' && i + 2 < path.size() && absl::ascii_isxdigit(path[i + 1]) &&
        absl::ascii_isxdigit(path[i + 2])) {
      out.push_back(static_cast<char>(HexValue(path[i + 1]) * 16 + HexValue(path[i + 2])));
      i += 2;
    } else {
      out.push_back(path[i]);
    }
  }
  return out;
}

bool IsParseError(const beast::error_code& ec) {
  return ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category();
}

// A request the listener refuses before routing it, in Personalizer's shape.
ApiError PayloadTooLarge(int64_t max_body) {
  return {400, "PayloadSizeExceeded",
          absl::StrCat("the request body is larger than ", max_body, " bytes (--max_message_bytes)"),
          ""};
}
ApiError NotWellFormed(beast::string_view method, beast::string_view target) {
  return {400, "BadRequest",
          absl::StrCat("the request is not well-formed HTTP (", std::string(method), " ",
                       PathOf(target.substr(0, 200)), ")"),
          ""};
}

// The threads requests are handled on: PersonalizerApi::Handle may wait for durability, which
// must not stall the I/O threads' reads, writes and accepts. A request goes to the thread that
// became idle last (its stack and caches are the warmest), and a few threads serve a light
// load while the rest sleep.
class HandlerPool {
 public:
  explicit HandlerPool(int threads) : workers_(threads) {
    for (Worker& w : workers_) w.thread = std::thread([this, &w] { Work(&w); });
  }
  ~HandlerPool() { Stop(); }
  void Submit(std::function<void()> task) {
    absl::MutexLock lock(&mu_);
    if (idle_.empty()) {
      queue_.push_back(std::move(task));
      return;
    }
    Worker* w = idle_.back();
    idle_.pop_back();
    w->task = std::move(task);
    w->wake.Signal();
  }
  // Runs what is queued, then ends the threads.
  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      stopping_ = true;
      for (Worker* w : idle_) w->wake.Signal();
    }
    for (Worker& w : workers_) w.thread.join();
  }

 private:
  struct Worker {
    std::thread thread;
    absl::CondVar wake;
    std::function<void()> task;  // handed over by Submit while the worker is idle
  };
  void Work(Worker* w) {
    for (;;) {
      std::function<void()> task;
      {
        absl::MutexLock lock(&mu_);
        if (!queue_.empty()) {
          task = std::move(queue_.front());
          queue_.pop_front();
        } else if (stopping_) {
          return;
        } else {
          idle_.push_back(w);
          while (!w->task && !stopping_) w->wake.Wait(&mu_);
          if (!w->task) {  // stopping: leave the idle list, then run what is queued
            idle_.erase(std::find(idle_.begin(), idle_.end(), w));
            continue;
          }
          task = std::move(w->task);
          w->task = nullptr;
        }
      }
      task();
    }
  }
  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<Worker*> idle_ ABSL_GUARDED_BY(mu_);  // the last to become idle at the back
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Worker> workers_;
};

// What the drain does to a connection, on the connection's own strand.
class ConnectionBase : public std::enable_shared_from_this<ConnectionBase> {
 public:
  virtual ~ConnectionBase() = default;
  // Closes the connection if it waits for a request to begin (an idle keep-alive connection).
  virtual void CloseIfIdle() = 0;
  // Closes the connection unless its request is being handled (then its answer is written).
  virtual void CloseUnlessHandling() = 0;
};

}  // namespace

class HttpDoor {
 public:
  HttpDoor(const HttpServerOptions& options, PersonalizerApi* api, HttpMetrics* metrics)
      : options_(options),
        api_(api),
        metrics_(metrics),
        io_(std::in_place, options.io_threads),
        acceptor_(std::in_place, net::make_strand(*io_)),
        accept_retry_(std::in_place, acceptor_->get_executor()),
        work_(std::in_place, io_->get_executor()) {}
  ~HttpDoor() {
    Drain(absl::Now());
    // Handlers still queued (connections refused over a limit, ending) are destroyed here, while
    // the members they use are alive.
    work_.reset();
    accept_retry_.reset();
    acceptor_.reset();
    io_.reset();
  }

  absl::Status Open();
  void Run();
  int port() const { return port_; }
  void StopAccepting();
  void Drain(absl::Time deadline);

  // For the connections.
  const HttpServerOptions& options() const { return options_; }
  PersonalizerApi* api() const { return api_; }
  HttpMetrics* metrics() const { return metrics_; }
  bool draining() const { return draining_.load(std::memory_order_acquire); }
  void Submit(std::function<void()> task) { pool_->Submit(std::move(task)); }
  void Cut(Deadline which) {
    if (metrics_ != nullptr) metrics_->Cut(which);
  }
  void Ended(ConnectionBase* connection, const std::string& address, bool admitted);

 private:
  void Accept();
  void OnAccept(const beast::error_code& ec, tcp::socket socket);
  void Admit(tcp::socket socket);
  template <class Stream>
  void Serve(tcp::socket socket, std::string address, std::optional<Refusal> refusal);
  void ForEachConnection(void (ConnectionBase::*what)());
  bool AllEnded() const ABSL_SHARED_LOCKS_REQUIRED(mu_) { return open_ == 0; }

  const HttpServerOptions options_;
  PersonalizerApi* const api_;
  HttpMetrics* const metrics_;
  std::optional<net::io_context> io_;
  std::optional<net::ssl::context> tls_;
  std::optional<tcp::acceptor> acceptor_;
  std::optional<net::steady_timer> accept_retry_;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work_;
  std::vector<std::thread> io_threads_;
  std::unique_ptr<HandlerPool> pool_;
  int port_ = 0;
  std::atomic<bool> draining_{false};
  std::atomic<bool> stopped_accepting_{false};
  std::atomic<bool> drained_{false};
  bool running_ = false;  // Run() was called: the I/O threads run

  absl::Mutex mu_;
  int open_ ABSL_GUARDED_BY(mu_) = 0;
  int refusing_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, int> per_address_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<ConnectionBase*, std::weak_ptr<ConnectionBase>> connections_
      ABSL_GUARDED_BY(mu_);
};

namespace {

// One connection. Every member function but Handle runs on the connection's strand (the
// executor of its socket): reads, writes and their deadlines never run at once. Handle runs on
// a handler thread while the strand does nothing with the connection (state kHandling), and
// hands the answer back by posting to the strand; a round that waits on nothing is handled on
// the strand itself (HttpServerOptions::rounds_on_io_threads).
template <class Stream>
class Connection : public ConnectionBase {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  template <class... StreamArgs>
  Connection(HttpDoor* door, std::string address, std::optional<Refusal> refusal,
             StreamArgs&&... stream_args)
      : door_(door),
        stream_(std::forward<StreamArgs>(stream_args)...),
        address_(std::move(address)),
        refusal_(refusal) {}
  ~Connection() override { door_->Ended(this, address_, !refusal_.has_value()); }

  void Start() {
    net::dispatch(stream_.get_executor(), [self = Self()] { self->Begin(); });
  }
  void CloseIfIdle() override {
    net::post(stream_.get_executor(), [self = Self()] {
      if (self->state_ == State::kIdle) self->Tcp().cancel();
    });
  }
  void CloseUnlessHandling() override {
    net::post(stream_.get_executor(), [self = Self()] {
      if (self->state_ != State::kHandling) self->Tcp().cancel();
    });
  }

 private:
  enum class State { kHandshake, kIdle, kHeader, kBody, kHandling, kWriting, kClosing };

  std::shared_ptr<Connection> Self() {
    return std::static_pointer_cast<Connection>(shared_from_this());
  }
  beast::tcp_stream& Tcp() { return beast::get_lowest_layer(stream_); }
  const HttpServerOptions& options() const { return door_->options(); }

  void Begin() {
    // A new connection's first request (its TLS handshake included) is due within the header
    // deadline of the accept; a refused one's answer within kRefusalTime.
    if (refusal_)
      Tcp().expires_after(kRefusalTime);
    else
      Tcp().expires_after(Chrono(options().header_timeout));
    if constexpr (kTls) {
      state_ = State::kHandshake;
      stream_.async_handshake(net::ssl::stream_base::server,
                              [self = Self()](beast::error_code ec) { self->OnHandshake(ec); });
    } else {
      OnHandshake({});
    }
  }

  void OnHandshake(beast::error_code ec) {
    if (ec) {
      if (ec == beast::error::timeout && !refusal_) door_->Cut(Deadline::kHeader);
      return Close();
    }
    if (refusal_) return Refuse();
    WaitForRequest();
  }

  // Over a limit: 503 with Personalizer's body, then close.
  void Refuse() {
    const bool total = *refusal_ == Refusal::kMaxConnections;
    const ApiError e{
        503, "ServiceUnavailable",
        total ? absl::StrCat("the server has ", options().max_connections,
                             " HTTP connections open, its limit (--http_max_connections); retry "
                             "later")
              : absl::StrCat("this client address has ", options().max_connections_per_address,
                             " HTTP connections open, the limit per address "
                             "(--http_max_connections_per_address); reuse a connection or retry "
                             "later"),
        ""};
    Answer(e, Route::kUnmatched, /*observe=*/true);
  }

  // The next request: at once if it already arrived (pipelined), else when its first byte does.
  void WaitForRequest() {
    if (door_->draining()) return Close();
    if (buffer_.size() > 0) return ReadHeader();
    state_ = State::kIdle;
    // An idle connection holds a small buffer, whatever its last request needed.
    buffer_.shrink_to_fit();
    if (!first_) Tcp().expires_after(Chrono(options().idle_timeout));
    stream_.async_read_some(buffer_.prepare(kFirstReadBytes),
                            [self = Self()](beast::error_code ec, std::size_t n) {
                              self->OnFirstBytes(ec, n);
                            });
  }

  void OnFirstBytes(beast::error_code ec, std::size_t n) {
    if (ec == beast::error::timeout) door_->Cut(first_ ? Deadline::kHeader : Deadline::kIdle);
    if (ec) return Close();  // timed out, closed by the client, or by the drain
    buffer_.commit(n);
    ReadHeader();
  }

  void ReadHeader() {
    state_ = State::kHeader;
    // The whole header within the deadline of its first byte (of the accept, on a new
    // connection: that deadline runs already). Not an inactivity timeout: a client sending a
    // byte now and then is cut as one sending nothing.
    if (!first_) Tcp().expires_after(Chrono(options().header_timeout));
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    parser_->body_limit(static_cast<uint64_t>(options().max_body_bytes));
    bhttp::async_read_header(
        stream_, buffer_, *parser_,
        [self = Self()](beast::error_code ec, std::size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    first_ = false;
    if (ec == beast::error::timeout) {
      door_->Cut(Deadline::kHeader);
      return Close();
    }
    if (ec) return RefuseRequest(ec);
    const auto& req = parser_->get();
    if (req.target().size() > kMaxTargetBytes)
      return Answer({400, "BadRequest", "the request line is too long", ""}, Route::kUnmatched,
                    /*observe=*/true);
    if (parser_->is_done()) return Dispatch();
    state_ = State::kBody;
    Tcp().expires_after(Chrono(options().body_timeout));
    if (beast::iequals(req[bhttp::field::expect], "100-continue")) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      net::async_write(stream_, net::buffer(kContinue),
                       [self = Self()](beast::error_code ec, std::size_t) {
                         if (ec) return self->OnBody(ec);
                         self->ReadBody();
                       });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = Self()](beast::error_code ec, std::size_t) { self->OnBody(ec); });
  }

  void OnBody(beast::error_code ec) {
    if (ec == beast::error::timeout) {
      door_->Cut(Deadline::kBody);
      return Close();
    }
    if (ec) return RefuseRequest(ec);
    Dispatch();
  }

  // A request that could not be read whole: answered 400 in Personalizer's shape if it was not
  // well-formed or too large, else (the client left, the drain closed it) the connection ends.
  void RefuseRequest(const beast::error_code& ec) {
    if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
        !IsParseError(ec))
      return Close();
    const auto& req = parser_->get();
    const Route route = PersonalizerApi::RouteOf(PathOf(req.target()));
    if (ec == bhttp::error::body_limit)
      return Answer(PayloadTooLarge(options().max_body_bytes), route, /*observe=*/true);
    if (ec == bhttp::error::header_limit) {
      // The request line alone is over the limit when the buffer holds no line end.
      const auto data = buffer_.cdata();
      const beast::string_view got(static_cast<const char*>(data.data()), data.size());
      const bool line = got.find("\r\n") == beast::string_view::npos;
      return Answer({400, "BadRequest",
                     line ? std::string("the request line is too long")
                          : absl::StrCat("the request header is larger than ", kMaxHeaderBytes,
                                         " bytes"),
                     ""},
                    line ? Route::kUnmatched : route, /*observe=*/true);
    }
    Answer(NotWellFormed(req.method_string(), req.target()), route, /*observe=*/true);
  }

  // The request is whole: hand it to a handler thread; reads stop until it is answered, so
  // pipelined requests are answered in order.
  void Dispatch() {
    state_ = State::kHandling;
    Tcp().expires_never();
    auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    head_ = req.method() == bhttp::verb::head;
    method_ = head_ ? "GET" : std::string(req.method_string());
    path_ = PathOf(req.target());
    const auto key = req.find("Ocp-Apim-Subscription-Key");
    has_key_ = key != req.end();
    if (has_key_) key_ = std::string(key->value());
    body_ = std::move(req.body());
    parser_.reset();
    if (options().rounds_on_io_threads && door_->api()->ServesWithoutWaiting(method_, path_)) {
      Handle(/*on_strand=*/true);
      return;
    }
    door_->Submit([self = Self()] { self->Handle(/*on_strand=*/false); });
  }

  // On a handler thread, or on the strand for a request that waits on nothing (Dispatch).
  void Handle(bool on_strand) {
    const auto start = SteadyClock::now();
    ApiRequest request;
    request.method = method_;
    request.path = path_;
    request.key = has_key_ ? &key_ : nullptr;
    request.body = body_;
    ApiResponse answer;
    try {
      answer = door_->api()->Handle(request);
    } catch (const std::exception&) {
      answer.status = 500;
      answer.body = ErrorBody({500, "InternalServerError", "the request failed", ""});
    }
    std::string().swap(body_);
    response_ = {};
    response_.version(version_);
    response_.result(static_cast<unsigned>(answer.status));
    for (auto& [name, value] : answer.headers) response_.set(name, value);
    if (!answer.content_type.empty()) {
      response_.set(bhttp::field::content_type, answer.content_type);
      response_.body() = std::move(answer.body);
    }
    // No payload headers on 1xx, 204 and 304; a HEAD answer tells the GET body's length.
    const int status = answer.status;
    if (status >= 200 && status != 204 && status != 304) {
      response_.prepare_payload();
      if (head_) response_.body().clear();
    } else {
      response_.body().clear();
    }
    if (HttpMetrics* metrics = door_->metrics())
      metrics->Observe(answer.route, answer.status,
                       std::chrono::duration<double>(SteadyClock::now() - start).count());
    auto write = [self = Self()] { self->Write(self->keep_alive_ && !self->door_->draining()); };
    if (on_strand)
      write();
    else
      net::post(stream_.get_executor(), std::move(write));
  }

  // An answer the listener makes itself; the connection closes after it (what follows the
  // refused request on the stream cannot be trusted).
  void Answer(const ApiError& e, Route route, bool observe) {
    response_ = {};
    response_.version(11);
    response_.result(static_cast<unsigned>(e.http_status));
    response_.set(bhttp::field::content_type, "application/json; charset=utf-8");
    response_.body() = ErrorBody(e);
    response_.prepare_payload();
    if (observe && door_->metrics() != nullptr)
      door_->metrics()->Observe(route, e.http_status, 0);
    parser_.reset();
    Write(/*keep_alive=*/false);
  }

  void Write(bool keep_alive) {
    state_ = State::kWriting;
    response_.keep_alive(keep_alive);
    if (!refusal_) Tcp().expires_after(Chrono(options().write_timeout));
    bhttp::async_write(stream_, response_,
                       [self = Self(), keep_alive](beast::error_code ec, std::size_t) {
                         self->OnWritten(ec, keep_alive);
                       });
  }

  void OnWritten(beast::error_code ec, bool keep_alive) {
    if (ec == beast::error::timeout && !refusal_) door_->Cut(Deadline::kWrite);
    if (ec) return Close();
    response_ = {};
    if (!keep_alive) return Shutdown();
    WaitForRequest();
  }

  // The last response is written: close our side, and read (discarding) until the client closes
  // its own or kLingerTime passed.
  void Shutdown() {
    state_ = State::kClosing;
    Tcp().expires_after(kLingerTime);
    if constexpr (kTls) {
      stream_.async_shutdown([self = Self()](beast::error_code) { self->Close(); });
    } else {
      beast::error_code ignored;
      Tcp().socket().shutdown(tcp::socket::shutdown_send, ignored);
      Linger();
    }
  }

  void Linger() {
    buffer_.consume(buffer_.size());
    stream_.async_read_some(buffer_.prepare(kFirstReadBytes),
                            [self = Self()](beast::error_code ec, std::size_t) {
                              if (ec) return self->Close();
                              self->Linger();
                            });
  }

  void Close() {
    state_ = State::kClosing;
    beast::error_code ignored;
    Tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
    Tcp().close();
  }

  HttpDoor* const door_;
  Stream stream_;
  const std::string address_;
  const std::optional<Refusal> refusal_;
  State state_ = State::kHandshake;
  bool first_ = true;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<ArrivedBody>> parser_;
  // The request as handed to the handler, and its answer.
  bool keep_alive_ = false;
  bool head_ = false;
  unsigned version_ = 11;
  std::string method_, path_, key_, body_;
  bool has_key_ = false;
  bhttp::response<bhttp::string_body> response_;
};

}  // namespace

absl::Status HttpDoor::Open() {
  const size_t colon = options_.listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(options_.listen.substr(colon + 1), &port) ||
      port < 0 || port > 65535)
    return absl::InvalidArgumentError(
        absl::StrCat("--http_listen=", options_.listen, " is not host:port"));
  std::string host = options_.listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "0.0.0.0";
  if (options_.tls.enabled()) {
    // As the gRPC port: the certificate chain and key; with a client CA, a client must present a
    // certificate it signed, checked in the handshake.
    tls_.emplace(net::ssl::context::tls_server);
    tls_->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                      net::ssl::context::no_sslv3 | net::ssl::context::no_compression);
    beast::error_code ec;
    tls_->use_certificate_chain_file(options_.tls.cert_path, ec);
    if (!ec) tls_->use_private_key_file(options_.tls.key_path, net::ssl::context::pem, ec);
    if (!ec && !options_.tls.client_ca_path.empty()) {
      tls_->load_verify_file(options_.tls.client_ca_path, ec);
      if (!ec)
        tls_->set_verify_mode(
            net::ssl::verify_peer | net::ssl::verify_fail_if_no_peer_cert, ec);
    }
    if (ec)
      return absl::InvalidArgumentError(absl::StrCat(
          "--http_listen: the TLS files (--tls_cert=", options_.tls.cert_path, ", --tls_key",
          options_.tls.client_ca_path.empty() ? "" : ", --tls_client_ca",
          ") could not be loaded as PEM certificate and key: ", ec.message()));
  }
  beast::error_code ec;
  tcp::resolver resolver(*io_);
  const auto addresses = resolver.resolve(host, std::to_string(port),
                                          tcp::resolver::passive | tcp::resolver::numeric_service,
                                          ec);
  if (ec)
    return absl::InvalidArgumentError(absl::StrCat("--http_listen=", options_.listen, ": host ",
                                                   host, " not found: ", ec.message()));
  std::string why = "no address";
  for (const auto& entry : addresses) {
    // SO_REUSEADDR (a restart binds while the previous process's connections are in TIME_WAIT),
    // never SO_REUSEPORT, which would let a second banditd bind the same port and the kernel
    // split connections between two servers of different state.
    acceptor_->open(entry.endpoint().protocol(), ec);
    if (!ec) acceptor_->set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_->bind(entry.endpoint(), ec);
    if (!ec) {
      acceptor_->listen(kListenBacklog, ec);
      if (ec)
        return absl::UnavailableError(absl::StrCat("--http_listen=", options_.listen,
                                                   ": could not set the accept queue to ",
                                                   kListenBacklog, ": ", ec.message()));
      port_ = acceptor_->local_endpoint().port();
      return absl::OkStatus();
    }
    why = ec.message();
    beast::error_code ignored;
    acceptor_->close(ignored);
  }
  return absl::UnavailableError(
      port == 0 ? absl::StrCat("--http_listen=", options_.listen, ": could not bind a port on ",
                               host, " (", why, ")")
                : absl::StrCat("--http_listen=", options_.listen, ": could not bind (in use?): ",
                               why));
}

void HttpDoor::Run() {
  running_ = true;
  pool_ = std::make_unique<HandlerPool>(options_.threads);
  Accept();
  for (int i = 0; i < options_.io_threads; ++i)
    io_threads_.emplace_back([this] { io_->run(); });
}

void HttpDoor::Accept() {
  acceptor_->async_accept(net::make_strand(*io_),
                          [this](beast::error_code ec, tcp::socket socket) {
                            OnAccept(ec, std::move(socket));
                          });
}

void HttpDoor::OnAccept(const beast::error_code& ec, tcp::socket socket) {
  if (!acceptor_->is_open()) return;  // StopAccepting
  if (ec) {
    // Out of file descriptors, most likely: the connection stays in the accept queue.
    BANDIT_LOG_WARN("HTTP accept failed (", ec.message(), "); retrying in ",
                    std::chrono::duration_cast<std::chrono::milliseconds>(kAcceptRetry).count(),
                    " ms");
    accept_retry_->expires_after(kAcceptRetry);
    accept_retry_->async_wait([this](beast::error_code wait) {
      if (!wait && acceptor_->is_open()) Accept();
    });
    return;
  }
  Admit(std::move(socket));
  Accept();
}

void HttpDoor::Admit(tcp::socket socket) {
  beast::error_code ec;
  const tcp::endpoint remote = socket.remote_endpoint(ec);
  if (ec) return;  // the client already left
  socket.set_option(tcp::no_delay(true), ec);
  std::string address = remote.address().to_string();
  std::optional<Refusal> refusal;
  {
    absl::MutexLock lock(&mu_);
    const auto at = per_address_.find(address);
    if (open_ >= options_.max_connections) {
      refusal = Refusal::kMaxConnections;
    } else if (at != per_address_.end() && at->second >= options_.max_connections_per_address) {
      refusal = Refusal::kMaxConnectionsPerAddress;
    }
    if (!refusal) {
      ++open_;
      ++per_address_[address];
    } else if (refusing_ >= kMaxRefusing) {
      // Answering costs too: past this many answers under way, a connection is just closed.
      if (metrics_ != nullptr) metrics_->Refused(*refusal);
      return;
    } else {
      ++refusing_;
    }
  }
  if (metrics_ != nullptr) {
    if (refusal)
      metrics_->Refused(*refusal);
    else
      metrics_->Opened();
  }
  if (tls_)
    Serve<beast::ssl_stream<beast::tcp_stream>>(std::move(socket), std::move(address), refusal);
  else
    Serve<beast::tcp_stream>(std::move(socket), std::move(address), refusal);
}

template <class Stream>
void HttpDoor::Serve(tcp::socket socket, std::string address, std::optional<Refusal> refusal) {
  std::shared_ptr<Connection<Stream>> connection;
  if constexpr (Connection<Stream>::kTls)
    connection = std::make_shared<Connection<Stream>>(this, std::move(address), refusal,
                                                      std::move(socket), *tls_);
  else
    connection =
        std::make_shared<Connection<Stream>>(this, std::move(address), refusal, std::move(socket));
  if (!refusal) {
    absl::MutexLock lock(&mu_);
    connections_.emplace(connection.get(), connection);
  }
  connection->Start();
}

void HttpDoor::Ended(ConnectionBase* connection, const std::string& address, bool admitted) {
  {
    absl::MutexLock lock(&mu_);
    if (!admitted) {
      --refusing_;
      return;
    }
    connections_.erase(connection);
    --open_;
    if (const auto at = per_address_.find(address); at != per_address_.end() && --at->second == 0)
      per_address_.erase(at);
  }
  if (metrics_ != nullptr) metrics_->Closed();
}

void HttpDoor::ForEachConnection(void (ConnectionBase::*what)()) {
  std::vector<std::shared_ptr<ConnectionBase>> live;
  {
    absl::MutexLock lock(&mu_);
    live.reserve(connections_.size());
    for (const auto& [raw, weak] : connections_)
      if (auto c = weak.lock()) live.push_back(std::move(c));
  }
  for (const auto& c : live) ((*c).*what)();
}

void HttpDoor::StopAccepting() {
  if (stopped_accepting_.exchange(true)) return;
  if (!running_) {
    beast::error_code ignored;
    acceptor_->close(ignored);
    return;
  }
  absl::Notification closed;
  net::post(acceptor_->get_executor(), [this, &closed] {
    beast::error_code ignored;
    acceptor_->close(ignored);
    accept_retry_->cancel();
    closed.Notify();
  });
  closed.WaitForNotification();
}

void HttpDoor::Drain(absl::Time deadline) {
  if (drained_.exchange(true)) return;
  StopAccepting();
  if (!running_) return;
  draining_.store(true, std::memory_order_release);
  // A connection that finishes a request from now on says Connection: close and ends; one that
  // waits for a request to begin ends now.
  ForEachConnection(&ConnectionBase::CloseIfIdle);
  bool ended;
  {
    absl::MutexLock lock(&mu_);
    ended = mu_.AwaitWithDeadline(absl::Condition(this, &HttpDoor::AllEnded), deadline);
  }
  if (!ended) {
    // Requests still waiting for durability are answered 503; connections still sending a
    // request are closed.
    api_->CutWaits();
    ForEachConnection(&ConnectionBase::CloseUnlessHandling);
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &HttpDoor::AllEnded));
  }
  pool_->Stop();
  work_.reset();
  io_->stop();
  for (std::thread& t : io_threads_) t.join();
}

HttpMetrics::HttpMetrics(prometheus::Registry& registry)
    : family_(&prometheus::BuildHistogram()
                   .Name("bandit_http_request_duration_seconds")
                   .Help("Personalizer HTTP API requests by route and HTTP status: latency")
                   .Register(registry)),
      open_(&prometheus::BuildGauge()
                 .Name("bandit_http_connections_open")
                 .Help("HTTP connections open (admitted; those refused over a limit not counted)")
                 .Register(registry)
                 .Add({})) {
  for (int r = 0; r < static_cast<int>(Route::kCount); ++r)
    for (int status : kPrecreatedStatuses) Child(static_cast<Route>(r), status);
  auto& refused = prometheus::BuildCounter()
                      .Name("bandit_http_connections_refused_total")
                      .Help("HTTP connections refused over a limit (answered 503 and closed), by "
                            "the limit: max_connections or max_connections_per_address")
                      .Register(registry);
  refused_[static_cast<int>(Refusal::kMaxConnections)] =
      &refused.Add({{"reason", "max_connections"}});
  refused_[static_cast<int>(Refusal::kMaxConnectionsPerAddress)] =
      &refused.Add({{"reason", "max_connections_per_address"}});
  auto& cut = prometheus::BuildCounter()
                  .Name("bandit_http_connections_cut_total")
                  .Help("HTTP connections closed by a deadline: header (the request header did "
                        "not arrive in time), body, idle (no next request on a keep-alive "
                        "connection), write (the client did not take its response)")
                  .Register(registry);
  cut_[static_cast<int>(Deadline::kHeader)] = &cut.Add({{"reason", "header"}});
  cut_[static_cast<int>(Deadline::kBody)] = &cut.Add({{"reason", "body"}});
  cut_[static_cast<int>(Deadline::kIdle)] = &cut.Add({{"reason", "idle"}});
  cut_[static_cast<int>(Deadline::kWrite)] = &cut.Add({{"reason", "write"}});
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
  s->door_ = std::make_unique<HttpDoor>(options, api, metrics);
  if (absl::Status st = s->door_->Open(); !st.ok()) return st;
  s->door_->Run();
  BANDIT_LOG_INFO("Personalizer HTTP API on ", options.listen, " port ", s->door_->port(),
                  options.tls.enabled() ? " (TLS)" : " (plaintext)", ": ", options.io_threads,
                  " I/O threads, ", options.threads, " handler threads, up to ",
                  options.max_connections, " connections (", options.max_connections_per_address,
                  " per client address), deadlines header ",
                  absl::FormatDuration(options.header_timeout), " body ",
                  absl::FormatDuration(options.body_timeout), " idle ",
                  absl::FormatDuration(options.idle_timeout), " write ",
                  absl::FormatDuration(options.write_timeout), ", bodies up to ",
                  options.max_body_bytes, " bytes");
  return s;
}

int HttpServer::port() const { return door_->port(); }

void HttpServer::StopAccepting() { door_->StopAccepting(); }

void HttpServer::Drain(absl::Time deadline) { door_->Drain(deadline); }

HttpServer::~HttpServer() = default;

}  // namespace bandit::server::http
