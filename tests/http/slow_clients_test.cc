// The HTTP listener against clients that send slowly or not at all, in process on port 0 with a
// PersonalizerApi over a real DecisionService and short deadlines: a thousand connections that
// sent part of a request and stopped, and a thousand that send a header byte now and then, do
// not keep another client's rank from being answered, and the header deadline cuts all of them
// (a byte now and then does not extend it); a slow body is cut by the body deadline, an idle
// keep-alive connection by the idle timeout; over a connection limit a client is answered 503
// with Personalizer's body; requests the listener refuses itself get Personalizer's 400s;
// pipelined requests are answered in order; the drain closes idle connections at once.
//
// The answer times checked here are behaviour the listener promises (a rank is answered within
// a second while slow clients hold connections; a connection is cut no earlier than its
// deadline and not long after), with margins wide enough for two busy cores.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/api/http/http_server.h"
#include "server/api/http/personalizer_api.h"
#include "server/service/decision_service.h"
#include "tests/common/httplib_client.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using bandit::server::DecisionService;
using bandit::server::http::Deadline;
using bandit::server::http::HttpMetrics;
using bandit::server::http::HttpServer;
using bandit::server::http::HttpServerOptions;
using bandit::server::http::PersonalizerApi;
using bandit::server::http::Refusal;
using Clock = std::chrono::steady_clock;
namespace v1 = bandit::v1;

constexpr char kRankPath[] = "/instances/shop/personalizer/v1.0/rank";
constexpr char kRankBody[] =
    "{\"contextFeatures\":[{\"User\":{\"kind\":\"a\"}}],\"actions\":["
    "{\"id\":\"x\",\"features\":[{\"Action\":{\"id\":\"x\"}}]},"
    "{\"id\":\"y\",\"features\":[{\"Action\":{\"id\":\"y\"}}]}]}";

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// banditd's HTTP door in this process: a service with instance "shop", no authentication.
class Door {
 public:
  explicit Door(HttpServerOptions options,
                const char* config =
                    "policy { linucb {} } feature_space { bits: 6 interactions: 'UA' } seed: 1")
      : metrics_(registry_) {
    v1::CreateInstanceRequest create;
    create.set_name("shop");
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(config, create.mutable_config()));
    v1::Instance out;
    EXPECT_TRUE(service_.CreateInstance(create, &out).ok());
    options.listen = "127.0.0.1:0";
    auto server = HttpServer::Start(options, &api_, &metrics_);
    EXPECT_TRUE(server.ok()) << server.status();
    if (server.ok()) server_ = *std::move(server);
  }
  bool ok() const { return server_ != nullptr; }
  int port() const { return server_->port(); }
  HttpServer& server() { return *server_; }
  const HttpMetrics& metrics() const { return metrics_; }
  int64_t rounds() {
    v1::GetInstanceRequest req;
    req.set_name("shop");
    v1::Instance out;
    EXPECT_TRUE(service_.GetInstance(req, &out).ok());
    return out.stats().rounds();
  }
  // Waits (up to `limit`) until the open-connections gauge reads `n`.
  bool AwaitOpen(int n, absl::Duration limit = absl::Seconds(10)) {
    return Await([&] { return metrics_.open(); }, n, limit);
  }
  // Waits (up to `limit`) until `Deadline` has cut `n` connections. A deadline closes the
  // socket before the server counts it, so a client may see the close first.
  bool AwaitCut(Deadline which, int n, absl::Duration limit = absl::Seconds(10)) {
    return Await([&] { return metrics_.cut(which); }, n, limit);
  }

 private:
  template <typename Value>
  static bool Await(Value value, double n, absl::Duration limit) {
    const absl::Time end = absl::Now() + limit;
    while (value() != n) {
      if (absl::Now() > end) return false;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return true;
  }
  DecisionService service_;
  PersonalizerApi api_{&service_, /*auth=*/nullptr, {}};
  prometheus::Registry registry_;
  HttpMetrics metrics_;
  std::unique_ptr<HttpServer> server_;
};

// A blocking TCP connection to 127.0.0.1:port (-1 if refused).
int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  const int yes = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
  return fd;
}

bool SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// Reads until the peer closes, an error, or `limit`; true if the connection ended (EOF or reset)
// within it. `got` collects what was read.
bool AwaitClose(int fd, absl::Duration limit, std::string* got = nullptr) {
  const absl::Time end = absl::Now() + limit;
  char buf[4096];
  for (;;) {
    const int64_t left = absl::ToInt64Milliseconds(end - absl::Now());
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return true;
    if (got != nullptr) got->append(buf, static_cast<size_t>(n));
  }
}

struct RawResponse {
  int status = 0;  // 0: none (the connection closed or nothing came within the limit)
  std::string head, body;
};

// One HTTP response from `fd` (a Content-Length body); bytes after it stay in `*pending`.
RawResponse ReadResponse(int fd, std::string* pending, absl::Duration limit = absl::Seconds(10)) {
  const absl::Time end = absl::Now() + limit;
  RawResponse r;
  char buf[4096];
  for (;;) {
    const size_t head_end = pending->find("\r\n\r\n");
    if (head_end != std::string::npos) {
      r.head = pending->substr(0, head_end + 4);
      size_t length = 0;
      std::string lower = r.head;
      std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
      if (const size_t at = lower.find("content-length:"); at != std::string::npos) {
        const size_t eol = lower.find("\r\n", at);
        std::string value = lower.substr(at + 15, eol - at - 15);
        value.erase(0, value.find_first_not_of(' '));
        if (!absl::SimpleAtoi(value, &length)) length = 0;
      }
      if (pending->size() >= head_end + 4 + length) {
        r.body = pending->substr(head_end + 4, length);
        pending->erase(0, head_end + 4 + length);
        if (r.head.size() > 12) absl::SimpleAtoi(r.head.substr(9, 3), &r.status);
        return r;
      }
    }
    const int64_t left = absl::ToInt64Milliseconds(end - absl::Now());
    if (left <= 0) return {};
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return {};
    pending->append(buf, static_cast<size_t>(n));
  }
}

std::string RankRequest(const std::string& extra_headers = "") {
  return absl::StrCat("POST ", kRankPath, " HTTP/1.1\r\nHost: localhost\r\n",
                      "Content-Type: application/json\r\nContent-Length: ", strlen(kRankBody),
                      "\r\n", extra_headers, "\r\n", kRankBody);
}

// The process's open-file limit raised to its hard limit; false if that is below `need`.
bool RaiseFileLimit(rlim_t need, rlim_t* have) {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0) return false;
  files.rlim_cur = files.rlim_max;
  setrlimit(RLIMIT_NOFILE, &files);
  getrlimit(RLIMIT_NOFILE, &files);
  *have = files.rlim_cur;
  return files.rlim_cur >= need;
}

TEST(HttpSlowClients, HalfSentAndTricklingConnectionsNeitherHoldTheDoorNorOutliveTheirDeadline) {
  constexpr int kHalfSent = 1000;   // the first 40 bytes of a request, then nothing
  constexpr int kTrickling = 1000;  // a header byte every 200 to 500 ms
  constexpr auto kHeaderDeadline = std::chrono::seconds(4);
  constexpr auto kCutMargin = std::chrono::seconds(3);
  rlim_t have = 0;
  // Both ends of every connection, and some to spare.
  if (!RaiseFileLimit(2 * (kHalfSent + kTrickling) + 256, &have))
    GTEST_SKIP() << "needs " << 2 * (kHalfSent + kTrickling) + 256
                 << " open files (RLIMIT_NOFILE), the hard limit is " << have;
  HttpServerOptions options;
  options.header_timeout = absl::FromChrono(kHeaderDeadline);
  options.max_connections_per_address = 10'000;  // every client here is 127.0.0.1
  options.threads = 4;
  Door door(options);
  ASSERT_TRUE(door.ok());

  struct Held {
    int fd = -1;
    bool trickling = false;
    Clock::time_point connecting;  // before connect(): the server's deadline starts later
    Clock::time_point next_byte;
    size_t sent = 0;
    Clock::time_point ended{};  // when the client saw EOF or a reset (written by `trickle`)
  };
  const std::string request = RankRequest();
  const size_t head_size = request.find("\r\n\r\n") + 4;
  std::vector<Held> held(kHalfSent + kTrickling);
  for (size_t i = 0; i < held.size(); ++i) {
    Held& h = held[i];
    h.trickling = i % 2 == 1;  // interleaved, so neither kind is served first
    h.connecting = Clock::now();
    h.fd = Connect(door.port());
    ASSERT_GE(h.fd, 0) << "connection " << i << ": " << strerror(errno);
    h.sent = h.trickling ? 1 : 40;
    ASSERT_TRUE(SendAll(h.fd, request.substr(0, h.sent)));
    h.next_byte = Clock::now() + std::chrono::milliseconds(200 + (i * 37) % 300);
  }
  // The other client's ranks go out once the server holds every connection.
  ASSERT_TRUE(door.AwaitOpen(kHalfSent + kTrickling))
      << "open: " << door.metrics().open() << " of " << held.size();

  // Trickling and watching for cuts runs beside the ranks.
  std::atomic<bool> stop{false};
  std::atomic<int> ended{0};
  std::thread trickle([&] {
    std::vector<pollfd> polls(held.size());
    while (!stop.load()) {
      const auto now = Clock::now();
      for (size_t i = 0; i < held.size(); ++i) {
        Held& h = held[i];
        polls[i] = {h.ended == Clock::time_point{} ? h.fd : -1, POLLIN, 0};
        if (h.ended != Clock::time_point{} || !h.trickling || now < h.next_byte) continue;
        // Never the header's last byte: the request stays incomplete.
        if (h.sent + 1 < head_size && send(h.fd, &request[h.sent], 1, MSG_NOSIGNAL) == 1)
          ++h.sent;
        h.next_byte = now + std::chrono::milliseconds(200 + (i * 37 + h.sent * 11) % 300);
      }
      if (poll(polls.data(), polls.size(), 20) <= 0) continue;
      const auto at = Clock::now();
      for (size_t i = 0; i < held.size(); ++i) {
        if (polls[i].fd < 0 || polls[i].revents == 0) continue;
        char buf[512];
        if (recv(held[i].fd, buf, sizeof(buf), MSG_DONTWAIT) <= 0) {
          held[i].ended = at;
          ++ended;
        }
      }
    }
  });

  // Ranks from another client while the connections are held: each answered within a second.
  std::vector<double> answer_seconds;
  const auto window_end = held.front().connecting + kHeaderDeadline - std::chrono::milliseconds(500);
  do {
    const auto start = Clock::now();
    const bandit::testing::HttpAnswer a =
        bandit::testing::SendHttp(door.port(), "POST", kRankPath, kRankBody, nullptr);
    answer_seconds.push_back(Seconds(Clock::now() - start));
    EXPECT_EQ(a.status, 201) << a.body;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (Clock::now() < window_end && answer_seconds.size() < 20);
  const double open_after_ranks = door.metrics().open();

  // Every held connection is cut by the header deadline.
  const auto give_up = Clock::now() + kHeaderDeadline + kCutMargin + std::chrono::seconds(2);
  while (Clock::now() < give_up && ended.load() < static_cast<int>(held.size()))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  stop = true;
  trickle.join();

  const double slowest = *std::max_element(answer_seconds.begin(), answer_seconds.end());
  EXPECT_LT(slowest, 1.0) << "the slowest of " << answer_seconds.size() << " ranks";
  EXPECT_EQ(door.rounds(), static_cast<int64_t>(answer_seconds.size()));
  // The ranks ran while the slow connections were held (the ranks' own connections come and go).
  EXPECT_GE(open_after_ranks, kHalfSent + kTrickling);
  double first_cut = 1e9, last_cut = 0;
  int max_bytes = 0;
  for (size_t i = 0; i < held.size(); ++i) {
    const Held& h = held[i];
    ASSERT_NE(h.ended, Clock::time_point{})
        << (h.trickling ? "trickling" : "half-sent") << " connection " << i << " still open after "
        << Seconds(give_up - h.connecting) << " s";
    const double lived = Seconds(h.ended - h.connecting);
    first_cut = std::min(first_cut, lived);
    last_cut = std::max(last_cut, lived);
    if (h.trickling) max_bytes = std::max(max_bytes, static_cast<int>(h.sent));
    EXPECT_GE(lived, Seconds(kHeaderDeadline)) << "connection " << i << " cut early";
    EXPECT_LE(lived, Seconds(kHeaderDeadline + kCutMargin)) << "connection " << i << " cut late";
    close(h.fd);
  }
  EXPECT_TRUE(door.AwaitCut(Deadline::kHeader, kHalfSent + kTrickling))
      << door.metrics().cut(Deadline::kHeader);
  EXPECT_EQ(door.metrics().cut(Deadline::kIdle), 0);
  EXPECT_TRUE(door.AwaitOpen(0));
  std::printf(
      "[ figures  ] %zu ranks beside %d held connections: slowest answer %.3f s; held "
      "connections cut %.3f to %.3f s after connecting (header deadline %.1f s); a trickling "
      "one sent up to %d bytes\n",
      answer_seconds.size(), kHalfSent + kTrickling, slowest, first_cut, last_cut,
      Seconds(kHeaderDeadline), max_bytes);
}

TEST(HttpSlowClients, ASlowBodyIsCutByTheBodyDeadline) {
  HttpServerOptions options;
  options.body_timeout = absl::Milliseconds(500);
  Door door(options);
  ASSERT_TRUE(door.ok());
  const int fd = Connect(door.port());
  ASSERT_GE(fd, 0);
  const std::string request = RankRequest();
  const size_t head = request.find("\r\n\r\n") + 4;
  ASSERT_TRUE(SendAll(fd, request.substr(0, head)));
  const auto header_sent = Clock::now();
  // A body byte every 100 ms: never idle for long, and still cut.
  bool ended = false;
  for (size_t i = head; i < request.size() && !ended; ++i) {
    if (!SendAll(fd, request.substr(i, 1))) break;
    ended = AwaitClose(fd, absl::Milliseconds(100));
  }
  if (!ended) ended = AwaitClose(fd, absl::Seconds(5));
  const double lived = Seconds(Clock::now() - header_sent);
  ASSERT_TRUE(ended);
  EXPECT_GE(lived, 0.5);
  EXPECT_LE(lived, 0.5 + 3);
  EXPECT_TRUE(door.AwaitCut(Deadline::kBody, 1));
  EXPECT_EQ(door.rounds(), 0);
  close(fd);
}

// A client that asks for a large answer (the model of a LinUCB of dimension 1024: its 1024 x 1024
// matrix, 8 MiB) and never reads it, with a 4 KiB receive window: the write stalls, and the
// write deadline cuts the connection; the client got less than the answer's Content-Length.
TEST(HttpSlowClients, AClientThatDoesNotReadIsCutByTheWriteDeadline) {
  HttpServerOptions options;
  options.write_timeout = absl::Milliseconds(500);
  Door door(options, "policy { linucb {} } feature_space { bits: 10 } seed: 1");
  ASSERT_TRUE(door.ok());
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  const int window = 4096;  // before connect, so the advertised window stays small
  ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &window, sizeof(window)), 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(door.port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_TRUE(SendAll(fd, "GET /instances/shop/personalizer/v1.0/model HTTP/1.1\r\n"
                          "Host: 127.0.0.1\r\n\r\n"));
  const auto sent = Clock::now();
  ASSERT_TRUE(door.AwaitCut(Deadline::kWrite, 1, absl::Seconds(15)));
  const double lived = Seconds(Clock::now() - sent);
  EXPECT_GE(lived, 0.5);
  EXPECT_LE(lived, 0.5 + 3);
  std::string got;
  ASSERT_TRUE(AwaitClose(fd, absl::Seconds(10), &got));
  const size_t head = got.find("\r\n\r\n");
  ASSERT_NE(head, std::string::npos) << got.substr(0, 200);
  EXPECT_EQ(got.substr(0, 12), "HTTP/1.1 200") << got.substr(0, 200);
  const size_t at = absl::AsciiStrToLower(got.substr(0, head)).find("content-length: ");
  ASSERT_NE(at, std::string::npos) << got.substr(0, head);
  int64_t length = 0;
  ASSERT_TRUE(absl::SimpleAtoi(got.substr(at + 16, got.find("\r\n", at) - at - 16), &length));
  EXPECT_GT(length, int64_t{8} << 20);
  EXPECT_LT(static_cast<int64_t>(got.size() - head - 4), length);
  close(fd);
}

TEST(HttpSlowClients, AnIdleKeepAliveConnectionIsClosedAfterTheIdleTimeout) {
  HttpServerOptions options;
  options.idle_timeout = absl::Milliseconds(300);
  Door door(options);
  ASSERT_TRUE(door.ok());
  const int fd = Connect(door.port());
  ASSERT_GE(fd, 0);
  std::string pending;
  // Two requests on the connection, the second sent at once: keep-alive serves both.
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(SendAll(fd, RankRequest()));
    const RawResponse r = ReadResponse(fd, &pending);
    ASSERT_EQ(r.status, 201) << r.head << r.body;
  }
  const auto answered = Clock::now();
  ASSERT_TRUE(AwaitClose(fd, absl::Seconds(5)));
  const double idle = Seconds(Clock::now() - answered);
  // The server's wait began a little before the client read the answer: not measured exactly.
  EXPECT_GE(idle, 0.25);
  EXPECT_LE(idle, 0.3 + 3);
  EXPECT_TRUE(door.AwaitCut(Deadline::kIdle, 1));
  EXPECT_EQ(door.metrics().cut(Deadline::kHeader), 0);
  EXPECT_EQ(door.rounds(), 2);
  close(fd);
}

// A rank sent now is answered 503 ServiceUnavailable, Personalizer's body naming `flag`.
void ExpectRankRefused(int port, const std::string& flag) {
  const bandit::testing::HttpAnswer refused =
      bandit::testing::SendHttp(port, "POST", kRankPath, kRankBody, nullptr);
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(refused.code, "ServiceUnavailable") << refused.body;
  EXPECT_TRUE(absl::StrContains(refused.body, flag)) << refused.body;
}

TEST(HttpSlowClients, OverAConnectionLimitAClientIsAnswered503WithPersonalizersBody) {
  {
    HttpServerOptions options;
    options.max_connections_per_address = 3;
    Door door(options);
    ASSERT_TRUE(door.ok());
    std::vector<int> fds;
    for (int i = 0; i < 3; ++i) fds.push_back(Connect(door.port()));
    ASSERT_TRUE(door.AwaitOpen(3));
    ExpectRankRefused(door.port(), "--http_max_connections_per_address");
    EXPECT_EQ(door.metrics().refused(Refusal::kMaxConnectionsPerAddress), 1);
    EXPECT_EQ(door.metrics().refused(Refusal::kMaxConnections), 0);
    // A connection closed frees its place.
    close(fds.back());
    fds.pop_back();
    ASSERT_TRUE(door.AwaitOpen(2));
    const bandit::testing::HttpAnswer served =
        bandit::testing::SendHttp(door.port(), "POST", kRankPath, kRankBody, nullptr);
    EXPECT_EQ(served.status, 201) << served.body;
    EXPECT_EQ(door.rounds(), 1);
    for (int fd : fds) close(fd);
  }
  {
    HttpServerOptions options;
    options.max_connections = 2;
    Door door(options);
    ASSERT_TRUE(door.ok());
    const int a = Connect(door.port()), b = Connect(door.port());
    ASSERT_TRUE(door.AwaitOpen(2));
    ExpectRankRefused(door.port(), "(--http_max_connections)");
    EXPECT_EQ(door.metrics().refused(Refusal::kMaxConnections), 1);
    EXPECT_EQ(door.rounds(), 0);
    close(a);
    close(b);
  }
}

// What the listener answers itself, in Personalizer's shape, and HTTP/1.1's keep-alive rules.
TEST(HttpSlowClients, ProtocolAnswersPipeliningAndConnectionClose) {
  HttpServerOptions options;
  options.max_body_bytes = 1000;
  Door door(options);
  ASSERT_TRUE(door.ok());
  struct Case {
    std::string request;
    int status;
    std::string words;
  };
  const Case refused[] = {
      {"NOT HTTP AT ALL\r\n\r\n", 400, "\"BadRequest\""},
      {"GET /" + std::string(9000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n", 400,
       "the request line is too long"},
      {absl::StrCat("POST ", kRankPath, " HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n"),
       400, "\"PayloadSizeExceeded\",\"message\":\"the request body is larger than 1000 bytes"},
      {absl::StrCat("POST ", kRankPath,
                    " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n7d0\r\n",
                    std::string(2000, ' '), "\r\n0\r\n\r\n"),
       400, "\"PayloadSizeExceeded\""},
  };
  for (const Case& c : refused) {
    SCOPED_TRACE(c.request.substr(0, 60));
    const int fd = Connect(door.port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendAll(fd, c.request));
    std::string pending;
    const RawResponse r = ReadResponse(fd, &pending);
    EXPECT_EQ(r.status, c.status) << r.head << r.body;
    EXPECT_TRUE(absl::StrContains(r.body, c.words)) << r.body;
    EXPECT_TRUE(absl::StrContains(r.head, "Connection: close")) << r.head;
    EXPECT_TRUE(AwaitClose(fd, absl::Seconds(5)));
    close(fd);
  }
  EXPECT_EQ(door.rounds(), 0);

  // Three requests in one write are answered in order on the connection; a percent-encoded path
  // (with a query) routes as decoded (no instance "sh%6Fp" exists); Expect: 100-continue is
  // answered before the body is sent.
  const int fd = Connect(door.port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(
      fd, absl::StrCat(RankRequest(),
                       "GET /instances/shop/personalizer/v1.0/nothing HTTP/1.1\r\nHost: x\r\n\r\n",
                       "POST /instances/sh%6Fp/personalizer/v1.0/rank?x=1 HTTP/1.1\r\nHost: x\r\n"
                       "Content-Length: ",
                       strlen(kRankBody), "\r\n\r\n", kRankBody)));
  std::string pending;
  const RawResponse first = ReadResponse(fd, &pending);
  const RawResponse second = ReadResponse(fd, &pending);
  const RawResponse third = ReadResponse(fd, &pending);
  EXPECT_EQ(first.status, 201) << first.body;
  EXPECT_EQ(second.status, 404) << second.body;
  EXPECT_TRUE(absl::StrContains(second.body, "ResourceNotFound")) << second.body;
  EXPECT_EQ(third.status, 201) << third.body;
  const std::string expecting = RankRequest("Expect: 100-continue\r\n");
  const size_t head = expecting.find("\r\n\r\n") + 4;
  ASSERT_TRUE(SendAll(fd, expecting.substr(0, head)));
  std::string interim;
  char buf[64];
  while (interim.find("\r\n\r\n") == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    ASSERT_GT(poll(&p, 1, 10'000), 0);
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    ASSERT_GT(n, 0);
    interim.append(buf, static_cast<size_t>(n));
  }
  EXPECT_EQ(interim.substr(0, interim.find("\r\n\r\n") + 4), "HTTP/1.1 100 Continue\r\n\r\n");
  pending = interim.substr(interim.find("\r\n\r\n") + 4);
  ASSERT_TRUE(SendAll(fd, expecting.substr(head)));
  EXPECT_EQ(ReadResponse(fd, &pending).status, 201);
  // Connection: close is honoured: the answer says so and the connection ends.
  ASSERT_TRUE(SendAll(fd, RankRequest("Connection: close\r\n")));
  const RawResponse last = ReadResponse(fd, &pending);
  EXPECT_EQ(last.status, 201);
  EXPECT_TRUE(absl::StrContains(last.head, "Connection: close")) << last.head;
  EXPECT_TRUE(AwaitClose(fd, absl::Seconds(5)));
  close(fd);
  EXPECT_EQ(door.rounds(), 4);
}

TEST(HttpSlowClients, DrainClosesIdleConnectionsAtOnceAndFinishesWhatRuns) {
  HttpServerOptions options;
  options.idle_timeout = absl::Seconds(60);
  Door door(options);
  ASSERT_TRUE(door.ok());
  const int fd = Connect(door.port());
  ASSERT_GE(fd, 0);
  std::string pending;
  ASSERT_TRUE(SendAll(fd, RankRequest()));
  ASSERT_EQ(ReadResponse(fd, &pending).status, 201);
  // A second connection mid-request: its header was read (the server answered its Expect), its
  // body comes after the drain began.
  const int sending = Connect(door.port());
  ASSERT_GE(sending, 0);
  const std::string request = RankRequest("Expect: 100-continue\r\n");
  const size_t head = request.find("\r\n\r\n") + 4;
  ASSERT_TRUE(SendAll(sending, request.substr(0, head)));
  std::string rest;
  const RawResponse interim = ReadResponse(sending, &rest);
  ASSERT_EQ(interim.status, 100) << interim.head;
  const auto start = Clock::now();
  std::thread body([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    SendAll(sending, request.substr(head));
  });
  door.server().Drain(absl::Now() + absl::Seconds(20));
  const double drained = Seconds(Clock::now() - start);
  body.join();
  // The idle connection was closed at once (not after its 60 s), the one sending its request
  // was answered, with Connection: close, and closed.
  EXPECT_TRUE(AwaitClose(fd, absl::Seconds(1)));
  const RawResponse answered = ReadResponse(sending, &rest);
  EXPECT_EQ(answered.status, 201) << answered.head;
  EXPECT_TRUE(absl::StrContains(answered.head, "Connection: close")) << answered.head;
  EXPECT_LT(drained, 10.0);
  EXPECT_EQ(door.metrics().open(), 0);
  EXPECT_EQ(door.rounds(), 2);
  EXPECT_LT(Connect(door.port()), 0) << "the listening socket is closed";
  close(fd);
  close(sending);
}

}  // namespace BANDIT_UNITY_ID
}  // namespace bandit
