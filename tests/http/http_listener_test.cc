// The HTTP listener's accept queue. Keep-alive clients that connect at once must not overflow
// it: past the queue the kernel drops their SYNs and answers with SYN cookies; a cookie
// connection whose first segment arrives while the queue is full is dropped, and its next
// segment (the rest of the client's request) no longer matches the cookie and is answered with a
// reset, so the client reads no response. cpp-httplib, the listener before Boost.Beast, listened
// with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, compiled into Debian's library) and lost the
// first requests of 64 clients connecting at once so; the listener now asks for SOMAXCONN (the
// kernel caps it at net.core.somaxconn). It must hold at least a burst of as many connections
// as the default number of requests handled at once.
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <memory>

#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "server/api/http/http_server.h"
#include "server/api/http/personalizer_api.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using bandit::server::http::HttpServer;
using bandit::server::http::HttpServerOptions;
using bandit::server::http::PersonalizerApi;

// The backlog of this process's listening TCP socket bound to `port` (the kernel's limit on
// connections waiting for accept), or -1 if there is none. For a listening socket TCP_INFO's
// tcpi_sacked is that limit (and tcpi_unacked the connections waiting now).
int ListenBacklog(int port) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int backlog = -1;
  while (const dirent* entry = readdir(dir)) {
    int fd = -1;
    if (!absl::SimpleAtoi(entry->d_name, &fd)) continue;
    int listening = 0;
    socklen_t len = sizeof(listening);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
    sockaddr_storage addr{};
    len = sizeof(addr);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) continue;
    int bound = -1;
    if (addr.ss_family == AF_INET) bound = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    if (addr.ss_family == AF_INET6)
      bound = ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
    if (bound != port) continue;
    tcp_info info{};
    len = sizeof(info);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) continue;
    backlog = static_cast<int>(info.tcpi_sacked);
  }
  closedir(dir);
  return backlog;
}

TEST(HttpListener, AcceptQueueHoldsABurstOfAsManyConnectionsAsItServes) {
  PersonalizerApi api(/*service=*/nullptr, /*auth=*/nullptr, {});
  HttpServerOptions options;
  options.listen = "127.0.0.1:0";
  options.threads = 64;
  auto server = HttpServer::Start(options, &api, /*metrics=*/nullptr);
  ASSERT_TRUE(server.ok()) << server.status();
  const int backlog = ListenBacklog((*server)->port());
  ASSERT_GT(backlog, 0) << "no listening socket of this process on port " << (*server)->port();
  EXPECT_GE(backlog, options.threads);
}

}  // namespace BANDIT_UNITY_ID
}  // namespace bandit
