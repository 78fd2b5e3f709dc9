// Against the real banditd binary on port 0: lifecycle, select/update, batch, error codes over
// the wire, concurrency, health, config at start, graceful shutdown and banditctl.
#include <sys/wait.h>

#include <atomic>
#include <fstream>
#include <thread>

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include "client/cpp/bandit_client.h"
#include "tests/common/temp_dir.h"
#include "tests/integration/server_process.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using absl::StatusCode;
using bandit::client::BanditClient;
using bandit::testing::EnvOr;
using bandit::testing::ServerProcess;
namespace v1 = bandit::v1;

v1::CreateInstanceRequest Create(const std::string& name, const std::string& config_text) {
  v1::CreateInstanceRequest req;
  req.set_name(name);
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(config_text, req.mutable_config()));
  return req;
}

int RunCtl(const std::string& args) {
  const std::string cmd =
      EnvOr("BANDITCTL", "build/bin/banditctl") + " " + args + " >/dev/null 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(Banditd, LifecycleSelectUpdateOverTheWire) {
  ServerProcess server;
  ASSERT_TRUE(server.running()) << server.Log();
  BanditClient client(server.target());
  auto health = client.Health();
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, grpc::health::v1::HealthCheckResponse::SERVING);

  ASSERT_TRUE(
      client.CreateInstance(Create("k", "policy { epsilon_greedy { epsilon: 0.1 } num_arms: 4 }"))
          .ok());
  EXPECT_EQ(client.CreateInstance(Create("k", "policy { ucb1 {} num_arms: 2 }")).status().code(),
            StatusCode::kAlreadyExists);
  v1::SelectRequest sel;
  sel.set_instance("k");
  sel.set_return_scores(true);
  auto d = client.Select(sel);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->scores_size(), 4);
  v1::UpdateRequest up;
  up.set_instance("k");
  up.set_event_id(d->event_id());
  up.set_reward(1.0);
  auto u = client.Update(up);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->updates(), 1);
  EXPECT_EQ(client.Update(up).status().code(), StatusCode::kFailedPrecondition);
  up.set_event_id("nope");
  EXPECT_EQ(client.Update(up).status().code(), StatusCode::kNotFound);
  up.set_reward(NAN);
  EXPECT_EQ(client.Update(up).status().code(), StatusCode::kInvalidArgument);

  auto got = client.GetInstance("k");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->stats().rounds(), 1);
  EXPECT_EQ(got->stats().updates(), 1);
  EXPECT_GT(got->stats().state_bytes(), 0);

  auto list = client.ListInstances(0, "");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->instances_size(), 1);
  EXPECT_TRUE(client.DeleteInstance("k").ok());
  EXPECT_EQ(client.GetInstance("k").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client.Select(sel).status().code(), StatusCode::kNotFound);
}

// A second banditd on a port the first serves must fail to start, not share the port: with
// SO_REUSEPORT (gRPC's and cpp-httplib's default) both would bind it and the kernel would split
// connections between two servers of different state.
TEST(Banditd, ASecondServerOnTheSamePortRefusesToStart) {
  ServerProcess first({"--http_listen=127.0.0.1:0"});
  ASSERT_TRUE(first.running()) << first.Log();
  int grpc_port = 0, metrics_port = 0, http_port = 0;
  std::ifstream(first.dir() + "/ports") >> grpc_port >> metrics_port >> http_port;
  ASSERT_GT(http_port, 0) << "expected the ports file to hold GRPC METRICS HTTP";

  ServerProcess same_grpc({"--listen=127.0.0.1:" + std::to_string(grpc_port)});
  EXPECT_FALSE(same_grpc.running());
  EXPECT_NE(
      same_grpc.Log().find("cannot listen on --listen=127.0.0.1:" + std::to_string(grpc_port)),
      std::string::npos)
      << same_grpc.Log();

  ServerProcess same_http({"--http_listen=127.0.0.1:" + std::to_string(http_port)});
  EXPECT_FALSE(same_http.running());
  EXPECT_NE(same_http.Log().find("--http_listen=127.0.0.1:" + std::to_string(http_port) +
                                 ": could not bind"),
            std::string::npos)
      << same_http.Log();

  // The first one still serves.
  BanditClient client(first.target());
  EXPECT_TRUE(
      client.CreateInstance(Create("still", "policy { epsilon_greedy {} num_arms: 2 }")).ok());
}

TEST(Banditd, OversizedRequestIsRefused) {
  ServerProcess server({"--max_message_bytes=65536"});
  ASSERT_TRUE(server.running()) << server.Log();
  BanditClient client(server.target());
  ASSERT_TRUE(client.CreateInstance(Create("lin", "policy { linucb { dimension: 4 } }")).ok());
  v1::SelectRequest sel;
  sel.set_instance("lin");
  for (int i = 0; i < 5000; ++i) {
    auto* c = sel.add_candidates();
    for (int j = 0; j < 4; ++j) c->add_values(0.1);
  }
  EXPECT_EQ(client.Select(sel).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(client.GetInstance("lin")->stats().rounds(), 0);
}

TEST(Banditd, ConcurrentClientsOnOneInstanceLoseNoUpdate) {
  ServerProcess server;
  ASSERT_TRUE(server.running()) << server.Log();
  {
    BanditClient admin(server.target());
    ASSERT_TRUE(
        admin.CreateInstance(Create("c", "policy { epsilon_greedy { epsilon: 0.3 } num_arms: 5 }"))
            .ok());
  }
  constexpr int kThreads = 8, kRounds = 150;
  std::atomic<int> acknowledged{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      BanditClient client(server.target());  // own channel per client
      for (int i = 0; i < kRounds; ++i) {
        v1::SelectRequest sel;
        sel.set_instance("c");
        auto d = client.Select(sel);
        if (!d.ok()) {
          ++failures;
          continue;
        }
        v1::UpdateRequest up;
        up.set_instance("c");
        up.set_event_id(d->event_id());
        up.set_reward((t + i) % 2);
        if (client.Update(up).ok())
          ++acknowledged;
        else
          ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(acknowledged.load(), kThreads * kRounds);
  BanditClient client(server.target());
  auto got = client.GetInstance("c");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->stats().rounds(), kThreads * kRounds);
  EXPECT_EQ(got->stats().updates(), kThreads * kRounds);
  EXPECT_EQ(got->stats().pending(), 0);
}

TEST(Banditd, BatchCallsOverTheWire) {
  ServerProcess server;
  ASSERT_TRUE(server.running());
  BanditClient client(server.target());
  ASSERT_TRUE(client.CreateInstance(Create("b", "policy { ucb1 {} num_arms: 3 }")).ok());
  v1::SelectBatchRequest sb;
  for (int i = 0; i < 10; ++i) sb.add_requests()->set_instance("b");
  auto sr = client.SelectBatch(sb);
  ASSERT_TRUE(sr.ok());
  ASSERT_EQ(sr->decisions_size(), 10);
  v1::UpdateBatchRequest ub;
  for (const auto& d : sr->decisions()) {
    auto* u = ub.add_requests();
    u->set_instance("b");
    u->set_event_id(d.event_id());
    u->set_reward(0.5);
  }
  auto ur = client.UpdateBatch(ub);
  ASSERT_TRUE(ur.ok());
  for (const auto& s : ur->statuses()) EXPECT_EQ(s.code(), 0) << s.message();
  EXPECT_EQ(client.GetInstance("b")->stats().updates(), 10);
}

TEST(Banditd, ConfigFileCreatesInstancesAtStart) {
  const bandit::testing::TempDir temp("banditd-config");
  const std::string& dir = temp.path();
  {
    std::ofstream f(dir + "/instances.textproto");
    f << "instances { name: \"from-config\" config { policy { ucb1 {} num_arms: 2 } } }\n";
  }
  ServerProcess server({"--config=" + dir + "/instances.textproto"});
  ASSERT_TRUE(server.running()) << server.Log();
  BanditClient client(server.target());
  auto got = client.GetInstance("from-config");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->arm_ids_size(), 2);
}

TEST(Banditd, BadConfigFileStopsStartWithAClearError) {
  const bandit::testing::TempDir temp("banditd-config");
  const std::string& dir = temp.path();
  {
    std::ofstream f(dir + "/bad.textproto");
    f << "instances { name: \"x\" config { policy { ucb1 {} num_arms: 0 } } }\n";
  }
  ServerProcess server({"--config=" + dir + "/bad.textproto"});
  EXPECT_FALSE(server.running());
  EXPECT_NE(server.Log().find("instance 'x'"), std::string::npos) << server.Log();
}

TEST(Banditd, SigtermDrainsAndExitsCleanly) {
  ServerProcess server;
  ASSERT_TRUE(server.running());
  const int status = server.Stop(SIGTERM);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_NE(server.Log().find("shutdown complete"), std::string::npos) << server.Log();
}

TEST(Banditctl, HealthExitCodeAndRoundTrip) {
  ServerProcess server;
  ASSERT_TRUE(server.running());
  const std::string t = "--target=" + server.target();
  EXPECT_EQ(RunCtl(t + " health"), 0);
  EXPECT_EQ(RunCtl(t + " create demo --config='policy { ucb1 {} num_arms: 3 }'"), 0);
  EXPECT_EQ(RunCtl(t + " create demo --config='policy { ucb1 {} num_arms: 3 }'"), 1);
  EXPECT_EQ(RunCtl(t + " --json select demo"), 0);
  EXPECT_EQ(RunCtl(t + " update demo --arm=1 --reward=1"), 0);
  EXPECT_EQ(RunCtl(t + " update demo --arm=7 --reward=1"), 1);
  EXPECT_EQ(RunCtl(t + " get demo"), 0);
  EXPECT_EQ(RunCtl(t + " list"), 0);
  EXPECT_EQ(RunCtl(t + " delete demo"), 0);

  // set-reference: embeddings from a file (two uploads, the second appended), then statistics.
  EXPECT_EQ(
      RunCtl(t + " create gen --config='policy { mixture { objective: FD num_arms: 2 "
                 "dimension: 2 reference_mean: [0, 0] reference_covariance: [1, 0, 0, 1] } }'"),
      0);
  const std::string csv = ::testing::TempDir() + "/reference.csv";
  {
    std::ofstream f(csv);
    f << "0.5, 1\n-1, 2\n\n3, 0.25\n";
  }
  EXPECT_EQ(RunCtl(t + " set-reference gen --embeddings_file=" + csv), 0);
  EXPECT_EQ(RunCtl(t + " set-reference gen --append --embeddings_file=" + csv), 0);
  BanditClient client(server.target());
  auto got = client.GetInstance("gen");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->config().policy().mixture().reference_samples_size(), 12);  // 6 rows x 2
  EXPECT_EQ(RunCtl(t + " set-reference gen --mean=1,1 --covariance=2,0,0,2"), 0);
  EXPECT_EQ(RunCtl(t + " set-reference gen --mean=1,1 --covariance=2,5,5,2"), 1);  // not PSD
  EXPECT_EQ(RunCtl(t + " set-reference demo_gone --mean=1,1 --covariance=2,0,0,2"), 1);
  got = client.GetInstance("gen");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->config().policy().mixture().reference_mean(0), 1.0);
  EXPECT_EQ(got->config().policy().mixture().reference_samples_size(), 0);

  // export / import move an instance (here: within one server, under a new name).
  const std::string state = ::testing::TempDir() + "/gen.state";
  EXPECT_EQ(RunCtl(t + " export gen --file=" + state), 0);
  EXPECT_EQ(RunCtl(t + " import gen_copy --file=" + state), 0);
  EXPECT_EQ(RunCtl(t + " import gen_copy --file=" + state), 1);  // exists
  // --replace: the copy, changed since, becomes the exported instance again (its mean 1 below).
  EXPECT_EQ(RunCtl(t + " set-reference gen_copy --mean=3,3 --covariance=2,0,0,2"), 0);
  EXPECT_EQ(RunCtl(t + " import gen_copy --replace --file=" + state), 0);
  EXPECT_EQ(RunCtl(t + " export nosuch --file=" + state), 1);
  EXPECT_EQ(RunCtl(t + " delete gen"), 0);
  EXPECT_EQ(RunCtl(t + " import --file=" + state), 0);  // back under its exported name
  EXPECT_TRUE(client.GetInstance("gen").ok());
  auto copy = client.GetInstance("gen_copy");
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(copy->config().policy().mixture().reference_mean(0), 1.0);
  server.Stop(SIGTERM);
  EXPECT_NE(RunCtl(t + " --deadline_ms=500 health"), 0);
}

}  // namespace
}  // namespace bandit
