// kill -9 the real banditd under a load of concurrent selects and updates, several times, and
// compare what the restarted server knows with what clients saw acknowledged.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <thread>

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "client/cpp/bandit_client.h"
#include "core/rng.h"
#include "tests/common/temp_dir.h"
#include "tests/integration/server_process.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using bandit::client::BanditClient;
using bandit::testing::ServerProcess;
using google::protobuf::util::MessageDifferencer;
namespace v1 = bandit::v1;
using Clock = std::chrono::steady_clock;

struct CycleResult {
  int64_t acknowledged = 0;        // updates the server confirmed
  int64_t attempted = 0;           // updates sent (acknowledged or not)
  int64_t acknowledged_early = 0;  // confirmed more than `window` before the kill
};

CycleResult LoadThenKill(ServerProcess& server, int threads, int kill_after_ms,
                         std::chrono::milliseconds window) {
  std::atomic<bool> stop{false};
  std::atomic<int64_t> acked{0}, attempted{0};
  std::vector<std::vector<Clock::time_point>> ack_times(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      bandit::client::ClientOptions o;
      o.deadline = std::chrono::milliseconds(2000);
      BanditClient client(server.target(), o);
      for (int i = 0; !stop.load(); ++i) {
        v1::SelectRequest sel;
        sel.set_instance("crash");
        auto d = client.Select(sel);
        if (!d.ok()) continue;
        v1::UpdateRequest up;
        up.set_instance("crash");
        up.set_event_id(d->event_id());
        up.set_reward((i + t) % 3 == 0 ? 1.0 : 0.0);
        ++attempted;
        if (client.Update(up).ok()) {
          ++acked;
          ack_times[t].push_back(Clock::now());
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(kill_after_ms));
  const auto killed_at = Clock::now();
  server.Stop(SIGKILL);
  stop = true;
  for (auto& w : workers) w.join();
  CycleResult r;
  r.acknowledged = acked;
  r.attempted = attempted;
  for (const auto& times : ack_times)
    for (auto at : times) r.acknowledged_early += at < killed_at - window;
  return r;
}

void RunCrashCycles(const std::string& durability, std::chrono::milliseconds window,
                    bool expect_all_acknowledged) {
  const bandit::testing::TempDir temp("banditd-crash");
  const std::string& dir = temp.path();
  const std::vector<std::string> args = {"--durability=" + durability,
                                         "--snapshot_every_changes=150"};
  Rng rng(2024);  // deterministic kill moments
  int64_t acknowledged = 0, attempted = 0, early = 0;
  {
    ServerProcess server(args, dir);
    ASSERT_TRUE(server.running()) << server.Log();
    BanditClient client(server.target());
    v1::CreateInstanceRequest create;
    create.set_name("crash");
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
        "policy { epsilon_greedy { epsilon: 0.2 } num_arms: 5 }", create.mutable_config()));
    ASSERT_TRUE(client.CreateInstance(create).ok());
    const auto r = LoadThenKill(server, 4, 300 + static_cast<int>(rng.UniformInt(400)), window);
    acknowledged += r.acknowledged;
    attempted += r.attempted;
    early += r.acknowledged_early;
  }
  for (int cycle = 0; cycle < 3; ++cycle) {
    ServerProcess server(args, dir);
    ASSERT_TRUE(server.running()) << server.Log();
    BanditClient client(server.target());
    auto got = client.GetInstance("crash");
    ASSERT_TRUE(got.ok()) << got.status() << server.Log();
    const int64_t recovered = got->stats().updates();
    // Never more than was sent; never less than what was acknowledged (or, in everysec, what
    // was acknowledged before the loss window).
    EXPECT_LE(recovered, attempted) << "cycle " << cycle;
    if (expect_all_acknowledged) {
      EXPECT_GE(recovered, acknowledged) << "cycle " << cycle << ": lost acknowledged updates";
    } else {
      EXPECT_GE(recovered, early) << "cycle " << cycle << ": lost updates older than the window";
    }
    // Continue from what the server has, so later cycles compare against its own history.
    acknowledged = attempted = early = recovered;
    const auto r = LoadThenKill(server, 4, 300 + static_cast<int>(rng.UniformInt(400)), window);
    acknowledged += r.acknowledged;
    attempted += r.attempted;
    early += r.acknowledged_early;
    EXPECT_GT(r.acknowledged, 0) << "no load reached the server in cycle " << cycle;
  }
  ServerProcess server(args, dir);
  ASSERT_TRUE(server.running());
  BanditClient client(server.target());
  auto got = client.GetInstance("crash");
  ASSERT_TRUE(got.ok());
  EXPECT_LE(got->stats().updates(), attempted);
  if (expect_all_acknowledged)
    EXPECT_GE(got->stats().updates(), acknowledged);
  else
    EXPECT_GE(got->stats().updates(), early);
  server.Stop(SIGTERM);
}

TEST(Crash, AlwaysLosesNoAcknowledgedUpdate) {
  RunCrashCycles("always", std::chrono::milliseconds(0), true);
}

// Batches in `always`: SelectBatch / UpdateBatch calls mixing two instances and a bad item
// each, from several clients, then kill -9. Every item acknowledged OK is recovered, per
// instance; then one batch acknowledged and killed at once is recovered exactly.
TEST(Crash, AlwaysRecoversEveryAcknowledgedBatchItem) {
  const bandit::testing::TempDir temp("banditd-crash-batch");
  const std::string& dir = temp.path();
  const std::vector<std::string> args = {"--durability=always", "--snapshot_every_changes=150"};
  const std::vector<std::string> names = {"ba", "bb"};
  constexpr int kThreads = 3, kItems = 8;  // good items per batch, alternating instances
  std::map<std::string, std::atomic<int64_t>> selects_acked, selects_sent, updates_acked,
      updates_sent;
  for (const auto& n : names)
    selects_acked[n] = selects_sent[n] = updates_acked[n] = updates_sent[n] = 0;
  {
    ServerProcess server(args, dir);
    ASSERT_TRUE(server.running()) << server.Log();
    BanditClient client(server.target());
    for (const auto& n : names) {
      v1::CreateInstanceRequest create;
      create.set_name(n);
      ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
          "policy { epsilon_greedy { epsilon: 0.2 } num_arms: 5 }", create.mutable_config()));
      ASSERT_TRUE(client.CreateInstance(create).ok());
    }
    std::atomic<bool> stop{false};
    std::vector<std::thread> workers;
    for (int t = 0; t < kThreads; ++t) {
      workers.emplace_back([&, t] {
        bandit::client::ClientOptions o;
        o.deadline = std::chrono::milliseconds(2000);
        BanditClient c(server.target(), o);
        for (int round = 0; !stop.load(); ++round) {
          v1::SelectBatchRequest sb;
          for (int i = 0; i < kItems; ++i) sb.add_requests()->set_instance(names[i % 2]);
          sb.add_requests()->set_instance("nobody");  // fails alone
          for (int i = 0; i < kItems; ++i) ++selects_sent.at(names[i % 2]);
          auto sr = c.SelectBatch(sb);
          if (!sr.ok()) continue;
          v1::UpdateBatchRequest ub;
          for (int i = 0; i < kItems; ++i) {
            if (sr->statuses(i).code() != 0) continue;
            ++selects_acked.at(names[i % 2]);
            auto* u = ub.add_requests();
            u->set_instance(names[i % 2]);
            u->set_event_id(sr->decisions(i).event_id());
            u->set_reward((i + t + round) % 3 == 0 ? 1.0 : 0.0);
          }
          EXPECT_EQ(sr->statuses(kItems).code(), static_cast<int>(absl::StatusCode::kNotFound));
          auto* bad = ub.add_requests();  // fails alone
          bad->set_instance(names[0]);
          bad->set_event_id("no-such-event");
          const int good = ub.requests_size() - 1;
          for (int i = 0; i < good; ++i) ++updates_sent.at(ub.requests(i).instance());
          auto ur = c.UpdateBatch(ub);
          if (!ur.ok()) continue;
          for (int i = 0; i < good; ++i)
            if (ur->statuses(i).code() == 0) ++updates_acked.at(ub.requests(i).instance());
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    server.Stop(SIGKILL);
    stop = true;
    for (auto& w : workers) w.join();
  }
  v1::InstanceStats before_last_batch;
  {
    ServerProcess server(args, dir);
    ASSERT_TRUE(server.running()) << server.Log();
    BanditClient client(server.target());
    for (const auto& n : names) {
      auto got = client.GetInstance(n);
      ASSERT_TRUE(got.ok()) << got.status() << server.Log();
      EXPECT_GT(selects_acked[n].load(), 0) << "no batch reached the server";
      EXPECT_GE(got->stats().rounds(), selects_acked[n].load()) << n << ": lost selects";
      EXPECT_LE(got->stats().rounds(), selects_sent[n].load()) << n;
      EXPECT_GE(got->stats().updates(), updates_acked[n].load()) << n << ": lost updates";
      EXPECT_LE(got->stats().updates(), updates_sent[n].load()) << n;
    }
    before_last_batch = client.GetInstance("bb")->stats();
    // One batch on an idle server, acknowledged, then killed at once.
    v1::SelectBatchRequest sb;
    for (int i = 0; i < 5; ++i) sb.add_requests()->set_instance("bb");
    auto sr = client.SelectBatch(sb);
    ASSERT_TRUE(sr.ok());
    v1::UpdateBatchRequest ub;
    for (const auto& d : sr->decisions()) {
      auto* u = ub.add_requests();
      u->set_instance("bb");
      u->set_event_id(d.event_id());
      u->set_reward(1.0);
    }
    ub.mutable_requests(4)->set_reward(std::nan(""));  // refused; its decision stays pending
    auto ur = client.UpdateBatch(ub);
    ASSERT_TRUE(ur.ok());
    for (int i = 0; i < 4; ++i) ASSERT_EQ(ur->statuses(i).code(), 0) << ur->statuses(i).message();
    ASSERT_EQ(ur->statuses(4).code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
    server.Stop(SIGKILL);
  }
  ServerProcess server(args, dir);
  ASSERT_TRUE(server.running()) << server.Log();
  BanditClient client(server.target());
  auto got = client.GetInstance("bb");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->stats().rounds(), before_last_batch.rounds() + 5);
  EXPECT_EQ(got->stats().updates(), before_last_batch.updates() + 4);
  EXPECT_EQ(got->stats().pending(), before_last_batch.pending() + 1);
  server.Stop(SIGTERM);
}

// Multi-slot decisions in `always`: two real banditd processes get the same requests (caller-
// chosen event ids, the same seed), some decisions deferred, some slots rewarded, some
// activated, a shadow scoring every slot; one is killed with SIGKILL after its last
// acknowledgement and restarted. Every acknowledged reward and activation is there (the same
// statistics and shadow estimates as the uninterrupted twin), the pending slots can still be
// rewarded and the deferred decisions activated, and the next decisions are the twin's.
TEST(Crash, MultiSlotDecisionsPendingAndDeferredSurviveKillNineExactly) {
  const bandit::testing::TempDir temp("banditd-crash-slots");
  const std::string& dir = temp.path();
  const std::vector<std::string> args = {"--durability=always", "--snapshot_every_changes=40"};
  std::filesystem::create_directories(dir + "/killed");
  std::filesystem::create_directories(dir + "/twin");
  ServerProcess killed(args, dir + "/killed");
  ServerProcess twin(args, dir + "/twin");
  ASSERT_TRUE(killed.running()) << killed.Log();
  ASSERT_TRUE(twin.running()) << twin.Log();
  auto connect = [](const ServerProcess& s) {
    bandit::client::ClientOptions o;
    o.deadline = std::chrono::milliseconds(5000);
    return std::make_unique<BanditClient>(s.target(), o);
  };
  std::unique_ptr<BanditClient> a = connect(killed), b = connect(twin);
  v1::CreateInstanceRequest create;
  create.set_name("page");
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "policy { glm_epsilon_greedy { dimension: 2 link: GAUSSIAN epsilon: 0.3 } } seed: 7 "
      "pending { reward_wait_ms: 3600000 }",
      create.mutable_config()));
  ASSERT_TRUE(a->CreateInstance(create).ok());
  ASSERT_TRUE(b->CreateInstance(create).ok());
  v1::AddShadowRequest shadow;
  shadow.set_name("page");
  shadow.set_shadow("explorer");
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "policy { glm_epsilon_greedy { dimension: 2 link: GAUSSIAN epsilon: 0.8 } } seed: 3",
      shadow.mutable_config()));
  ASSERT_TRUE(a->AddShadow(shadow).ok());
  ASSERT_TRUE(b->AddShadow(shadow).ok());

  auto page = [](int t) {
    v1::SelectRequest req;
    req.set_instance("page");
    req.set_event_id(absl::StrCat("page-", t));
    for (int i = 0; i < 6; ++i) {
      auto* c = req.add_candidates();
      c->add_values(0.5);
      c->add_values(0.08 * ((i + t) % 6));
    }
    for (const char* id : {"hero", "tile-1", "tile-2"}) req.add_slots()->set_id(id);
    req.set_defer_activation(t % 4 == 0);
    return req;
  };
  auto reward = [](int t, const std::string& slot, double r) {
    v1::UpdateRequest up;
    up.set_instance("page");
    up.set_event_id(absl::StrCat("page-", t));
    up.set_slot_id(slot);
    up.set_reward(r);
    return up;
  };
  auto activate = [](int t) {
    v1::ActivateRequest req;
    req.set_instance("page");
    req.set_event_id(absl::StrCat("page-", t));
    return req;
  };
  // Both servers answer alike; the decisions of both are compared slot by slot.
  auto same_decision = [](const v1::Decision& x, const v1::Decision& y) {
    if (x.slots_size() != y.slots_size()) return false;
    for (int k = 0; k < x.slots_size(); ++k)
      if (x.slots(k).action_id() != y.slots(k).action_id() ||
          x.slots(k).propensity() != y.slots(k).propensity())
        return false;
    return x.event_id() == y.event_id();
  };
  auto play = [&](int from, int to) {
    for (int t = from; t < to; ++t) {
      auto da = a->Select(page(t));
      auto db = b->Select(page(t));
      ASSERT_TRUE(da.ok()) << da.status();
      ASSERT_TRUE(db.ok()) << db.status();
      ASSERT_TRUE(same_decision(*da, *db)) << t << "\n" << da->ShortDebugString() << "\n"
                                          << db->ShortDebugString();
      const double r = da->slots(0).arm_index() % 2 == 0 ? 1.0 : 0.0;
      if (t % 3 != 2) {  // the hero slot rewarded two rounds in three
        ASSERT_TRUE(a->Update(reward(t, "hero", r)).ok());
        ASSERT_TRUE(b->Update(reward(t, "hero", r)).ok());
      }
      if (t % 2 == 0) {  // tile-1 every other round; tile-2 never (still pending)
        ASSERT_TRUE(a->Update(reward(t, "tile-1", 0.5 * r)).ok());
        ASSERT_TRUE(b->Update(reward(t, "tile-1", 0.5 * r)).ok());
      }
      if (t % 8 == 0) {  // half of the deferred decisions activated
        ASSERT_TRUE(a->Activate(activate(t)).ok());
        ASSERT_TRUE(b->Activate(activate(t)).ok());
      }
    }
  };
  play(0, 120);
  ASSERT_EQ(killed.Stop(SIGKILL) & 0x7f, SIGKILL);
  killed.Start(args);
  ASSERT_TRUE(killed.running()) << killed.Log();
  a = connect(killed);

  auto ga = a->GetInstance("page");
  auto gb = b->GetInstance("page");
  ASSERT_TRUE(ga.ok()) << ga.status() << killed.Log();
  ASSERT_TRUE(gb.ok()) << gb.status();
  v1::InstanceStats sa = ga->stats(), sb = gb->stats();
  EXPECT_EQ(sb.rounds(), 120);
  EXPECT_EQ(sb.activated(), 15);
  for (v1::InstanceStats* st : {&sa, &sb}) st->clear_state_bytes();
  EXPECT_EQ(sa.SerializeAsString(), sb.SerializeAsString())
      << sa.ShortDebugString() << "\n" << sb.ShortDebugString();
  ASSERT_EQ(ga->shadows_size(), 1);
  ASSERT_EQ(gb->shadows_size(), 1);
  EXPECT_EQ(ga->shadows(0).slots_size(), 2);  // hero and tile-1 rewarded; tile-2 never
  EXPECT_EQ(ga->shadows(0).events(), gb->shadows(0).events());
  EXPECT_EQ(ga->shadows(0).page().SerializeAsString(), gb->shadows(0).page().SerializeAsString());
  for (int k = 0; k < ga->shadows(0).slots_size() && k < gb->shadows(0).slots_size(); ++k)
    EXPECT_EQ(ga->shadows(0).slots(k).SerializeAsString(),
              gb->shadows(0).slots(k).SerializeAsString()) << k;

  // What was pending before the kill is still pending: tile-2 of a decision can be rewarded
  // once, a deferred decision not yet activated can be activated, one activated cannot again.
  for (auto* c : {a.get(), b.get()}) {
    EXPECT_TRUE(c->Update(reward(1, "tile-2", 1.0)).ok());
    EXPECT_FALSE(c->Update(reward(1, "hero", 1.0)).ok());  // rewarded before the kill
    EXPECT_TRUE(c->Activate(activate(4)).ok());
    EXPECT_FALSE(c->Activate(activate(8)).ok());  // activated before the kill
  }
  // The next decisions are the twin's: the policy, its random engine and the shadow's resumed.
  play(120, 160);
  ga = a->GetInstance("page");
  gb = b->GetInstance("page");
  ASSERT_TRUE(ga.ok() && gb.ok());
  // (Compared as messages: the status's summary is a map, whose encoding order is unspecified.)
  EXPECT_TRUE(MessageDifferencer::Equals(ga->shadows(0), gb->shadows(0)))
      << ga->shadows(0).ShortDebugString() << "\n" << gb->shadows(0).ShortDebugString();
  twin.Stop(SIGTERM);
  killed.Stop(SIGTERM);
}

TEST(Crash, EverysecLosesAtMostTheLastSecond) {
  // The writer fsyncs at least once a second; allow the second plus scheduling slack.
  RunCrashCycles("everysec", std::chrono::milliseconds(1500), false);
}

}  // namespace
}  // namespace bandit
