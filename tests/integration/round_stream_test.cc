// Rounds streams on the real banditd (file storage, --durability=always): what a stream
// acknowledged is recovered after a restart, and a shutdown ends an open, idle stream with
// UNAVAILABLE at once instead of waiting out the grace period for it.
#include <signal.h>
#include <sys/wait.h>

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include "client/cpp/bandit_client.h"
#include "tests/integration/server_process.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using bandit::client::BanditClient;
using bandit::client::StatusOf;
using bandit::testing::ServerProcess;
namespace v1 = bandit::v1;

TEST(RoundStreamServer, AcknowledgedRoundsAreRecoveredAndShutdownEndsAnIdleStream) {
  // A grace period a forgotten stream would visibly wait out (the log says so).
  const std::vector<std::string> args = {"--grace_period_ms=20000"};
  ServerProcess server(args);
  ASSERT_TRUE(server.running()) << server.Log();
  {
    BanditClient client(server.target());
    v1::CreateInstanceRequest create;
    create.set_name("s");
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
        "policy { epsilon_greedy { epsilon: 0.2 } num_arms: 3 } seed: 5", create.mutable_config()));
    ASSERT_TRUE(client.CreateInstance(create).ok());
  }
  BanditClient client(server.target());
  auto stream = client.OpenRoundStream("s");
  ASSERT_TRUE(stream.ok()) << stream.status();
  constexpr int kRounds = 50;
  v1::RoundRequest select;
  select.mutable_select()->set_instance("s");
  v1::RoundRequest update;
  update.mutable_update()->set_instance("s");
  for (int i = 0; i < kRounds; ++i) {
    ASSERT_TRUE((*stream)->Send(select).ok());
    if ((*stream)->unanswered() == 2) {
      auto u = (*stream)->Receive();
      ASSERT_TRUE(u.ok()) << u.status();
      ASSERT_TRUE(StatusOf(*u).ok()) << StatusOf(*u);
    }
    auto d = (*stream)->Receive();
    ASSERT_TRUE(d.ok()) << d.status();
    ASSERT_TRUE(StatusOf(*d).ok()) << StatusOf(*d);
    update.mutable_update()->set_event_id(d->decision().event_id());
    update.mutable_update()->set_reward(d->decision().arm_index() == 1 ? 1 : 0);
    ASSERT_TRUE((*stream)->Send(update, /*more_follow=*/true).ok());
  }
  // The last Update's answer: with it, every round was acknowledged (made durable).
  ASSERT_TRUE((*stream)->Send(select).ok());
  for (int answers = 0; answers < 2; ++answers) {
    auto a = (*stream)->Receive();
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(StatusOf(*a).ok()) << StatusOf(*a);
  }

  // The stream stays open and idle while the server shuts down.
  const int status = server.Stop(SIGTERM);
  ASSERT_TRUE(WIFEXITED(status)) << server.Log();
  EXPECT_EQ(WEXITSTATUS(status), 0);
  const std::string log = server.Log();
  EXPECT_NE(log.find("drained: every call was answered within the grace period"), std::string::npos)
      << log;
  const absl::Status ended = (*stream)->Close();
  EXPECT_EQ(ended.code(), absl::StatusCode::kUnavailable) << ended;

  server.Start(args);
  ASSERT_TRUE(server.running()) << server.Log();
  BanditClient after(server.target());
  auto got = after.GetInstance("s");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->stats().rounds(), kRounds + 1);
  EXPECT_EQ(got->stats().updates(), kRounds);
}

}  // namespace BANDIT_UNITY_ID
}  // namespace bandit
