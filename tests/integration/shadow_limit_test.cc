// banditd --max_shadows against the real binary: the configured limit answers RESOURCE_EXHAUSTED
// with its exact message one shadow beyond it; a restart with a lower limit recovers every
// shadow the server once accepted and refuses new ones; out-of-range values stop the start.
#include <sys/wait.h>

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include "client/cpp/bandit_client.h"
#include "tests/integration/server_process.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using absl::StatusCode;
using bandit::client::BanditClient;
using bandit::testing::ServerProcess;
namespace v1 = bandit::v1;

v1::AddShadowRequest Shadow(const std::string& shadow) {
  v1::AddShadowRequest req;
  req.set_name("k");
  req.set_shadow(shadow);
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString("policy { ucb1 {} }",
                                                            req.mutable_config()));
  return req;
}

TEST(BanditdShadows, MaxShadowsFlagLimitsAddShadowAndRestartKeepsAcceptedShadows) {
  ServerProcess server({"--max_shadows=2", "--durability=always"});
  ASSERT_TRUE(server.running()) << server.Log();
  EXPECT_NE(server.Log().find("max_shadows=2"), std::string::npos) << server.Log();
  {
    BanditClient client(server.target());
    v1::CreateInstanceRequest create;
    create.set_name("k");
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
        "policy { epsilon_greedy { epsilon: 0.1 } num_arms: 3 }", create.mutable_config()));
    ASSERT_TRUE(client.CreateInstance(create).ok());
    ASSERT_TRUE(client.AddShadow(Shadow("one")).ok());
    ASSERT_TRUE(client.AddShadow(Shadow("two")).ok());
    auto third = client.AddShadow(Shadow("three"));
    EXPECT_EQ(third.status().code(), StatusCode::kResourceExhausted) << third.status();
    EXPECT_EQ(third.status().message(),
              "instance 'k' has 2 shadows, the configured maximum of 2 (--max_shadows); remove "
              "one first");
    auto got = client.GetInstance("k");
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->shadows_size(), 2);
  }
  // Restart on the same data with a lower limit: both shadows are recovered, a new one refused.
  ASSERT_EQ(server.Stop(SIGTERM), 0) << server.Log();
  server.Start({"--max_shadows=1", "--durability=always"});
  ASSERT_TRUE(server.running()) << server.Log();
  {
    BanditClient client(server.target());
    auto got = client.GetInstance("k");
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->shadows_size(), 2);
    EXPECT_EQ(got->shadows(0).name(), "one");
    EXPECT_EQ(got->shadows(1).name(), "two");
    auto refused = client.AddShadow(Shadow("three"));
    EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted) << refused.status();
    EXPECT_EQ(refused.status().message(),
              "instance 'k' has 2 shadows, the configured maximum of 1 (--max_shadows); remove "
              "one first");
  }
}

TEST(BanditdShadows, OutOfRangeMaxShadowsStopsTheStart) {
  for (const char* value : {"-1", "1001"}) {
    ServerProcess server({std::string("--max_shadows=") + value});
    EXPECT_FALSE(server.running()) << value;
    const int status = server.Stop(SIGTERM);
    ASSERT_TRUE(WIFEXITED(status)) << value;
    EXPECT_EQ(WEXITSTATUS(status), 2) << value;
    EXPECT_NE(server.Log().find(std::string("--max_shadows=") + value +
                                " is out of range, expected 0..1000"),
              std::string::npos)
        << server.Log();
  }
}

}  // namespace
}  // namespace bandit
