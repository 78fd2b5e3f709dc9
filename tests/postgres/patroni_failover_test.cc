// PostgreSQL failover under load, for real: etcd and two PostgreSQL members under Patroni
// (Debian's patroni 3.0 and etcd-server 3.4, as deploy/cluster/docker-compose.patroni.yml runs
// them; synchronous_mode), two banditd cluster nodes on a multi-host DSN with
// target_session_attrs=read-write, Select+Update load through both. The primary is killed (-9,
// Patroni and PostgreSQL), the synchronous standby is promoted, the old primary rejoins with
// pg_rewind, and the new primary is killed in turn. Nothing acknowledged is lost (read from a
// node started afterwards); the stretch without acknowledgements and the promotion time are
// printed (docs/scaling.md, "PostgreSQL failover"). Everything runs on loopback as the
// unprivileged `postgres` user in a temporary directory; skipped when Patroni or etcd is not
// installed (scripts/deps.sh installs both).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
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
namespace v1 = bandit::v1;
using Clock = std::chrono::steady_clock;

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

template <typename Pred>
bool WaitFor(Pred pred, int seconds) {
  const auto until = Clock::now() + std::chrono::seconds(seconds);
  while (Clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

double Since(Clock::time_point t0, Clock::time_point t) {
  return std::chrono::duration<double>(t - t0).count();
}

// etcd and two Patroni members, each in its own process group, as `postgres`.
class PatroniCluster {
 public:
  // synchronous: Patroni's synchronous_mode (else asynchronous streaming replication).
  explicit PatroniCluster(bool synchronous = true) : synchronous_(synchronous) {
    dir_ = bandit::testing::NewTempDir("bandit-patroni");
    const passwd* pw = getpwnam("postgres");
    if (pw == nullptr) throw std::runtime_error("no `postgres` user");
    uid_ = pw->pw_uid;
    gid_ = pw->pw_gid;
    etcd_client_ = FreePort();
    etcd_peer_ = FreePort();
    for (int i = 0; i < 2; ++i) {
      rest_[i] = FreePort();
      pg_[i] = FreePort();
    }
    for (int i = 0; i < 2; ++i) WriteConfig(i);
    if (chown(dir_.c_str(), uid_, gid_) != 0) throw std::runtime_error("chown");
    chmod(dir_.c_str(), 0700);
    etcd_ = Spawn({"etcd", "--name=e1", "--data-dir=" + dir_ + "/etcd",
                   absl::StrCat("--listen-client-urls=http://127.0.0.1:", etcd_client_),
                   absl::StrCat("--advertise-client-urls=http://127.0.0.1:", etcd_client_),
                   absl::StrCat("--listen-peer-urls=http://127.0.0.1:", etcd_peer_),
                   absl::StrCat("--initial-advertise-peer-urls=http://127.0.0.1:", etcd_peer_),
                   absl::StrCat("--initial-cluster=e1=http://127.0.0.1:", etcd_peer_)},
                  "etcd.log");
  }
  ~PatroniCluster() {
    for (int i = 0; i < 2; ++i) Kill(i);
    if (etcd_ > 0) {
      kill(-etcd_, SIGKILL);
      waitpid(etcd_, nullptr, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  void Start(int i) {
    members_[i] = Spawn({"patroni", absl::StrCat(dir_, "/pg-", i + 1, ".yml")},
                        absl::StrCat("pg-", i + 1, ".log"));
  }
  // kill -9 of a member: its Patroni and its PostgreSQL (whose backends exit on its death).
  void Kill(int i) {
    if (members_[i] <= 0) return;
    std::ifstream pidfile(absl::StrCat(dir_, "/data", i + 1, "/postmaster.pid"));
    pid_t postmaster = 0;
    pidfile >> postmaster;
    kill(-members_[i], SIGKILL);
    if (postmaster > 0) kill(postmaster, SIGKILL);
    waitpid(members_[i], nullptr, 0);
    members_[i] = -1;
    // Until the orphaned backends are gone the port and data directory are busy.
    WaitFor([&] { return postmaster <= 0 || kill(postmaster, 0) != 0; }, 10);
  }
  // Patroni's REST API: 200 on /primary for the leader, on /sync for the synchronous standby.
  bool Is(int i, const std::string& role) const {
    const std::string r = HttpGet(rest_[i], "/" + role);
    return r.rfind("HTTP/1.0 200", 0) == 0 || r.rfind("HTTP/1.1 200", 0) == 0;
  }
  std::string Dsn() const {
    return absl::StrCat("host=127.0.0.1,127.0.0.1 port=", pg_[0], ",", pg_[1],
                        " target_session_attrs=read-write user=postgres dbname=postgres "
                        "connect_timeout=2");
  }
  // A superuser connection string to member i alone.
  std::string MemberDsn(int i) const {
    return absl::StrCat("host=127.0.0.1 port=", pg_[i], " user=postgres dbname=postgres");
  }
  std::string Log(int i) const {
    std::ifstream f(absl::StrCat(dir_, "/pg-", i + 1, ".log"));
    return std::string(std::istreambuf_iterator<char>(f), {});
  }

 private:
  void WriteConfig(int i) {
    std::ofstream f(absl::StrCat(dir_, "/pg-", i + 1, ".yml"));
    // As deploy/cluster/patroni/, on loopback, with a shorter ttl (a test, on an idle etcd).
    f << "scope: bandit\nnamespace: /service/\nname: pg-" << i + 1 << "\n"
      << "restapi:\n  listen: 127.0.0.1:" << rest_[i] << "\n  connect_address: 127.0.0.1:"
      << rest_[i] << "\n"
      << "etcd3:\n  hosts: 127.0.0.1:" << etcd_client_ << "\n"
      << "bootstrap:\n  dcs:\n    ttl: 10\n    loop_wait: 2\n    retry_timeout: 4\n"
      << "    synchronous_mode: " << (synchronous_ ? "true" : "false")
      << "\n    synchronous_mode_strict: false\n"
      << "    postgresql:\n      use_pg_rewind: true\n      use_slots: true\n"
      << "      parameters:\n        wal_log_hints: 'on'\n        synchronous_commit: 'on'\n"
      << "        max_connections: 60\n        shared_buffers: 16MB\n"
      << "        max_wal_size: 256MB\n"
      << "  initdb:\n    - encoding: UTF8\n"
      << "  pg_hba:\n    - local all all trust\n"
      << "    - host replication replicator 127.0.0.1/32 trust\n"
      << "    - host all all 127.0.0.1/32 trust\n"
      << "postgresql:\n  listen: 127.0.0.1:" << pg_[i] << "\n  connect_address: 127.0.0.1:"
      << pg_[i] << "\n  data_dir: " << dir_ << "/data" << i + 1
      << "\n  bin_dir: " << PgBin() << "\n  pgpass: " << dir_ << "/pgpass-" << i + 1 << "\n"
      << "  authentication:\n    superuser: {username: postgres, password: su}\n"
      << "    replication: {username: replicator, password: rep}\n"
      << "    rewind: {username: rewinder, password: rew}\n";
  }
  static std::string PgBin() {
    for (const char* v : {"15", "16", "17", "14", "13"}) {
      const std::string d = std::string("/usr/lib/postgresql/") + v + "/bin";
      if (std::filesystem::exists(d + "/initdb")) return d;
    }
    return "/usr/lib/postgresql/15/bin";
  }
  pid_t Spawn(const std::vector<std::string>& cmd, const std::string& log) {
    const std::string log_path = dir_ + "/" + log;
    std::fflush(nullptr);  // the child's freopen would write our buffered output again
    const pid_t pid = fork();
    if (pid == 0) {
      setsid();
      if (setgid(gid_) != 0 || setuid(uid_) != 0) _exit(126);
      if (freopen(log_path.c_str(), "a", stdout) == nullptr) _exit(126);
      dup2(fileno(stdout), fileno(stderr));
      if (chdir(dir_.c_str()) != 0) _exit(126);
      setenv("HOME", dir_.c_str(), 1);
      std::vector<char*> argv;
      std::vector<std::string> args = cmd;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      _exit(127);
    }
    return pid;
  }

  const bool synchronous_;
  std::string dir_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  int etcd_client_ = 0, etcd_peer_ = 0;
  int rest_[2] = {0, 0}, pg_[2] = {0, 0};
  pid_t etcd_ = -1;
  pid_t members_[2] = {-1, -1};
};

// Select + Update rounds on one instance through every node; each acknowledged update's time.
struct Load {
  Load(const std::vector<std::string>& targets, const std::string& instance) {
    for (size_t t = 0; t < 2 * targets.size(); ++t) {
      workers.emplace_back([this, target = targets[t % targets.size()], instance, t] {
        bandit::client::ClientOptions o;
        o.deadline = std::chrono::milliseconds(3000);
        BanditClient client(target, o);
        for (int i = 0; !stop.load(); ++i) {
          v1::SelectRequest sel;
          sel.set_instance(instance);
          auto d = client.Select(sel);
          if (!d.ok()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            continue;
          }
          v1::UpdateRequest up;
          up.set_instance(instance);
          up.set_event_id(d->event_id());
          up.set_reward((i + t) % 3 == 0 ? 1.0 : 0.0);
          ++attempted;
          if (client.Update(up).ok()) {
            ++acknowledged;
            std::lock_guard<std::mutex> lock(mu);
            acks.push_back(Clock::now());
          }
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
  // The longest stretch without an acknowledgement between `from` and `to` (its first and last
  // moment: two consecutive acknowledgements).
  std::pair<Clock::time_point, Clock::time_point> LongestGap(Clock::time_point from,
                                                             Clock::time_point to) {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<Clock::time_point> in;
    for (const auto& a : acks)
      if (a >= from && a <= to) in.push_back(a);
    std::sort(in.begin(), in.end());
    std::pair<Clock::time_point, Clock::time_point> gap{from, from};
    for (size_t i = 1; i < in.size(); ++i)
      if (in[i] - in[i - 1] > gap.second - gap.first) gap = {in[i - 1], in[i]};
    return gap;
  }
  std::atomic<bool> stop{false};
  std::atomic<int64_t> acknowledged{0}, attempted{0};
  std::mutex mu;
  std::vector<Clock::time_point> acks;
  std::vector<std::thread> workers;
};

std::unique_ptr<ServerProcess> Node(const std::string& dsn, const std::string& id,
                                    int lease_ms = 5000) {
  return std::make_unique<ServerProcess>(std::vector<std::string>{
      "--storage=postgres", "--postgres_dsn=" + dsn, "--durability=always", "--cluster",
      "--node_id=" + id, "--lease_ms=" + std::to_string(lease_ms), "--grace_period_ms=2000"});
}

void Create(BanditClient& client, const std::string& name) {
  v1::CreateInstanceRequest create;
  create.set_name(name);
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "policy { epsilon_greedy { epsilon: 0.2 } num_arms: 4 }", create.mutable_config()));
  auto s = client.CreateInstance(create);
  ASSERT_TRUE(s.ok()) << s.status();
}

// `rounds` acknowledged Select + Update pairs on `name`.
void Rounds(BanditClient& client, const std::string& name, int rounds) {
  for (int i = 0; i < rounds; ++i) {
    v1::SelectRequest sel;
    sel.set_instance(name);
    auto d = client.Select(sel);
    ASSERT_TRUE(d.ok()) << d.status();
    v1::UpdateRequest up;
    up.set_instance(name);
    up.set_event_id(d->event_id());
    up.set_reward(i % 2);
    auto u = client.Update(up);
    ASSERT_TRUE(u.ok()) << u.status();
  }
}

TEST(PatroniFailover, KillingThePrimaryTwiceUnderLoadLosesNothingAcknowledged) {
  if (geteuid() != 0 || !std::filesystem::exists("/usr/bin/patroni") ||
      !std::filesystem::exists("/usr/bin/etcd"))
    GTEST_SKIP() << "needs root (to run PostgreSQL as `postgres`), patroni and etcd "
                    "(scripts/deps.sh)";
  PatroniCluster pg;
  pg.Start(0);
  ASSERT_TRUE(WaitFor([&] { return pg.Is(0, "primary"); }, 60)) << pg.Log(0);
  pg.Start(1);
  ASSERT_TRUE(WaitFor([&] { return pg.Is(1, "sync"); }, 60)) << pg.Log(1);

  auto n1 = Node(pg.Dsn(), "n1");
  auto n2 = Node(pg.Dsn(), "n2");
  ASSERT_TRUE(n1->running() && n2->running()) << n1->Log() << n2->Log();
  {
    BanditClient client(n1->target());
    v1::CreateInstanceRequest create;
    create.set_name("f");
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
        "policy { epsilon_greedy { epsilon: 0.2 } num_arms: 4 }", create.mutable_config()));
    ASSERT_TRUE(client.CreateInstance(create).ok());
  }
  Load load({n1->target(), n2->target()}, "f");
  int primary = 0;
  for (int failover = 1; failover <= 2; ++failover) {
    const int standby = 1 - primary;
    ASSERT_TRUE(WaitFor([&] { return load.acknowledged.load() > 200; }, 30));
    const int64_t before = load.acknowledged.load();
    ASSERT_TRUE(WaitFor([&] { return load.acknowledged.load() > before + 200; }, 30));
    const auto killed = Clock::now();
    pg.Kill(primary);
    ASSERT_TRUE(WaitFor([&] { return pg.Is(standby, "primary"); }, 60)) << pg.Log(standby);
    const auto promoted = Clock::now();
    const int64_t at_promotion = load.acknowledged.load();
    ASSERT_TRUE(WaitFor([&] { return load.acknowledged.load() > at_promotion + 50; }, 60))
        << "no update acknowledged after the promotion\n"
        << n1->Log() << n2->Log();
    const auto [last, first] =
        load.LongestGap(killed - std::chrono::seconds(2), Clock::now());
    std::printf(
        "failover %d: standby promoted %.2f s after the kill; no update acknowledged for %.2f s "
        "(from %.2f s after the kill to %.2f s after the promotion)\n",
        failover, Since(killed, promoted), Since(last, first), Since(killed, last),
        Since(promoted, first));
    std::fflush(stdout);
    // The old primary rejoins as the synchronous standby (pg_rewind).
    pg.Start(primary);
    ASSERT_TRUE(WaitFor([&] { return pg.Is(primary, "sync"); }, 90)) << pg.Log(primary);
    primary = standby;
  }
  load.Stop();
  const int64_t acknowledged = load.acknowledged.load(), attempted = load.attempted.load();
  // A node started afterwards reads everything acknowledged from the database.
  n1.reset();
  n2.reset();
  auto reader = Node(pg.Dsn(), "reader");
  ASSERT_TRUE(reader->running()) << reader->Log();
  BanditClient client(reader->target());
  absl::StatusOr<v1::Instance> got;
  ASSERT_TRUE(WaitFor(
      [&] {
        got = client.GetInstance("f");
        return got.ok();
      },
      30))
      << got.status();
  std::printf("acknowledged %lld of %lld updates; the database holds %lld\n",
              static_cast<long long>(acknowledged), static_cast<long long>(attempted),
              static_cast<long long>(got->stats().updates()));
  EXPECT_GE(got->stats().updates(), acknowledged) << "acknowledged updates lost";
  EXPECT_LE(got->stats().updates(), attempted);
}

// The divergence case for real: asynchronous replication, the standby held back (the primary's
// WAL sender stopped), updates acknowledged on the primary alone, then the primary killed and
// the standby promoted without them. The nodes notice at their reconnect and refuse the instance
// that lost acknowledged updates (DATA_LOSS), keep serving the one that lost nothing, and a node
// started afterwards refuses it too. --lease_ms above the failover time, so that the owner, not
// another node, is the one that reconnects to the shortened database holding the instance.
TEST(PatroniFailover, AStandbyBehindIsNoticedAfterTheFailoverAndItsInstanceRefused) {
  if (geteuid() != 0 || !std::filesystem::exists("/usr/bin/patroni") ||
      !std::filesystem::exists("/usr/bin/etcd"))
    GTEST_SKIP() << "needs root (to run PostgreSQL as `postgres`), patroni and etcd "
                    "(scripts/deps.sh)";
  PatroniCluster pg(/*synchronous=*/false);
  pg.Start(0);
  ASSERT_TRUE(WaitFor([&] { return pg.Is(0, "primary"); }, 60)) << pg.Log(0);
  pg.Start(1);
  ASSERT_TRUE(WaitFor(
      [&] {
        return pg.Is(1, "replica") &&
               PostgresProcess::ExecOn(pg.MemberDsn(0),
                                       "SELECT count(*) FROM pg_stat_replication WHERE state = "
                                       "'streaming'") == "1";
      },
      60))
      << pg.Log(1);
  auto n1 = Node(pg.Dsn(), "n1", 30000);
  auto n2 = Node(pg.Dsn(), "n2", 30000);
  ASSERT_TRUE(n1->running() && n2->running()) << n1->Log() << n2->Log();
  BanditClient c1(n1->target()), c2(n2->target());
  Create(c1, "behind");
  Create(c1, "intact");
  Rounds(c1, "behind", 5);
  Rounds(c2, "intact", 5);
  // The standby has everything so far ...
  const std::string rows =
      PostgresProcess::ExecOn(pg.MemberDsn(0), "SELECT count(*) FROM bandit_journal");
  ASSERT_TRUE(WaitFor(
      [&] {
        return PostgresProcess::ExecOn(pg.MemberDsn(1), "SELECT count(*) FROM bandit_journal") ==
               rows;
      },
      30));
  // ... and nothing after: the primary's WAL sender stops; these are acknowledged by the
  // primary alone (no synchronous standby: banditd warned at start).
  const pid_t sender = std::stoi(
      PostgresProcess::ExecOn(pg.MemberDsn(0), "SELECT pid FROM pg_stat_replication"));
  ASSERT_EQ(kill(sender, SIGSTOP), 0);
  Rounds(c2, "behind", 3);
  auto acked = c1.GetInstance("behind");
  ASSERT_TRUE(acked.ok()) << acked.status();
  ASSERT_EQ(acked->stats().updates(), 8);
  pg.Kill(0);
  kill(sender, SIGKILL);
  ASSERT_TRUE(WaitFor([&] { return pg.Is(1, "primary"); }, 60)) << pg.Log(1);

  // Never served from memory again, through either node; the intact instance goes on.
  for (BanditClient* c : {&c1, &c2}) {
    absl::Status got;
    ASSERT_TRUE(WaitFor(
        [&] {
          got = c->GetInstance("behind").status();
          return got.code() == absl::StatusCode::kDataLoss;
        },
        60))
        << "still served: " << got << "\n"
        << n1->Log() << n2->Log();
    EXPECT_TRUE(absl::StrContains(got.message(), "PostgreSQL no longer holds every change"))
        << got;
  }
  v1::SelectRequest sel;
  sel.set_instance("behind");
  EXPECT_EQ(c2.Select(sel).status().code(), absl::StatusCode::kDataLoss);
  absl::StatusOr<v1::Instance> intact;
  ASSERT_TRUE(WaitFor(
      [&] {
        intact = c2.GetInstance("intact");
        return intact.ok();
      },
      30))
      << intact.status();
  EXPECT_EQ(intact->stats().updates(), 5);
  Rounds(c1, "intact", 1);
  const std::string m1 = HttpGet(n1->metrics_port(), "/metrics"),
                    m2 = HttpGet(n2->metrics_port(), "/metrics");
  EXPECT_TRUE(absl::StrContains(m1 + m2, "\nbandit_storage_diverged_instances_total 1"))
      << m1 << m2;
  // A node started afterwards refuses it too (bandit_diverged), and serves the intact one.
  n1.reset();
  n2.reset();
  auto reader = Node(pg.Dsn(), "reader", 30000);
  ASSERT_TRUE(reader->running()) << reader->Log();
  BanditClient c3(reader->target());
  EXPECT_EQ(c3.GetInstance("behind").status().code(), absl::StatusCode::kDataLoss);
  auto again = c3.GetInstance("intact");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->stats().updates(), 6);
}

}  // namespace
}  // namespace bandit
