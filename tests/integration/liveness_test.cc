// Liveness under churn: many concurrent clients, snapshot rounds as often as the server runs
// them (background rounds plus on-demand SnapshotInstances back to back), journal rotations,
// deletes and re-creates. Every call must be answered, well before its deadline. Then lone
// writes racing a snapshot round with no other traffic: the case where a record the rotation
// wrote had nobody left to answer its waiter. Runs under TSan in `make sanitize` (banditd
// built with it), so it stays short: LIVENESS_SECONDS (default 2) of churn.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include <google/protobuf/text_format.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "bandit/v1/service.grpc.pb.h"
#include "tests/integration/server_process.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using bandit::testing::EnvOr;
using bandit::testing::ServerProcess;
namespace v1 = bandit::v1;
using SteadyClock = std::chrono::steady_clock;

// A stuck call would run into this deadline; every answer must come far sooner.
constexpr auto kClientDeadline = std::chrono::seconds(60);
constexpr auto kAnswerBound = std::chrono::seconds(10);
constexpr char kConfig[] = "policy { epsilon_greedy { epsilon: 0.2 } num_arms: 3 } seed: 5";

// Answer codes the churn may legitimately produce: the instance was deleted or re-created under
// the caller (NOT_FOUND, ALREADY_EXISTS), or a reward names a decision of a deleted incarnation
// or one already rewarded (NOT_FOUND/INVALID_ARGUMENT/FAILED_PRECONDITION per docs/api.md).
bool Expected(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
      return true;
    default:
      return false;
  }
}

class Calls {
 public:
  explicit Calls(const std::string& target)
      : stub_(v1::BanditService::NewStub(
            grpc::CreateChannel(target, grpc::InsecureChannelCredentials()))) {}

  // Runs one unary call with the client deadline and records how long its answer took.
  template <typename Req, typename Resp, typename Method>
  grpc::Status Call(const char* what, Method method, const Req& req, Resp* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kClientDeadline);
    const auto t0 = SteadyClock::now();
    grpc::Status s = (stub_.get()->*method)(&ctx, req, resp);
    const auto took = SteadyClock::now() - t0;
    std::lock_guard<std::mutex> lock(mu_);
    ++count_;
    if (took > slowest_) {
      slowest_ = took;
      slowest_what_ = what;
    }
    if (!Expected(s.error_code()))
      unexpected_.push_back(absl::StrCat(what, ": ", s.error_code(), " ", s.error_message()));
    return s;
  }

  grpc::Status Create(const std::string& name) {
    v1::CreateInstanceRequest req;
    req.set_name(name);
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(kConfig, req.mutable_config()));
    v1::Instance out;
    return Call("CreateInstance", &v1::BanditService::Stub::CreateInstance, req, &out);
  }
  grpc::Status Delete(const std::string& name) {
    v1::DeleteInstanceRequest req;
    req.set_name(name);
    v1::DeleteInstanceResponse out;
    return Call("DeleteInstance", &v1::BanditService::Stub::DeleteInstance, req, &out);
  }
  grpc::Status Snapshot() {
    v1::SnapshotInstancesRequest req;
    v1::SnapshotInstancesResponse out;
    return Call("SnapshotInstances", &v1::BanditService::Stub::SnapshotInstances, req, &out);
  }
  void Round(const std::string& name, int i) {
    v1::SelectRequest sel;
    sel.set_instance(name);
    v1::Decision d;
    if (!Call("Select", &v1::BanditService::Stub::Select, sel, &d).ok()) return;
    v1::UpdateRequest up;
    up.set_instance(name);
    up.set_event_id(d.event_id());
    up.set_reward(i % 3 == 0 ? 1.0 : 0.0);
    v1::UpdateResponse r;
    Call("Update", &v1::BanditService::Stub::Update, up, &r);
  }

  int64_t count() {
    std::lock_guard<std::mutex> lock(mu_);
    return count_;
  }
  SteadyClock::duration slowest(std::string* what) {
    std::lock_guard<std::mutex> lock(mu_);
    *what = slowest_what_;
    return slowest_;
  }
  std::vector<std::string> unexpected() {
    std::lock_guard<std::mutex> lock(mu_);
    return unexpected_;
  }

 private:
  std::unique_ptr<v1::BanditService::Stub> stub_;
  std::mutex mu_;
  int64_t count_ = 0;
  SteadyClock::duration slowest_{0};
  std::string slowest_what_;
  std::vector<std::string> unexpected_;
};

TEST(Liveness, EveryCallIsAnsweredUnderSnapshotAndDeleteChurn) {
  // Background rounds as often as the server runs them, per-instance snapshots every few
  // changes; on-demand rounds on top.
  ServerProcess server({"--snapshot_interval_ms=1", "--snapshot_every_changes=20"});
  ASSERT_TRUE(server.running()) << server.Log();
  Calls calls(server.target());
  constexpr int kInstances = 4;
  for (int i = 0; i < kInstances; ++i) ASSERT_TRUE(calls.Create(absl::StrCat("c", i)).ok());

  const double seconds = std::stod(EnvOr("LIVENESS_SECONDS", "2"));
  const auto until =
      SteadyClock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  std::vector<std::thread> threads;
  constexpr int kPlayers = 6;
  for (int t = 0; t < kPlayers; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; SteadyClock::now() < until; ++i)
        calls.Round(absl::StrCat("c", (t + i) % kInstances), i);
    });
  }
  threads.emplace_back([&] {  // deletes and re-creates under the players
    for (int i = 0; SteadyClock::now() < until; ++i) {
      const std::string name = absl::StrCat("c", i % kInstances);
      calls.Delete(name);
      calls.Create(name);
    }
  });
  threads.emplace_back([&] {  // snapshot rounds (journal rotation + compaction) back to back
    while (SteadyClock::now() < until) calls.Snapshot();
  });
  for (auto& t : threads) t.join();
  const int64_t churn_calls = calls.count();

  // Lone writes racing a round, nothing else in flight: a write whose record the round's
  // rotation picks up has no later write to wake the journal for it.
  for (int i = 0; i < 20; ++i) {
    std::thread round([&] { calls.Snapshot(); });
    const std::string name = absl::StrCat("lone", i);
    calls.Create(name);
    round.join();
  }

  std::string slowest_what;
  const auto slowest = calls.slowest(&slowest_what);
  EXPECT_LT(slowest, kAnswerBound) << "slowest answer: " << slowest_what << " after "
                                   << std::chrono::duration<double>(slowest).count() << " s";
  for (const auto& u : calls.unexpected()) ADD_FAILURE() << "unexpected answer: " << u;
  EXPECT_GT(churn_calls, 100);  // the churn actually ran
  const int status = server.Stop(SIGTERM);
  ASSERT_TRUE(WIFEXITED(status)) << server.Log();
  EXPECT_EQ(WEXITSTATUS(status), 0) << server.Log();
  const std::string log = server.Log();
  EXPECT_NE(log.find("every call was answered within the grace period"), std::string::npos) << log;
  EXPECT_EQ(log.find(" ERROR "), std::string::npos) << log;
  std::printf("liveness: %lld calls in %.1f s of churn, slowest %s %.3f s\n",
              static_cast<long long>(churn_calls), seconds, slowest_what.c_str(),
              std::chrono::duration<double>(slowest).count());
}

}  // namespace
}  // namespace bandit
