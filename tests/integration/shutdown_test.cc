// SIGTERM is bounded by the grace period even when a call cannot finish in it: the call is cut
// (answered UNAVAILABLE/CANCELLED), then the final snapshot and journal flush run, and nothing
// acknowledged is lost. The call is held by real I/O: its snapshot goes into a named pipe that
// the test reads only after the cut (a disk slower than the grace period).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include <google/protobuf/text_format.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "bandit/v1/service.grpc.pb.h"
#include "client/cpp/bandit_client.h"
#include "tests/integration/server_process.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using bandit::client::BanditClient;
using bandit::testing::ServerProcess;
namespace v1 = bandit::v1;
using SteadyClock = std::chrono::steady_clock;

v1::CreateInstanceRequest Create(const std::string& name, const std::string& config) {
  v1::CreateInstanceRequest req;
  req.set_name(name);
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(config, req.mutable_config()));
  return req;
}

grpc::Status SnapshotOne(const std::string& target, const std::string& name,
                         std::chrono::milliseconds deadline) {
  auto stub =
      v1::BanditService::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline);
  v1::SnapshotInstancesRequest req;
  req.set_name(name);
  v1::SnapshotInstancesResponse resp;
  return stub->SnapshotInstances(&ctx, req, &resp);
}

TEST(Shutdown, CallHeldPastTheGracePeriodIsCutAndTheFinalSnapshotStillRuns) {
  constexpr int kGraceMs = 1000;
  ServerProcess server({"--grace_period_ms=" + std::to_string(kGraceMs)});
  ASSERT_TRUE(server.running()) << server.Log();
  BanditClient client(server.target());
  // "held" is large (its snapshot exceeds a pipe's 64 KiB buffer) and snapshotted once, so its
  // state is on disk before its second snapshot gets stuck.
  auto created = client.CreateInstance(Create("held", "policy { linucb { dimension: 128 } }"));
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE(SnapshotOne(server.target(), "held", std::chrono::seconds(30)).ok());
  ASSERT_TRUE(client.CreateInstance(Create("acked", "policy { ucb1 {} num_arms: 3 }")).ok());
  int acked = 0;
  auto play = [&](int rounds) {
    for (int i = 0; i < rounds; ++i) {
      v1::SelectRequest sel;
      sel.set_instance("acked");
      auto d = client.Select(sel);
      ASSERT_TRUE(d.ok()) << d.status();
      v1::UpdateRequest up;
      up.set_instance("acked");
      up.set_event_id(d->event_id());
      up.set_reward(i % 2);
      ASSERT_TRUE(client.Update(up).ok());
      ++acked;
    }
  };
  play(20);

  // The next snapshot of "held" goes into a pipe: the server's write blocks once the pipe is
  // full, until the test reads.
  const std::string tmp = server.dir() + "/data/snapshots/held.snap.tmp";
  ASSERT_EQ(mkfifo(tmp.c_str(), 0644), 0);
  const int pipe_fd = open(tmp.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(pipe_fd, 0);
  grpc::Status held_status;
  SteadyClock::time_point held_answered;
  std::thread held([&] {
    held_status = SnapshotOne(server.target(), "held", std::chrono::seconds(60));
    held_answered = SteadyClock::now();
  });
  pollfd pfd{pipe_fd, POLLIN, 0};
  ASSERT_EQ(poll(&pfd, 1, 30'000), 1) << "the snapshot never started writing";
  play(20);  // writes are served while the snapshot is stuck

  const auto sigterm = SteadyClock::now();
  pid_t pid = server.pid();
  ASSERT_GT(pid, 0);
  kill(pid, SIGTERM);
  held.join();  // the cut answers it; nothing else would
  EXPECT_TRUE(held_status.error_code() == grpc::StatusCode::UNAVAILABLE ||
              held_status.error_code() == grpc::StatusCode::CANCELLED)
      << held_status.error_code() << " " << held_status.error_message();
  EXPECT_GE(held_answered - sigterm, std::chrono::milliseconds(kGraceMs));
  // The server must not wait for the stuck call: it cuts it on its own at the end of the grace
  // period (a server that waited would never log this; after 10 s the test gives up and lets
  // the disk catch up anyway, so the process still ends).
  bool cut_logged = false;
  for (int i = 0; i < 1000 && !cut_logged; ++i) {
    cut_logged = server.Log().find("1 call(s) still in flight cut") != std::string::npos;
    if (!cut_logged) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(cut_logged) << server.Log();
  // The disk catches up: drain the pipe so the stuck snapshot ends (its fsync on a pipe fails,
  // and the earlier complete snapshot of "held" stays).
  fcntl(pipe_fd, F_SETFL, 0);
  char buf[1 << 16];
  while (read(pipe_fd, buf, sizeof buf) > 0) {
  }
  close(pipe_fd);

  const int status = server.Stop(0);  // already signalled: just wait for the exit
  const auto exited = SteadyClock::now();
  ASSERT_TRUE(WIFEXITED(status)) << server.Log();
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_LE(exited - sigterm, std::chrono::milliseconds(kGraceMs + 2000)) << server.Log();
  const std::string log = server.Log();
  EXPECT_NE(log.find("final snapshot written"), std::string::npos) << log;
  EXPECT_NE(log.find("shutdown complete"), std::string::npos) << log;
  EXPECT_TRUE(std::filesystem::exists(server.dir() + "/data/snapshots/acked.snap"));

  // Nothing acknowledged is lost.
  std::filesystem::remove(tmp);
  server.Start({"--grace_period_ms=" + std::to_string(kGraceMs)});
  ASSERT_TRUE(server.running()) << server.Log();
  BanditClient after(server.target());
  auto got = after.GetInstance("acked");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->stats().updates(), acked);
  auto held_after = after.GetInstance("held");
  EXPECT_TRUE(held_after.ok()) << held_after.status();
}

// A client connection that stays open without a call must not hold the shutdown: gRPC's own
// drain waits for each connection to acknowledge its GOAWAY, which an idle client may read only
// at its next poll (gRPC C++ clients poll every 5 s when no call runs), and a client that never
// reads would hold it to the end of the grace period. The connection here is HTTP/2 at the byte
// level: the client preface and SETTINGS, the server's SETTINGS read, then nothing is read.
TEST(Shutdown, AConnectionThatNeverReadsDoesNotHoldTheDrain) {
  constexpr int kGraceMs = 10000;
  ServerProcess server({"--grace_period_ms=" + std::to_string(kGraceMs)});
  ASSERT_TRUE(server.running()) << server.Log();
  BanditClient client(server.target());
  ASSERT_TRUE(client.CreateInstance(Create("a", "policy { epsilon_greedy {} num_arms: 2 }")).ok());

  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server.port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
  // RFC 9113 3.4: the preface, then a SETTINGS frame (length 0, type 4, no flags, stream 0).
  const std::string hello =
      std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") + std::string("\0\0\0\x04\0\0\0\0\0", 9);
  ASSERT_EQ(write(fd, hello.data(), hello.size()), static_cast<ssize_t>(hello.size()));
  // The server's SETTINGS arrive once its transport for this connection is up.
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 10000), 1);
  char frame[9];
  ASSERT_EQ(read(fd, frame, sizeof(frame)), static_cast<ssize_t>(sizeof(frame)));
  EXPECT_EQ(frame[3], 0x04) << "expected the server's SETTINGS frame first";

  const int status = server.Stop(SIGTERM);
  close(fd);
  ASSERT_TRUE(WIFEXITED(status)) << server.Log();
  EXPECT_EQ(WEXITSTATUS(status), 0);
  const std::string log = server.Log();
  EXPECT_NE(log.find("drained: every call was answered within the grace period"), std::string::npos)
      << log;
  EXPECT_EQ(log.find("grace period of"), std::string::npos) << log;
}

}  // namespace
}  // namespace bandit
