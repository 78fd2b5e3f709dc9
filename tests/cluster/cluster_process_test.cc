// A cluster of real banditd processes (--cluster) on one real PostgreSQL: placement by
// rendezvous hashing (checked against the direct computation over the lease table), forwarding
// from any node, kill -9 of an owner and exact continuation on the node that takes over (against
// an uninterrupted in-process twin fed the same inputs), a paused owner (SIGSTOP past its lease)
// whose pending call is never acknowledged and who serves nothing stale after SIGCONT, a node
// joining (about a quarter of the instances move to it) and one leaving gracefully (its leases
// are released at once); shadows added through any node, seen from every node and kept by the
// node that takes over; a node without room in its memory budget declines a takeover, is passed
// over by placement and does not claim the instance again, and the next node with room takes
// it with everything acknowledged.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "client/cpp/bandit_client.h"
#include "server/cluster/rendezvous.h"
#include "server/service/decision_service.h"
#include "tests/common/temp_dir.h"
#include "tests/integration/postgres_process.h"
#include "tests/integration/server_process.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using bandit::client::BanditClient;
using bandit::testing::PostgresProcess;
using bandit::testing::ServerProcess;
using bandit::testing::SharedPostgres;
namespace v1 = bandit::v1;

constexpr int kLeaseMs = 1500;

std::unique_ptr<ServerProcess> StartNode(const std::string& dsn, const std::string& id,
                                         int lease_ms = kLeaseMs,
                                         const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"--storage=postgres", "--postgres_dsn=" + dsn, "--cluster",
                                   "--node_id=" + id, "--lease_ms=" + std::to_string(lease_ms),
                                   "--grace_period_ms=2000"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto node = std::make_unique<ServerProcess>(args);
  EXPECT_TRUE(node->running()) << node->Log();
  return node;
}

v1::CreateInstanceRequest CreateRequest(const std::string& name, uint64_t seed = 11) {
  v1::CreateInstanceRequest create;
  create.set_name(name);
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "policy { epsilon_greedy { epsilon: 0.3 } num_arms: 6 }", create.mutable_config()));
  create.mutable_config()->set_seed(seed);
  return create;
}

template <typename Pred>
bool WaitFor(Pred pred, int seconds = 30) {
  for (int i = 0; i < seconds * 50; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// Retries what the cluster answers UNAVAILABLE (an instance between owners) like a client's
// retry policy would, for at most `seconds`.
template <typename Call>
auto Retry(Call call, int seconds = 20) {
  auto r = call();
  for (int i = 0;
       i < seconds * 20 && !r.ok() && r.status().code() == absl::StatusCode::kUnavailable; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    r = call();
  }
  return r;
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

bool Connectable(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  close(fd);
  return ok;
}

// A real haproxy (Debian's) in front of the nodes, with deploy/cluster/haproxy.cfg's frontend
// and backend settings on loopback ports.
class HaproxyProcess {
 public:
  explicit HaproxyProcess(const std::vector<int>& backends) {
    dir_ = bandit::testing::NewTempDir("bandit-haproxy");
    port_ = FreePort();
    std::ofstream cfg(dir_ + "/haproxy.cfg");
    cfg << "global\n    maxconn 1024\n"
        << "defaults\n    mode http\n    timeout connect 2s\n    timeout client 60s\n"
        << "    timeout server 60s\n    option http-keep-alive\n"
        << "    default-server inter 200ms fall 2 rise 2\n"
        << "frontend bandit_grpc\n    bind 127.0.0.1:" << port_ << " proto h2\n"
        << "    default_backend banditd\n"
        << "backend banditd\n    balance hdr(x-bandit-instance)\n    hash-type consistent\n";
    for (size_t i = 0; i < backends.size(); ++i)
      cfg << "    server n" << i + 1 << " 127.0.0.1:" << backends[i] << " proto h2 check\n";
    cfg.close();
    std::string bin = "/usr/sbin/haproxy";
    if (!std::filesystem::exists(bin)) bin = "haproxy";
    pid_ = fork();
    if (pid_ == 0) {
      const std::string log = dir_ + "/haproxy.log";
      if (freopen(log.c_str(), "a", stderr) == nullptr) _exit(126);
      dup2(fileno(stderr), fileno(stdout));
      const std::string conf = dir_ + "/haproxy.cfg";
      execlp(bin.c_str(), bin.c_str(), "-db", "-f", conf.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    EXPECT_TRUE(WaitFor([&] { return Connectable(port_); }, 10)) << Log();
  }
  ~HaproxyProcess() {
    kill(pid_, SIGTERM);
    int status;
    waitpid(pid_, &status, 0);
    std::filesystem::remove_all(dir_);
  }
  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string Log() const {
    std::ifstream f(dir_ + "/haproxy.log");
    return std::string(std::istreambuf_iterator<char>(f), {});
  }

 private:
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

std::map<std::string, std::string> Owners(const std::string& dsn) {
  std::map<std::string, std::string> out;
  const std::string rows = PostgresProcess::ExecOn(
      dsn,
      "SELECT coalesce(string_agg(instance || '=' || coalesce(owner, '-'), ',' ORDER BY "
      "instance), '') FROM bandit_leases");
  size_t pos = 0;
  while (pos < rows.size()) {
    size_t comma = rows.find(',', pos);
    if (comma == std::string::npos) comma = rows.size();
    const std::string item = rows.substr(pos, comma - pos);
    const size_t eq = item.find('=');
    out[item.substr(0, eq)] = item.substr(eq + 1);
    pos = comma + 1;
  }
  return out;
}

std::vector<std::string> Names(int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back("inst-" + std::to_string(i));
  return names;
}

TEST(Cluster, InstancesArePlacedByRendezvousAndServedFromEveryNode) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  std::vector<std::unique_ptr<ServerProcess>> nodes;
  for (const char* id : {"n1", "n2", "n3"}) nodes.push_back(StartNode(dsn, id));
  std::vector<std::unique_ptr<BanditClient>> clients;
  for (auto& n : nodes) clients.push_back(std::make_unique<BanditClient>(n->target()));
  const auto names = Names(24);
  // Every instance created through n1: it lands on its rendezvous owner.
  for (const auto& name : names) {
    auto created = Retry([&] { return clients[0]->CreateInstance(CreateRequest(name)); });
    ASSERT_TRUE(created.ok()) << name << ": " << created.status();
  }
  const auto owners = Owners(dsn);
  ASSERT_EQ(owners.size(), names.size());
  std::map<std::string, int> per_node;
  for (const auto& name : names) {
    EXPECT_EQ(owners.at(name), server::cluster::RendezvousOwner({"n1", "n2", "n3"}, name)) << name;
    ++per_node[owners.at(name)];
  }
  EXPECT_EQ(per_node.size(), 3u) << "24 names, 3 nodes: each should own some";
  // A second create of the same name, through another node, reaches the owner.
  EXPECT_EQ(clients[2]->CreateInstance(CreateRequest(names[0])).status().code(),
            absl::StatusCode::kAlreadyExists);
  // Select + Update of every instance through every node (forwarded when not the owner).
  for (const auto& name : names) {
    for (auto& c : clients) {
      v1::SelectRequest sel;
      sel.set_instance(name);
      auto d = c->Select(sel);
      ASSERT_TRUE(d.ok()) << name << ": " << d.status();
      v1::UpdateRequest up;
      up.set_instance(name);
      up.set_event_id(d->event_id());
      up.set_reward(1.0);
      ASSERT_TRUE(c->Update(up).ok()) << name;
    }
    for (auto& c : clients) {
      auto got = Retry([&] { return c->GetInstance(name); });
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->stats().updates(), 3) << name;
    }
  }
  EXPECT_EQ(clients[1]->GetInstance("no-such-instance").status().code(),
            absl::StatusCode::kNotFound);
  // ListInstances spans the cluster, page by page, from any node.
  for (auto& c : clients) {
    std::vector<std::string> listed;
    std::string token;
    do {
      auto page = c->ListInstances(5, token);
      ASSERT_TRUE(page.ok()) << page.status();
      for (const auto& inst : page->instances()) listed.push_back(inst.name());
      token = page->next_page_token();
    } while (!token.empty());
    std::vector<std::string> expected = names;
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(listed, expected);
  }
  // Delete through a non-owner; the name is free again everywhere.
  const std::string victim = names[5];
  ASSERT_TRUE(clients[(owners.at(victim) == "n1") ? 1 : 0]->DeleteInstance(victim).ok());
  for (auto& c : clients)
    EXPECT_EQ(c->GetInstance(victim).status().code(), absl::StatusCode::kNotFound);
}

TEST(Cluster, KillNineOfTheOwnerThenTheTakeoverContinuesExactly) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  std::map<std::string, std::unique_ptr<ServerProcess>> nodes;
  for (const char* id : {"n1", "n2", "n3"}) nodes[id] = StartNode(dsn, id);
  const std::string name = "twin-checked";
  const std::string owner = server::cluster::RendezvousOwner({"n1", "n2", "n3"}, name);
  const std::string entry = owner == "n1" ? "n2" : "n1";  // the client never talks to the owner
  BanditClient client(nodes[entry]->target());
  ASSERT_TRUE(Retry([&] { return client.CreateInstance(CreateRequest(name, 77)); }).ok());

  // The twin: the same config in-process, never interrupted.
  server::DecisionService twin;
  v1::Instance out;
  ASSERT_TRUE(twin.CreateInstance(CreateRequest(name, 77), &out).ok());

  auto round = [&](int i) -> std::string {
    v1::SelectRequest sel;
    sel.set_instance(name);
    auto d = Retry([&] { return client.Select(sel); });
    EXPECT_TRUE(d.ok()) << d.status();
    if (!d.ok()) return "";
    v1::Decision td;
    EXPECT_TRUE(twin.Select(sel, &td).ok());
    const double reward = (std::stoi(d->arm_id()) * 7 + i) % 5 == 0 ? 1.0 : 0.25;
    v1::UpdateRequest up;
    up.set_instance(name);
    up.set_event_id(d->event_id());
    up.set_reward(reward);
    auto u = Retry([&] { return client.Update(up); });
    EXPECT_TRUE(u.ok()) << u.status();
    v1::UpdateRequest tu = up;
    tu.set_event_id(td.event_id());
    v1::UpdateResponse tr;
    EXPECT_TRUE(twin.Update(tu, &tr).ok());
    EXPECT_EQ(d->arm_id(), td.arm_id()) << "round " << i;
    return d->arm_id();
  };
  for (int i = 0; i < 100; ++i) round(i);
  // Between two acknowledged rounds: the owner dies without a word.
  nodes[owner]->Stop(SIGKILL);
  const auto killed_at = std::chrono::steady_clock::now();
  std::string first_after = round(100);
  const double takeover_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  std::cerr << "[ cluster ] instance served again " << takeover_s << " s after kill -9 (lease "
            << kLeaseMs << " ms)\n";
  for (int i = 101; i < 300; ++i) round(i);
  auto got = client.GetInstance(name);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->stats().updates(), 300) << "every acknowledged update is there";
  v1::Instance tw;
  ASSERT_TRUE(twin.GetInstance(
                      [&] {
                        v1::GetInstanceRequest r;
                        r.set_name(name);
                        return r;
                      }(),
                      &tw)
                  .ok());
  EXPECT_EQ(got->stats().reward_sum(), tw.stats().reward_sum());
  const auto owners = Owners(dsn);
  EXPECT_NE(owners.at(name), owner);
  EXPECT_EQ(owners.at(name),
            server::cluster::RendezvousOwner(owner == "n1"   ? std::vector<std::string>{"n2", "n3"}
                                             : owner == "n2" ? std::vector<std::string>{"n1", "n3"}
                                                             : std::vector<std::string>{"n1", "n2"},
                                             name));
}

TEST(Cluster, APausedOwnerIsFencedAndServesNothingStaleAfterItResumes) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  std::map<std::string, std::unique_ptr<ServerProcess>> nodes;
  for (const char* id : {"n1", "n2", "n3"}) nodes[id] = StartNode(dsn, id);
  const std::string name = "paused-owner";
  const std::string owner = server::cluster::RendezvousOwner({"n1", "n2", "n3"}, name);
  const std::string other = owner == "n1" ? "n2" : "n1";
  BanditClient via_other(nodes[other]->target());
  ASSERT_TRUE(Retry([&] { return via_other.CreateInstance(CreateRequest(name)); }).ok());
  int64_t acknowledged = 0;
  auto update_round = [&](BanditClient& c) {
    v1::SelectRequest sel;
    sel.set_instance(name);
    auto d = Retry([&] { return c.Select(sel); });
    ASSERT_TRUE(d.ok()) << d.status();
    v1::UpdateRequest up;
    up.set_instance(name);
    up.set_event_id(d->event_id());
    up.set_reward(1.0);
    auto u = Retry([&] { return c.Update(up); });
    ASSERT_TRUE(u.ok()) << u.status();
    ++acknowledged;
  };
  for (int i = 0; i < 20; ++i) update_round(via_other);

  // The owner stops (a long GC pause, a frozen VM). A call sent to it directly waits.
  const auto epoch_before = PostgresProcess::ExecOn(
      dsn, "SELECT epoch FROM bandit_leases WHERE instance = '" + name + "'");
  kill(nodes[owner]->pid(), SIGSTOP);
  bandit::client::ClientOptions slow;
  slow.deadline = std::chrono::milliseconds(60'000);
  BanditClient direct(nodes[owner]->target(), slow);
  absl::StatusOr<v1::Decision> pending = absl::UnknownError("not answered");
  std::thread pending_call([&] {
    v1::SelectRequest sel;
    sel.set_instance(name);
    pending = direct.Select(sel);
  });
  // Another node takes the instance over once the paused node's lease expired, and serves it.
  ASSERT_TRUE(WaitFor([&] {
    return PostgresProcess::ExecOn(dsn, "SELECT epoch FROM bandit_leases WHERE instance = '" +
                                            name + "'") != epoch_before;
  })) << "no takeover";
  // Let the other nodes' heartbeats see the new owner (a stale route would forward to the
  // paused node and wait for the call's deadline).
  std::this_thread::sleep_for(std::chrono::milliseconds(kLeaseMs));
  for (int i = 0; i < 20; ++i) update_round(via_other);
  const std::string new_owner = Owners(dsn).at(name);
  EXPECT_NE(new_owner, owner);

  kill(nodes[owner]->pid(), SIGCONT);
  pending_call.join();
  if (pending.ok()) {
    // The resumed node's heartbeat dropped the instance before the call got through, and it
    // forwarded the call to the new owner, which served it from its own state: the decision
    // is in the new owner's history (a copy served by the stale node would not be).
    v1::UpdateRequest up;
    up.set_instance(name);
    up.set_event_id(pending->event_id());
    up.set_reward(1.0);
    auto u = via_other.Update(up);
    EXPECT_TRUE(u.ok()) << "served from a stale copy? " << u.status();
    ++acknowledged;
  } else {
    // Or it was refused before anything changed: the node's lease had run out.
    EXPECT_EQ(pending.status().code(), absl::StatusCode::kUnavailable) << pending.status();
  }
  // The resumed node serves the instance's current state (forwarding to the new owner), never
  // its own stale copy; the new owner's history is intact.
  auto seen = Retry([&] { return direct.GetInstance(name); });
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_EQ(seen->stats().updates(), acknowledged);
  EXPECT_EQ(seen->stats().rounds(), acknowledged) << "a refused Select is not in its history";
  for (int i = 0; i < 5; ++i) update_round(direct);
  auto final_state = via_other.GetInstance(name);
  ASSERT_TRUE(final_state.ok());
  EXPECT_EQ(final_state->stats().updates(), acknowledged);
  EXPECT_EQ(Owners(dsn).at(name), new_owner);
}

// The race fencing exists for, made deterministic: the owner has applied a Select and its
// commit is inside the fencing check, waiting for the lease row (held by the test, as a
// takeover's UPDATE holds it); the lease moves to another node and that transaction commits
// first. The owner's commit must be refused, its caller must not get an acknowledgement, and
// the new owner continues from the committed history only.
TEST(Cluster, ACommitRacingATakeoverIsRefusedByTheFence) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  std::map<std::string, std::unique_ptr<ServerProcess>> nodes;
  for (const char* id : {"n1", "n2"}) nodes[id] = StartNode(dsn, id, /*lease_ms=*/60'000);
  const std::string name = "raced";
  const std::string owner = server::cluster::RendezvousOwner({"n1", "n2"}, name);
  const std::string other = owner == "n1" ? "n2" : "n1";
  BanditClient via_owner(nodes[owner]->target());
  ASSERT_TRUE(Retry([&] { return via_owner.CreateInstance(CreateRequest(name)); }).ok());
  for (int i = 0; i < 10; ++i) {
    v1::SelectRequest sel;
    sel.set_instance(name);
    ASSERT_TRUE(via_owner.Select(sel).ok());
  }
  PGconn* takeover = PQconnectdb(dsn.c_str());
  ASSERT_EQ(PQstatus(takeover), CONNECTION_OK);
  PQclear(PQexec(takeover, "BEGIN"));
  PQclear(
      PQexec(takeover,
             ("SELECT 1 FROM bandit_leases WHERE instance = '" + name + "' FOR UPDATE").c_str()));
  absl::StatusOr<v1::Decision> raced = absl::UnknownError("not answered");
  std::thread call([&] {
    v1::SelectRequest sel;
    sel.set_instance(name);
    raced = via_owner.Select(sel);
  });
  // The owner's commit now waits inside bandit_fence for the row this transaction holds.
  ASSERT_TRUE(WaitFor([&] {
    return PostgresProcess::ExecOn(dsn, "SELECT count(*) FROM pg_locks WHERE NOT granted") != "0";
  }));
  PQclear(PQexec(takeover, ("UPDATE bandit_leases SET owner = '" + other +
                            "', owner_incarnation = (SELECT incarnation FROM bandit_nodes WHERE "
                            "node_id = '" +
                            other + "'), epoch = epoch + 1 WHERE instance = '" + name + "'")
                               .c_str()));
  PGresult* committed = PQexec(takeover, "COMMIT");
  ASSERT_EQ(PQresultStatus(committed), PGRES_COMMAND_OK);
  PQclear(committed);
  PQfinish(takeover);
  call.join();
  EXPECT_FALSE(raced.ok()) << "acknowledged a change fencing refused";
  EXPECT_EQ(raced.status().code(), absl::StatusCode::kUnavailable) << raced.status();
  EXPECT_EQ(PostgresProcess::ExecOn(dsn, "SELECT count(*) FROM bandit_journal WHERE instance = '" +
                                             name + "' AND record IS NOT NULL"),
            "11")
      << "the create and ten Selects; the refused one is not stored";
  // The old owner dropped it and forwards; the new owner has exactly the committed history.
  auto got = Retry([&] { return via_owner.GetInstance(name); });
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->stats().rounds(), 10);
  BanditClient via_other(nodes[other]->target());
  auto direct = via_other.GetInstance(name);
  ASSERT_TRUE(direct.ok()) << direct.status();
  EXPECT_EQ(direct->stats().rounds(), 10);
  EXPECT_NE(nodes[owner]->Log().find("fencing refused"), std::string::npos) << nodes[owner]->Log();
}

TEST(Cluster, AJoiningNodeTakesAboutAQuarterAndALeavingOneReleasesAtOnce) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  std::map<std::string, std::unique_ptr<ServerProcess>> nodes;
  for (const char* id : {"n1", "n2", "n3"}) nodes[id] = StartNode(dsn, id);
  BanditClient client(nodes["n1"]->target());
  const auto names = Names(40);
  for (const auto& name : names)
    ASSERT_TRUE(Retry([&] { return client.CreateInstance(CreateRequest(name)); }).ok()) << name;
  nodes["n4"] = StartNode(dsn, "n4");
  const std::vector<std::string> four = {"n1", "n2", "n3", "n4"};
  int expected_on_n4 = 0;
  for (const auto& name : names)
    expected_on_n4 += server::cluster::RendezvousOwner(four, name) == "n4";
  // Hand-offs happen at the owners' next heartbeats, the claims at n4's.
  ASSERT_TRUE(WaitFor([&] {
    const auto owners = Owners(dsn);
    for (const auto& name : names)
      if (owners.at(name) != server::cluster::RendezvousOwner(four, name)) return false;
    return true;
  })) << "placement did not converge to rendezvous over four nodes";
  EXPECT_GT(expected_on_n4, 40 / 4 / 3) << "about a quarter (a binomial draw)";
  for (const auto& name : names) {
    auto got = Retry([&] { return client.GetInstance(name); });
    ASSERT_TRUE(got.ok()) << name << ": " << got.status();
  }
  // n2 leaves gracefully: right after it exits none of its leases is held by it.
  nodes["n2"]->Stop(SIGTERM);
  EXPECT_EQ(PostgresProcess::ExecOn(dsn, "SELECT count(*) FROM bandit_leases WHERE owner = 'n2'"),
            "0");
  EXPECT_EQ(PostgresProcess::ExecOn(dsn, "SELECT count(*) FROM bandit_nodes WHERE node_id = 'n2'"),
            "0");
  const std::vector<std::string> three = {"n1", "n3", "n4"};
  for (const auto& name : names) {
    auto got = Retry([&] { return client.GetInstance(name); });
    ASSERT_TRUE(got.ok()) << name << ": " << got.status();
  }
  ASSERT_TRUE(WaitFor([&] {
    const auto owners = Owners(dsn);
    for (const auto& name : names)
      if (owners.at(name) != server::cluster::RendezvousOwner(three, name)) return false;
    return true;
  }));
}

TEST(Cluster, ThroughHAProxyNothingAcknowledgedIsLostWhenANodeIsKilled) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  std::vector<std::unique_ptr<ServerProcess>> nodes;
  for (const char* id : {"n1", "n2", "n3"}) nodes.push_back(StartNode(dsn, id));
  HaproxyProcess haproxy({nodes[0]->port(), nodes[1]->port(), nodes[2]->port()});
  BanditClient client(haproxy.target());
  const auto names = Names(12);
  for (const auto& name : names)
    ASSERT_TRUE(Retry([&] { return client.CreateInstance(CreateRequest(name)); }).ok())
        << name << "\n"
        << haproxy.Log();
  std::map<std::string, int64_t> acknowledged;
  auto rounds = [&](int n) {
    for (int i = 0; i < n; ++i) {
      for (const auto& name : names) {
        v1::SelectRequest sel;
        sel.set_instance(name);
        auto d = Retry([&] { return client.Select(sel); });
        ASSERT_TRUE(d.ok()) << name << ": " << d.status();
        v1::UpdateRequest up;
        up.set_instance(name);
        up.set_event_id(d->event_id());
        up.set_reward(0.5);
        auto u = Retry([&] { return client.Update(up); });
        if (u.ok())
          ++acknowledged[name];
        else
          EXPECT_EQ(u.status().code(), absl::StatusCode::kFailedPrecondition) << u.status();
      }
    }
  };
  rounds(5);
  nodes[1]->Stop(SIGKILL);
  rounds(5);
  for (const auto& name : names) {
    auto got = Retry([&] { return client.GetInstance(name); });
    ASSERT_TRUE(got.ok()) << got.status();
    // An update whose answer was lost with the node may be in (then a retry answered
    // FAILED_PRECONDITION, "already rewarded"): at least every acknowledged one is.
    EXPECT_GE(got->stats().updates(), acknowledged[name]) << name;
    EXPECT_LE(got->stats().updates(), 10) << name;
  }
  for (const auto& [name, owner] : Owners(dsn)) EXPECT_NE(owner, "n2") << name;
}

// kill -9 of a node at (seeded) random moments under concurrent load through HAProxy, five
// times, each killed node restarted on its port: every acknowledged update is in the instances
// at the end, and every instance is served again after each kill.
TEST(Cluster, RepeatedKillsUnderLoadThroughHAProxyLoseNothingAcknowledged) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  std::vector<int> ports = {FreePort(), FreePort(), FreePort()};
  std::vector<std::unique_ptr<ServerProcess>> nodes;
  auto args = [&](int i) {
    return std::vector<std::string>{"--storage=postgres",
                                    "--postgres_dsn=" + dsn,
                                    "--cluster",
                                    "--node_id=n" + std::to_string(i + 1),
                                    "--lease_ms=" + std::to_string(kLeaseMs),
                                    "--grace_period_ms=2000",
                                    "--listen=127.0.0.1:" + std::to_string(ports[i])};
  };
  for (int i = 0; i < 3; ++i) {
    nodes.push_back(std::make_unique<ServerProcess>(args(i)));
    ASSERT_TRUE(nodes.back()->running()) << nodes.back()->Log();
  }
  HaproxyProcess haproxy(ports);
  const auto names = Names(6);
  {
    BanditClient client(haproxy.target());
    for (const auto& name : names)
      ASSERT_TRUE(Retry([&] { return client.CreateInstance(CreateRequest(name)); }).ok()) << name;
  }
  std::map<std::string, std::atomic<int64_t>> acknowledged;
  for (const auto& name : names) acknowledged[name] = 0;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> failed{0};
  std::vector<std::thread> load;
  for (int t = 0; t < 3; ++t) {
    load.emplace_back([&, t] {
      BanditClient client(haproxy.target());
      for (int i = 0; !stop.load(); ++i) {
        const std::string& name = names[(i + t) % names.size()];
        v1::SelectRequest sel;
        sel.set_instance(name);
        auto d = Retry([&] { return client.Select(sel); });
        if (!d.ok()) {
          ++failed;
          ADD_FAILURE() << "Select of " << name << ": " << d.status();
          continue;
        }
        v1::UpdateRequest up;
        up.set_instance(name);
        up.set_event_id(d->event_id());
        up.set_reward(1.0);
        auto u = Retry([&] { return client.Update(up); });
        if (u.ok())
          ++acknowledged[name];
        else if (u.status().code() != absl::StatusCode::kFailedPrecondition) {
          ++failed;
          ADD_FAILURE() << "Update of " << name << ": " << u.status();
        }
      }
    });
  }
  std::mt19937 rng(20261124);
  for (int k = 0; k < 5; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + rng() % 700));
    const int victim = static_cast<int>(rng() % 3);
    nodes[victim]->Stop(SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(200 + rng() % 500));
    nodes[victim]->Start(args(victim));  // waits for its old membership to expire
    ASSERT_TRUE(nodes[victim]->running()) << nodes[victim]->Log();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  stop = true;
  for (auto& th : load) th.join();
  EXPECT_EQ(failed.load(), 0) << "a call the retry policy did not absorb";
  if (::testing::Test::HasFailure())
    for (size_t i = 0; i < nodes.size(); ++i) {
      std::cerr << "---- log of n" << i + 1 << " ----\n";
      std::istringstream log(nodes[i]->Log());
      for (std::string line; std::getline(log, line);)
        if (line.find("cluster") != std::string::npos || line.find("fenc") != std::string::npos ||
            line.find("WARN") != std::string::npos || line.find("ERROR") != std::string::npos)
          std::cerr << line << "\n";
    }
  BanditClient client(haproxy.target());
  int64_t total = 0;
  for (const auto& name : names) {
    auto got = Retry([&] { return client.GetInstance(name); });
    ASSERT_TRUE(got.ok()) << name << ": " << got.status();
    EXPECT_GE(got->stats().updates(), acknowledged[name].load()) << name;
    total += acknowledged[name].load();
  }
  EXPECT_GT(total, 0);
  std::cerr << "[ cluster ] " << total << " updates acknowledged across 5 kills\n";
}

// ExportDecisionLog is a server stream: a node that does not own the instance forwards the
// stream to the owner, chunk by chunk, so the export is the same from every node.
TEST(Cluster, TheDecisionLogExportsTheSameFromEveryNode) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  std::vector<std::unique_ptr<ServerProcess>> nodes;
  for (const char* id : {"n1", "n2", "n3"}) nodes.push_back(StartNode(dsn, id));
  std::vector<std::unique_ptr<BanditClient>> clients;
  for (auto& n : nodes) clients.push_back(std::make_unique<BanditClient>(n->target()));
  v1::CreateInstanceRequest create = CreateRequest("logged");
  create.mutable_config()->mutable_decision_log()->set_enabled(true);
  auto created = Retry([&] { return clients[0]->CreateInstance(create); });
  ASSERT_TRUE(created.ok()) << created.status();

  // 1300 decisions, more than two chunks of the stream (512 decisions each), made through every
  // node; every other one rewarded with a reward that names it.
  std::vector<std::string> event_ids;
  std::map<std::string, double> rewards;
  for (int b = 0; b < 5; ++b) {
    v1::SelectBatchRequest batch;
    for (int i = 0; i < 260; ++i) batch.add_requests()->set_instance("logged");
    auto r = Retry([&] { return clients[b % 3]->SelectBatch(batch); });
    ASSERT_TRUE(r.ok()) << r.status();
    v1::UpdateBatchRequest updates;
    for (int i = 0; i < r->decisions_size(); ++i) {
      ASSERT_EQ(r->statuses(i).code(), 0) << r->statuses(i).message();
      event_ids.push_back(r->decisions(i).event_id());
      if (event_ids.size() % 2 == 0) {
        auto* up = updates.add_requests();
        up->set_instance("logged");
        up->set_event_id(r->decisions(i).event_id());
        up->set_reward(static_cast<double>(event_ids.size()) / 1000.0);
        rewards[up->event_id()] = up->reward();
      }
    }
    auto u = Retry([&] { return clients[(b + 1) % 3]->UpdateBatch(updates); });
    ASSERT_TRUE(u.ok()) << u.status();
    for (const auto& st : u->statuses()) ASSERT_EQ(st.code(), 0) << st.message();
  }
  const std::string owner = Owners(dsn).at("logged");

  for (size_t n = 0; n < clients.size(); ++n) {
    SCOPED_TRACE("exported through n" + std::to_string(n + 1) + ", owner " + owner);
    std::vector<v1::LoggedDecision> got;
    v1::ExportDecisionLogRequest req;
    req.set_name("logged");
    ASSERT_TRUE(clients[n]
                    ->ExportDecisionLog(req,
                                        [&](const v1::LoggedDecision& d) {
                                          got.push_back(d);
                                          return absl::OkStatus();
                                        })
                    .ok());
    ASSERT_EQ(got.size(), event_ids.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].event_id(), event_ids[i]) << i;
      auto it = rewards.find(event_ids[i]);
      if (it == rewards.end()) {
        EXPECT_EQ(got[i].outcome(), v1::OUTCOME_PENDING) << i;
      } else {
        EXPECT_EQ(got[i].outcome(), v1::OUTCOME_REWARDED) << i;
        EXPECT_EQ(got[i].reward(), it->second) << i;
      }
      EXPECT_EQ(got[i].num_actions(), 6) << i;
      EXPECT_EQ(got[i].probabilities_size(), 6) << i;
    }
    // The request's range reaches the owner: resume after the 1000th decision.
    req.set_after_event_seq(got[999].event_seq());
    std::vector<std::string> tail;
    ASSERT_TRUE(clients[n]
                    ->ExportDecisionLog(req,
                                        [&](const v1::LoggedDecision& d) {
                                          tail.push_back(d.event_id());
                                          return absl::OkStatus();
                                        })
                    .ok());
    EXPECT_EQ(tail, std::vector<std::string>(event_ids.begin() + 1000, event_ids.end()));
    // A consumer that stops early ends the forwarded stream with its own status.
    int seen = 0;
    const absl::Status stopped = clients[n]->ExportDecisionLog(req, [&](const v1::LoggedDecision&) {
      return ++seen == 10 ? absl::AbortedError("enough") : absl::OkStatus();
    });
    EXPECT_EQ(stopped.code(), absl::StatusCode::kAborted);
    // Errors come from the owner, unchanged.
    v1::ExportDecisionLogRequest missing;
    missing.set_name("no-such-instance");
    EXPECT_EQ(
        clients[n]
            ->ExportDecisionLog(missing, [](const v1::LoggedDecision&) { return absl::OkStatus(); })
            .code(),
        absl::StatusCode::kNotFound);
  }
  // After the cancelled streams, every node still serves (no stream was left hanging).
  for (auto& c : clients) EXPECT_TRUE(Retry([&] { return c->GetInstance("logged"); }).ok());
}

// Shadows in a cluster: AddShadow sent to a node that does not own the instance reaches the
// owner; the shadow's estimates are the same from every node; after kill -9 of the owner the
// node that takes over has the shadow with exactly the acknowledged history (its estimates and
// next decisions equal an uninterrupted in-process twin's).
TEST(Cluster, ShadowsAreForwardedSeenFromEveryNodeAndSurviveKillNineOfTheOwner) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  std::map<std::string, std::unique_ptr<ServerProcess>> nodes;
  for (const char* id : {"n1", "n2", "n3"}) nodes[id] = StartNode(dsn, id);
  const std::string name = "shadowed";
  const std::string owner = server::cluster::RendezvousOwner({"n1", "n2", "n3"}, name);
  std::vector<std::string> others;
  for (const char* id : {"n1", "n2", "n3"})
    if (id != owner) others.push_back(id);
  std::map<std::string, std::unique_ptr<BanditClient>> clients;
  for (auto& [id, n] : nodes) clients[id] = std::make_unique<BanditClient>(n->target());
  BanditClient& entry = *clients[others[0]];  // never the owner
  ASSERT_TRUE(Retry([&] { return entry.CreateInstance(CreateRequest(name, 77)); }).ok());
  v1::AddShadowRequest add;
  add.set_name(name);
  add.set_shadow("uniform");
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "policy { epsilon_greedy { epsilon: 1 } num_arms: 6 } seed: 5", add.mutable_config()));
  auto added = Retry([&] { return entry.AddShadow(add); });
  ASSERT_TRUE(added.ok()) << added.status();
  ASSERT_EQ(added->shadows_size(), 1);
  // The owner has it (asked directly, nothing forwarded).
  {
    auto at_owner = Retry([&] { return clients[owner]->GetInstance(name); });
    ASSERT_TRUE(at_owner.ok()) << at_owner.status();
    ASSERT_EQ(at_owner->shadows_size(), 1);
    EXPECT_EQ(at_owner->shadows(0).name(), "uniform");
  }

  server::DecisionService twin;
  v1::Instance out;
  ASSERT_TRUE(twin.CreateInstance(CreateRequest(name, 77), &out).ok());
  ASSERT_TRUE(twin.AddShadow(add, &out).ok());
  auto twin_shadow = [&] {
    v1::GetInstanceRequest r;
    r.set_name(name);
    v1::Instance tw;
    EXPECT_TRUE(twin.GetInstance(r, &tw).ok());
    return tw.shadows(0);
  };
  // Rounds through the nodes that live to the end, in turn (forwarded to the owner).
  auto round = [&](int i) {
    BanditClient& c = *clients[others[i % 2]];
    v1::SelectRequest sel;
    sel.set_instance(name);
    auto d = Retry([&] { return c.Select(sel); });
    ASSERT_TRUE(d.ok()) << d.status();
    v1::Decision td;
    ASSERT_TRUE(twin.Select(sel, &td).ok());
    EXPECT_EQ(d->arm_id(), td.arm_id()) << "round " << i;
    v1::UpdateRequest up;
    up.set_instance(name);
    up.set_event_id(d->event_id());
    up.set_reward((std::stoi(d->arm_id()) * 3 + i) % 4 == 0 ? 1.0 : 0.0);
    auto u = Retry([&] { return c.Update(up); });
    ASSERT_TRUE(u.ok()) << u.status();
    v1::UpdateRequest tu = up;
    tu.set_event_id(td.event_id());
    v1::UpdateResponse tr;
    ASSERT_TRUE(twin.Update(tu, &tr).ok());
  };
  auto expect_twin_estimates = [&](const v1::ShadowStatus& got, const std::string& where) {
    const v1::ShadowStatus want = twin_shadow();
    EXPECT_EQ(got.name(), "uniform") << where;
    EXPECT_EQ(got.events(), want.events()) << where;
    EXPECT_EQ(got.ips().value(), want.ips().value()) << where;
    EXPECT_EQ(got.snips().value(), want.snips().value()) << where;
    EXPECT_EQ(got.dr().value(), want.dr().value()) << where;
    EXPECT_EQ(got.dr().se(), want.dr().se()) << where;
    EXPECT_EQ(got.served().value(), want.served().value()) << where;
  };
  for (int i = 0; i < 60; ++i) {
    round(i);
    if (::testing::Test::HasFatalFailure()) return;
  }
  for (auto& [id, c] : clients) {
    auto got = Retry([&] { return c->GetInstance(name); });
    ASSERT_TRUE(got.ok()) << id << ": " << got.status();
    ASSERT_EQ(got->shadows_size(), 1) << id;
    EXPECT_EQ(got->shadows(0).events(), 60) << id;
    expect_twin_estimates(got->shadows(0), "before the kill, from " + id);
  }

  // The owner dies between two acknowledged rounds; the node that takes over has the shadow
  // with every acknowledged event.
  nodes[owner]->Stop(SIGKILL);
  auto after = Retry([&] { return entry.GetInstance(name); });
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_EQ(after->shadows_size(), 1);
  EXPECT_EQ(after->shadows(0).events(), 60);
  expect_twin_estimates(after->shadows(0), "after the kill");
  // It goes on exactly as the twin (next decisions, the shadow's estimates).
  for (int i = 60; i < 100; ++i) {
    round(i);
    if (::testing::Test::HasFatalFailure()) return;
  }
  for (const auto& id : others) {
    auto got = Retry([&] { return clients[id]->GetInstance(name); });
    ASSERT_TRUE(got.ok()) << id << ": " << got.status();
    ASSERT_EQ(got->shadows_size(), 1) << id;
    EXPECT_EQ(got->shadows(0).events(), 100) << id;
    expect_twin_estimates(got->shadows(0), "after the takeover, from " + id);
  }
  EXPECT_NE(Owners(dsn).at(name), owner);
}

// The value of the metric line `series` (name{labels}) on a node's /metrics page, -1 if absent.
double Metric(const ServerProcess& node, const std::string& series) {
  const std::string page = bandit::testing::HttpGet(node.metrics_port(), "/metrics");
  size_t at = page.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  at += series.size() + 2;
  double v = -1;
  (void)absl::SimpleAtod(page.substr(at, page.find('\n', at) - at), &v);
  return v;
}

double Accounted(const ServerProcess& node) {
  double total = 0;
  for (const char* kind : {"policy", "pending", "decision_log", "shadows", "instance_overhead"})
    total += Metric(node, std::string("bandit_memory_accounted_bytes{kind=\"") + kind + "\"}");
  return total;
}

// The first name "<prefix>-<i>" whose weights put the nodes in `order` (highest first).
std::string NameInOrder(const std::string& prefix, const std::vector<std::string>& order) {
  for (int i = 0;; ++i) {
    const std::string name = prefix + "-" + std::to_string(i);
    bool ok = true;
    for (size_t k = 1; k < order.size(); ++k)
      ok = ok && server::cluster::RendezvousWeight(order[k - 1], name) >
                     server::cluster::RendezvousWeight(order[k], name);
    if (ok) return name;
  }
}

// Node "small" has a budget with room for a small instance but not for "big" (LinUCB at d = 1024:
// 8.4 MB of state against 4 MiB); "b" and "c" have room. Both instances are placed on b first.
// When b dies: small takes the small instance as usual and declines big (counter, log, lease
// freed, decline recorded), loads nothing past its budget, does not claim big again on its
// heartbeats, and answers calls for it with RESOURCE_EXHAUSTED naming the nodes that declined;
// once c joins, placement passes over small, c takes big, and calls through small reach c,
// where every acknowledged update is.
TEST(Cluster, ANodeWithoutRoomDeclinesATakeoverAndTheNextNodeWithRoomTakesIt) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  constexpr int64_t kSmallBudget = int64_t{4} << 20;
  constexpr int kDim = 1024;
  std::map<std::string, std::unique_ptr<ServerProcess>> nodes;
  nodes["small"] =
      StartNode(dsn, "small", kLeaseMs, {"--max_memory_bytes=" + std::to_string(kSmallBudget)});
  nodes["b"] = StartNode(dsn, "b", kLeaseMs, {"--max_memory_bytes=256M"});
  // big: on b, then small. tiny: on b, then small, then c (small keeps it when c joins).
  const std::string big = NameInOrder("big", {"b", "small"});
  const std::string tiny = NameInOrder("tiny", {"b", "small", "c"});
  BanditClient via_small(nodes["small"]->target());
  v1::CreateInstanceRequest create_big;
  create_big.set_name(big);
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "policy { linucb { dimension: 1024 } } seed: 5", create_big.mutable_config()));
  auto created = Retry([&] { return via_small.CreateInstance(create_big); });
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE(Retry([&] { return via_small.CreateInstance(CreateRequest(tiny)); }).ok());
  {
    const auto owners = Owners(dsn);
    ASSERT_EQ(owners.at(big), "b");
    ASSERT_EQ(owners.at(tiny), "b");
  }

  // Acknowledged rounds on both (through small, forwarded to b), and one decision of big left
  // pending.
  v1::SelectRequest sel_big;
  sel_big.set_instance(big);
  for (int c = 0; c < 2; ++c) {
    auto* v = sel_big.add_candidates();
    for (int j = 0; j < kDim; ++j) v->add_values(0.001 * ((j + c) % 7));
  }
  double big_rewards = 0;
  int big_updates = 0;
  auto round = [&](const std::string& name, double reward) {
    v1::SelectRequest sel;
    if (name == big) {
      sel = sel_big;
    } else {
      sel.set_instance(name);
    }
    auto d = Retry([&] { return via_small.Select(sel); });
    ASSERT_TRUE(d.ok()) << d.status();
    v1::UpdateRequest up;
    up.set_instance(name);
    up.set_event_id(d->event_id());
    up.set_reward(reward);
    auto u = Retry([&] { return via_small.Update(up); });
    ASSERT_TRUE(u.ok()) << u.status();
    if (name == big) {
      big_rewards += reward;
      ++big_updates;
    }
  };
  for (int i = 0; i < 20; ++i) {
    round(big, 0.05 * i);
    round(tiny, 1.0);
  }
  auto pending = Retry([&] { return via_small.Select(sel_big); });
  ASSERT_TRUE(pending.ok()) << pending.status();

  // The owner dies without a word.
  nodes["b"]->Stop(SIGKILL);
  ASSERT_TRUE(WaitFor([&] {
    return Metric(*nodes["small"], "bandit_cluster_declined_instances_total") >= 1 &&
           Owners(dsn)[tiny] == "small";
  })) << nodes["small"]->Log();
  EXPECT_TRUE(absl::StrContains(nodes["small"]->Log(),
                                "cluster: node 'small' declined instance '" + big + "'"))
      << nodes["small"]->Log();
  EXPECT_EQ(Owners(dsn).at(big), "-") << "the lease is freed, not held by a node without room";
  EXPECT_EQ(PostgresProcess::ExecOn(dsn, "SELECT string_agg(node_id, ',') FROM bandit_declines "
                                         "WHERE instance = '" + big + "'"),
            "small");
  // Nothing past small's budget was loaded, and small serves what fits.
  EXPECT_LE(Accounted(*nodes["small"]), static_cast<double>(kSmallBudget));
  EXPECT_GT(Metric(*nodes["small"], "bandit_memory_refusals_total{operation=\"takeover\"}"), 0);
  auto got_tiny = via_small.GetInstance(tiny);
  ASSERT_TRUE(got_tiny.ok()) << got_tiny.status();
  EXPECT_EQ(got_tiny->stats().updates(), 20);
  // A call for big through small: a clear refusal naming who declined it, not a crash.
  auto refused = via_small.GetInstance(big);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "every live node declined"))
      << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "'small' (needs "))
      << refused.status();
  // Over several heartbeats small does not claim big again (no claim, load and decline loop).
  std::this_thread::sleep_for(std::chrono::milliseconds(3 * kLeaseMs));
  EXPECT_EQ(Metric(*nodes["small"], "bandit_cluster_declined_instances_total"), 1)
      << nodes["small"]->Log();
  EXPECT_EQ(Owners(dsn).at(big), "-");
  EXPECT_TRUE(nodes["small"]->running());

  // A node with room joins: placement passes over small, c takes big with everything acknowledged.
  nodes["c"] = StartNode(dsn, "c", kLeaseMs, {"--max_memory_bytes=256M"});
  ASSERT_TRUE(WaitFor([&] { return Owners(dsn).at(big) == "c"; })) << nodes["c"]->Log();
  auto got = Retry([&] { return via_small.GetInstance(big); });
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->stats().updates(), big_updates) << "every acknowledged update is there";
  EXPECT_DOUBLE_EQ(got->stats().reward_sum(), big_rewards);
  EXPECT_EQ(got->stats().pending(), 1) << "the acknowledged pending decision too";
  v1::UpdateRequest late;
  late.set_instance(big);
  late.set_event_id(pending->event_id());
  late.set_reward(1);
  ASSERT_TRUE(Retry([&] { return via_small.Update(late); }).ok());
  round(big, 0.5);
  got = via_small.GetInstance(big);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->stats().updates(), big_updates + 1);
  EXPECT_EQ(Owners(dsn).at(tiny), "small") << "small keeps what fits";
  EXPECT_EQ(Metric(*nodes["small"], "bandit_cluster_declined_instances_total"), 1);
  EXPECT_LE(Accounted(*nodes["small"]), static_cast<double>(kSmallBudget));
}

}  // namespace
}  // namespace bandit
