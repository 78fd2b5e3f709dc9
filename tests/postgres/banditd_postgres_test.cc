// The real banditd on --storage=postgres against a real PostgreSQL: kill -9 under concurrent
// load loses no acknowledged update; PostgreSQL stopped under load (pg_ctl stop -m immediate)
// turns health NOT_SERVING and writes UNAVAILABLE, and after it starts again the same banditd
// serves again with nothing acknowledged lost.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "client/cpp/bandit_client.h"
#include "tests/common/temp_dir.h"
#include "tests/integration/postgres_process.h"
#include "tests/integration/server_process.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using bandit::client::BanditClient;
using bandit::testing::HttpGet;
using bandit::testing::PostgresProcess;
using bandit::testing::ServerProcess;
using bandit::testing::SharedPostgres;
using Serving = grpc::health::v1::HealthCheckResponse;
namespace v1 = bandit::v1;

double MetricValue(const std::string& text, const std::string& name) {
  for (size_t pos = 0; (pos = text.find(name, pos)) != std::string::npos; pos += name.size()) {
    if (pos > 0 && text[pos - 1] != '\n') continue;
    const size_t sp = text.find(' ', pos);
    if (sp == std::string::npos) break;
    if (text.compare(pos, sp - pos, name) != 0) continue;
    return std::atof(text.c_str() + sp + 1);
  }
  return -1;
}

void CreateInstance(BanditClient& client, const std::string& name) {
  v1::CreateInstanceRequest create;
  create.set_name(name);
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "policy { epsilon_greedy { epsilon: 0.2 } num_arms: 5 }", create.mutable_config()));
  auto s = client.CreateInstance(create);
  ASSERT_TRUE(s.ok()) << s.status();
}

// Concurrent select + update rounds until `stop`; counts the updates acknowledged and sent.
struct Load {
  Load(const std::string& target, const std::string& instance, int threads) {
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([this, target, instance, t] {
        bandit::client::ClientOptions o;
        o.deadline = std::chrono::milliseconds(2000);
        BanditClient client(target, o);
        for (int i = 0; !stop.load(); ++i) {
          v1::SelectRequest sel;
          sel.set_instance(instance);
          auto d = client.Select(sel);
          if (!d.ok()) {
            ++refused;
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            continue;
          }
          v1::UpdateRequest up;
          up.set_instance(instance);
          up.set_event_id(d->event_id());
          up.set_reward((i + t) % 3 == 0 ? 1.0 : 0.0);
          ++attempted;
          if (client.Update(up).ok())
            ++acknowledged;
          else
            ++refused;
        }
      });
    }
  }
  void Stop() {
    stop = true;
    for (auto& w : workers) w.join();
    workers.clear();
  }
  ~Load() { Stop(); }
  std::atomic<bool> stop{false};
  std::atomic<int64_t> acknowledged{0}, attempted{0}, refused{0};
  std::vector<std::thread> workers;
};

int64_t Updates(BanditClient& client, const std::string& name) {
  auto got = client.GetInstance(name);
  EXPECT_TRUE(got.ok()) << got.status();
  return got.ok() ? got->stats().updates() : -1;
}

template <typename Pred>
bool WaitFor(Pred pred, int seconds = 60) {
  for (int i = 0; i < seconds * 50; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TEST(BanditdOnPostgres, KillNineUnderLoadLosesNoAcknowledgedUpdate) {
  const std::vector<std::string> args = {"--storage=postgres",
                                         "--postgres_dsn=" + SharedPostgres().CreateDatabase(),
                                         "--durability=always", "--snapshot_every_changes=150"};
  const bandit::testing::TempDir temp("banditd-pgcrash");
  const std::string& dir = temp.path();
  int64_t acknowledged = 0, attempted = 0;
  const int kill_after_ms[] = {600, 900, 450};
  for (int cycle = 0; cycle <= 3; ++cycle) {
    ServerProcess server(args, dir);
    ASSERT_TRUE(server.running()) << server.Log();
    BanditClient client(server.target());
    if (cycle == 0) {
      CreateInstance(client, "crash");
    } else {
      const int64_t recovered = Updates(client, "crash");
      EXPECT_GE(recovered, acknowledged) << "cycle " << cycle << ": lost acknowledged updates\n"
                                         << server.Log();
      EXPECT_LE(recovered, attempted) << "cycle " << cycle;
      acknowledged = attempted = recovered;
    }
    if (cycle == 3) break;
    Load load(server.target(), "crash", 4);
    std::this_thread::sleep_for(std::chrono::milliseconds(kill_after_ms[cycle]));
    server.Stop(SIGKILL);
    load.Stop();
    EXPECT_GT(load.acknowledged.load(), 0) << "no load reached the server in cycle " << cycle;
    acknowledged += load.acknowledged;
    attempted += load.attempted;
  }
}

TEST(BanditdOnPostgres, PostgresStoppedUnderLoadThenBackWithoutRestart) {
  PostgresProcess& pg = SharedPostgres();
  const std::string dsn = pg.CreateDatabase();
  ServerProcess server({"--storage=postgres", "--postgres_dsn=" + dsn, "--durability=always"});
  ASSERT_TRUE(server.running()) << server.Log();
  BanditClient client(server.target());
  CreateInstance(client, "x");
  auto health = client.Health();
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(*health, Serving::SERVING);
  const double errors_before =
      MetricValue(HttpGet(server.metrics_port(), "/metrics"), "bandit_storage_errors_total");
  EXPECT_EQ(errors_before, 0);

  Load load(server.target(), "x", 4);
  ASSERT_TRUE(WaitFor([&] { return load.acknowledged.load() > 50; }));
  pg.Stop("immediate");
  const int64_t acknowledged_before_stop = load.acknowledged.load();
  // While PostgreSQL is down: NOT_SERVING, writes refused, the error counter moves.
  ASSERT_TRUE(WaitFor([&] {
    auto h = client.Health();
    return h.ok() && *h == Serving::NOT_SERVING;
  })) << server.Log();
  v1::SelectRequest sel;
  sel.set_instance("x");
  auto refused = client.Select(sel);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  auto got = client.GetInstance("x");  // reads keep working
  EXPECT_TRUE(got.ok()) << got.status();
  EXPECT_GT(MetricValue(HttpGet(server.metrics_port(), "/metrics"), "bandit_storage_errors_total"),
            0);
  const int64_t acknowledged_while_down_start = load.acknowledged.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(load.acknowledged.load(), acknowledged_while_down_start)
      << "an update was acknowledged while PostgreSQL was down";

  pg.Start();
  ASSERT_TRUE(WaitFor([&] {
    auto h = client.Health();
    return h.ok() && *h == Serving::SERVING;
  })) << server.Log();
  const int64_t acknowledged_at_restart = load.acknowledged.load();
  ASSERT_TRUE(WaitFor([&] { return load.acknowledged.load() > acknowledged_at_restart + 50; }))
      << "the server did not serve writes again\n"
      << server.Log();
  load.Stop();
  EXPECT_GE(acknowledged_before_stop, 1);
  EXPECT_TRUE(absl::StrContains(server.Log(), "PostgreSQL reachable again")) << server.Log();

  // Everything acknowledged is in the database: a fresh server reading it finds it all.
  const int64_t acknowledged = load.acknowledged.load();
  const int64_t attempted = load.attempted.load();
  server.Stop(SIGKILL);
  ServerProcess reader({"--storage=postgres", "--postgres_dsn=" + dsn});
  ASSERT_TRUE(reader.running()) << reader.Log();
  BanditClient reader_client(reader.target());
  const int64_t recovered = Updates(reader_client, "x");
  EXPECT_GE(recovered, acknowledged) << "acknowledged updates lost";
  EXPECT_LE(recovered, attempted);
}

// --postgres_password_file is read once, through the server's file seam, before any connection:
// an unreadable or empty file stops banditd at start with a message naming the flag (a wrong
// password must not surface later as a vague connection failure); a readable one is used.
TEST(BanditdOnPostgres, PasswordFileIsReadAtStartAndItsProblemsNamed) {
  const std::string dsn = bandit::testing::SharedPostgres().CreateDatabase();
  const bandit::testing::TempDir temp("bandit-pwfile");
  const std::string& dir = temp.path();
  {
    ServerProcess missing({"--storage=postgres", "--postgres_dsn=" + dsn,
                           "--postgres_password_file=" + dir + "/absent"});
    EXPECT_FALSE(missing.running());
    EXPECT_TRUE(absl::StrContains(
        missing.Log(), "cannot read the password from --postgres_password_file=" + dir + "/absent"))
        << missing.Log();
  }
  { std::ofstream(dir + "/empty") << "\n"; }
  {
    ServerProcess empty({"--storage=postgres", "--postgres_dsn=" + dsn,
                         "--postgres_password_file=" + dir + "/empty"});
    EXPECT_FALSE(empty.running());
    EXPECT_TRUE(absl::StrContains(empty.Log(), "is empty: expected the password on its first line"))
        << empty.Log();
  }
  // The test cluster trusts local connections, so any password is accepted: a readable file
  // starts the server, and the password itself never appears in its log.
  { std::ofstream(dir + "/good") << "s3cret-Pw\nignored second line\n"; }
  {
    ServerProcess good({"--storage=postgres", "--postgres_dsn=" + dsn,
                        "--postgres_password_file=" + dir + "/good"});
    ASSERT_TRUE(good.running()) << good.Log();
    BanditClient client(good.target());
    auto health = client.Health();
    ASSERT_TRUE(health.ok()) << health.status();
    EXPECT_EQ(*health, grpc::health::v1::HealthCheckResponse::SERVING);
    EXPECT_FALSE(absl::StrContains(good.Log(), "s3cret-Pw")) << good.Log();
  }
}

}  // namespace
}  // namespace bandit
