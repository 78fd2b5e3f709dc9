// Bounded soak against the real banditd: several client threads run a mixed load (Select,
// Update, batches, Get/List, lifecycle) with malformed requests interleaved (NaN, wrong
// dimensions, unknown instances and events, double rewards, oversized batches and messages,
// too many candidates, full pending tables). Checked:
//   * every call ends with a status code expected for that request (nothing else, ever);
//   * the server never crashes and stays SERVING;
//   * resident memory after the run is within a generous bound of the warmed-up value;
//   * every acknowledged update was applied: the server's per-instance `updates` equals the
//     number of Update/UpdateBatch items the clients saw succeed, also after a restart.
// Duration: SOAK_SECONDS (ctest: 8 s, tens of thousands of calls; `make soak`: 60 s).
#include <dirent.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "client/cpp/bandit_client.h"
#include "tests/integration/server_process.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using absl::StatusCode;
using client::BanditClient;
using testing::ServerProcess;
namespace v1 = bandit::v1;

int64_t SoakSeconds() {
  const char* v = std::getenv("SOAK_SECONDS");
  return v ? std::max(1, std::atoi(v)) : 8;
}

// The banditd whose command line holds `needle` (its unique data dir).
int FindPid(const std::string& needle) {
  DIR* d = opendir("/proc");
  int found = -1;
  while (dirent* e = readdir(d)) {
    const int pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream f(absl::StrCat("/proc/", pid, "/cmdline"));
    std::string cmd((std::istreambuf_iterator<char>(f)), {});
    if (cmd.find(needle) != std::string::npos && cmd.find("banditd") != std::string::npos) {
      found = pid;
      break;
    }
  }
  closedir(d);
  return found;
}

int64_t RssKb(int pid) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
  return -1;
}

constexpr int kDim = 4;
const char* const kInstances[] = {"ucb", "lin", "tight"};

struct Tally {
  std::mutex mu;
  std::map<std::string, int64_t> acked;  // instance -> acknowledged updates
  std::map<std::string, int64_t> calls;  // op -> count
  std::vector<std::string> unexpected;
  void Ack(const std::string& inst, int64_t n = 1) {
    std::lock_guard<std::mutex> l(mu);
    acked[inst] += n;
  }
  void Expect(const std::string& op, StatusCode got, std::set<StatusCode> want,
              const std::string& msg = "") {
    std::lock_guard<std::mutex> l(mu);
    ++calls[op];
    if (!want.count(got) && unexpected.size() < 20)
      unexpected.push_back(absl::StrCat(op, ": ", absl::StatusCodeToString(got), " ", msg));
  }
};

void Worker(const std::string& target, int seed, std::chrono::steady_clock::time_point until,
            Tally* tally) {
  client::ClientOptions o;
  o.deadline = std::chrono::milliseconds(10'000);
  o.max_message_bytes = 4 << 20;  // the client may send more than the server accepts
  BanditClient c(target, o);
  std::mt19937_64 rng(seed);
  auto uni = [&](int n) { return static_cast<int>(rng() % n); };
  auto vec = [&](v1::FeatureVector* f, int dim) {
    for (int i = 0; i < dim; ++i) f->add_values((rng() % 1000) / 1000.0);
  };
  std::vector<std::pair<std::string, std::string>> rewarded;  // for double-reward probes
  while (std::chrono::steady_clock::now() < until) {
    const int op = uni(20);
    if (op < 8) {  // valid select + update (the bulk of the traffic)
      const std::string inst = kInstances[uni(2)];
      v1::SelectRequest s;
      s.set_instance(inst);
      if (inst == "lin")
        for (int k = 0; k < 3; ++k) vec(s.add_candidates(), kDim);
      auto d = c.Select(s);
      tally->Expect("select", d.status().code(), {StatusCode::kOk},
                    std::string(d.status().message()));
      if (!d.ok() || uni(4) == 0) continue;  // some decisions stay pending
      v1::UpdateRequest u;
      u.set_instance(inst);
      u.set_event_id(d->event_id());
      u.set_reward(uni(2));
      auto r = c.Update(u);
      tally->Expect("update", r.status().code(), {StatusCode::kOk},
                    std::string(r.status().message()));
      if (r.ok()) {
        tally->Ack(inst);
        // Recent events only: the server remembers the fate of the last `capacity` events.
        if (rewarded.size() >= 16) rewarded.erase(rewarded.begin());
        rewarded.push_back({inst, d->event_id()});
      }
    } else if (op == 8) {  // batch select + batch update with one bad item
      v1::SelectBatchRequest sb;
      for (int i = 0; i < 5; ++i) sb.add_requests()->set_instance("ucb");
      auto sr = c.SelectBatch(sb);
      tally->Expect("select_batch", sr.status().code(), {StatusCode::kOk});
      if (!sr.ok()) continue;
      v1::UpdateBatchRequest ub;
      for (const auto& d : sr->decisions()) {
        auto* u = ub.add_requests();
        u->set_instance("ucb");
        u->set_event_id(d.event_id());
        u->set_reward(1);
      }
      auto* bad = ub.add_requests();
      bad->set_instance("ucb");
      bad->set_event_id("no-such-event");
      auto ur = c.UpdateBatch(ub);
      tally->Expect("update_batch", ur.status().code(), {StatusCode::kOk});
      if (!ur.ok()) continue;
      int64_t ok = 0;
      for (int i = 0; i < ur->statuses_size(); ++i) {
        const auto code = static_cast<StatusCode>(ur->statuses(i).code());
        tally->Expect("update_batch_item", code,
                      i + 1 == ur->statuses_size() ? std::set{StatusCode::kNotFound}
                                                   : std::set{StatusCode::kOk});
        ok += code == StatusCode::kOk;
      }
      tally->Ack("ucb", ok);
    } else if (op == 9) {  // NaN / Inf in vectors
      v1::SelectRequest s;
      s.set_instance("lin");
      auto* f = s.add_candidates();
      vec(f, kDim);
      f->set_values(uni(kDim), uni(2) ? NAN : INFINITY);
      tally->Expect("select_nan", c.Select(s).status().code(), {StatusCode::kInvalidArgument});
    } else if (op == 10) {  // wrong dimension, and x for a candidates policy
      v1::SelectRequest s;
      s.set_instance("lin");
      vec(s.add_candidates(), kDim + 1 + uni(3));
      tally->Expect("select_dim", c.Select(s).status().code(), {StatusCode::kInvalidArgument});
      v1::SelectRequest x;
      x.set_instance("ucb");
      x.add_x(1.0);
      tally->Expect("select_x", c.Select(x).status().code(), {StatusCode::kInvalidArgument});
    } else if (op == 11) {  // unknown / malformed instance names
      v1::SelectRequest s;
      s.set_instance(uni(2) ? "missing" : "bad name!");
      tally->Expect("select_unknown", c.Select(s).status().code(),
                    {StatusCode::kNotFound, StatusCode::kInvalidArgument});
    } else if (op == 12) {  // unknown event, no target, double reward
      v1::UpdateRequest u;
      u.set_instance("ucb");
      u.set_reward(1);
      tally->Expect("update_no_target", c.Update(u).status().code(),
                    {StatusCode::kInvalidArgument});
      u.set_event_id(absl::StrCat("ffff-", rng()));
      tally->Expect("update_unknown", c.Update(u).status().code(), {StatusCode::kNotFound});
      if (!rewarded.empty()) {
        const auto& [inst, ev] = rewarded[uni(rewarded.size())];
        u.set_instance(inst);
        u.set_event_id(ev);
        tally->Expect("update_twice", c.Update(u).status().code(),
                      {StatusCode::kFailedPrecondition});
      }
      u.set_event_id("x");
      u.set_reward(NAN);
      tally->Expect("update_nan", c.Update(u).status().code(), {StatusCode::kInvalidArgument});
    } else if (op == 13) {  // limits: batch size, candidates, message size
      v1::SelectBatchRequest sb;
      for (int i = 0; i < 65; ++i) sb.add_requests()->set_instance("ucb");
      tally->Expect("batch_too_big", c.SelectBatch(sb).status().code(),
                    {StatusCode::kInvalidArgument});
      v1::SelectRequest s;
      s.set_instance("lin");
      for (int k = 0; k < 129; ++k) vec(s.add_candidates(), kDim);
      tally->Expect("too_many_candidates", c.Select(s).status().code(),
                    {StatusCode::kInvalidArgument});
      if (uni(4) == 0) {
        v1::SelectRequest big;
        big.set_instance("lin");
        for (int i = 0; i < 300'000; ++i) big.add_x(0.5);  // 2.4 MB > --max_message_bytes
        tally->Expect("message_too_big", c.Select(big).status().code(),
                      {StatusCode::kResourceExhausted});
      }
    } else if (op == 14) {  // a tiny pending table fills up: RESOURCE_EXHAUSTED, never more
      v1::SelectRequest s;
      s.set_instance("tight");
      auto d = c.Select(s);
      tally->Expect("select_tight", d.status().code(),
                    {StatusCode::kOk, StatusCode::kResourceExhausted});
    } else if (op == 15) {  // readers
      tally->Expect("get", c.GetInstance(kInstances[uni(3)]).status().code(), {StatusCode::kOk});
      tally->Expect("list", c.ListInstances(uni(5), "").status().code(), {StatusCode::kOk});
      tally->Expect("list_bad", c.ListInstances(-1, "").status().code(),
                    {StatusCode::kInvalidArgument});
    } else if (op == 16) {  // short-lived instances: create, use, delete
      const std::string name = absl::StrCat("tmp-", seed, "-", uni(4));
      v1::CreateInstanceRequest cr;
      cr.set_name(name);
      cr.mutable_config()->mutable_policy()->mutable_ucb1();
      cr.mutable_config()->mutable_policy()->set_num_arms(2);
      tally->Expect("create_tmp", c.CreateInstance(cr).status().code(),
                    {StatusCode::kOk, StatusCode::kAlreadyExists});
      v1::SelectRequest s;
      s.set_instance(name);
      tally->Expect("select_tmp", c.Select(s).status().code(), {StatusCode::kOk});
      tally->Expect("delete_tmp", c.DeleteInstance(name).code(), {StatusCode::kOk});
    } else if (op == 17) {  // bad configs
      v1::CreateInstanceRequest cr;
      cr.set_name("badcfg");
      cr.mutable_config()->mutable_policy()->mutable_linucb()->set_dimension(uni(2) ? 100'000 : -1);
      tally->Expect("create_bad", c.CreateInstance(cr).status().code(),
                    {StatusCode::kInvalidArgument});
      cr.mutable_config()->mutable_policy()->mutable_linucb()->set_dimension(2);
      cr.set_name(std::string(200, 'n'));
      tally->Expect("create_long_name", c.CreateInstance(cr).status().code(),
                    {StatusCode::kInvalidArgument});
    } else {  // direct (logged) updates
      v1::UpdateRequest u;
      u.set_instance("lin");
      u.set_reward(0.5);
      for (int i = 0; i < kDim; ++i) u.mutable_direct()->add_features(0.25);
      auto r = c.Update(u);
      tally->Expect("update_direct", r.status().code(), {StatusCode::kOk});
      if (r.ok()) tally->Ack("lin");
    }
  }
}

TEST(Soak, MixedLoadWithMalformedRequests) {
  ServerProcess server({"--durability=everysec", "--max_message_bytes=1048576",
                        "--max_batch_items=64", "--max_candidates=128", "--max_feature_dim=64",
                        "--snapshot_interval_ms=5000", "--snapshot_every_changes=2000"});
  ASSERT_TRUE(server.running()) << server.Log();
  const int pid = FindPid(server.dir() + "/data");
  ASSERT_GT(pid, 0);
  {
    BanditClient c(server.target());
    for (const auto& [name, cfg] : std::vector<std::pair<std::string, std::string>>{
             {"ucb", "ucb"}, {"lin", "lin"}, {"tight", "tight"}}) {
      v1::CreateInstanceRequest cr;
      cr.set_name(name);
      auto* p = cr.mutable_config()->mutable_policy();
      if (cfg == "lin") {
        p->mutable_linucb()->set_dimension(kDim);
      } else {
        p->mutable_ucb1();
        p->set_num_arms(4);
      }
      if (cfg == "tight") {
        cr.mutable_config()->mutable_pending()->set_capacity(8);
        cr.mutable_config()->mutable_pending()->set_on_expiry(v1::DROP);
      }
      ASSERT_TRUE(c.CreateInstance(cr).ok()) << name;
    }
  }
  Tally tally;
  const int64_t total = SoakSeconds();
  const auto start = std::chrono::steady_clock::now();
  const auto until = start + std::chrono::seconds(total);
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back(Worker, server.target(), 1000 + t, until, &tally);
  // Warm-up RSS after a fifth of the run (allocator pools, gRPC threads and caches are in place).
  std::this_thread::sleep_for(std::chrono::seconds(std::max<int64_t>(1, total / 5)));
  const int64_t rss_warm = RssKb(pid);
  for (auto& t : threads) t.join();
  const int64_t rss_end = RssKb(pid);
  ASSERT_TRUE(server.running());

  int64_t calls = 0;
  for (const auto& [op, n] : tally.calls) calls += n;
  std::printf("soak: %lld s, %lld calls, RSS warm %lld kB, end %lld kB\n",
              static_cast<long long>(total), static_cast<long long>(calls),
              static_cast<long long>(rss_warm), static_cast<long long>(rss_end));
  for (const auto& [op, n] : tally.calls)
    std::printf("  %-22s %lld\n", op.c_str(), static_cast<long long>(n));
  EXPECT_TRUE(tally.unexpected.empty()) << ::testing::PrintToString(tally.unexpected);
  EXPECT_GT(tally.calls["select"], 100);
  EXPECT_GT(tally.calls["select_nan"], 0);
  // Generous: pending decisions legitimately grow (a quarter of selects are never rewarded);
  // a leak per request would exceed this by far over tens of thousands of calls.
  EXPECT_LT(rss_end, rss_warm * 2 + 64 * 1024) << "RSS grew from " << rss_warm << " to " << rss_end;

  BanditClient c(server.target());
  auto health = c.Health();
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(*health, grpc::health::v1::HealthCheckResponse::SERVING);
  std::map<std::string, int64_t> applied;
  for (const char* name : kInstances) {
    auto inst = c.GetInstance(name);
    ASSERT_TRUE(inst.ok()) << name;
    applied[name] = inst->stats().updates();
    EXPECT_EQ(inst->stats().updates(), tally.acked[name]) << name;
  }
  // And they survive a restart (graceful stop: final snapshot + journal).
  EXPECT_EQ(server.Stop(SIGTERM), 0);
  ServerProcess again({}, server.dir());
  ASSERT_TRUE(again.running()) << again.Log();
  BanditClient c2(again.target());
  for (const char* name : kInstances) {
    auto inst = c2.GetInstance(name);
    ASSERT_TRUE(inst.ok()) << name;
    EXPECT_EQ(inst->stats().updates(), applied[name]) << name;
  }
}

}  // namespace
}  // namespace bandit
