// Shadow policies survive kill -9 of the real banditd in `always`, on the file backend and on a
// real PostgreSQL: after the restart every shadow's state (policy and engine, estimators, direct
// model) equals that of an uninterrupted twin fed the same requests (an in-process
// DecisionService without storage), a reward for a decision pending at the kill is scored, the
// next rounds' estimates and a promotion's next decisions stay identical, and the metrics show
// the estimates GetInstance reports.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "client/cpp/bandit_client.h"
#include "core/rng.h"
#include "server/service/decision_service.h"
#include "server/storage/snapshot_store.h"
#include "tests/common/temp_dir.h"
#include "tests/integration/postgres_process.h"
#include "tests/integration/server_process.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using bandit::client::BanditClient;
using bandit::testing::HttpGet;
using bandit::testing::ServerProcess;
using bandit::testing::SharedPostgres;
using google::protobuf::util::MessageDifferencer;
namespace v1 = bandit::v1;

// "s": a randomized served policy (each Select journaled as its request, replay re-runs the
// shadows); "r": read-only served policy and shadows (each Select journaled as its decision with
// the shadows' scores, replay re-runs nothing).
constexpr char kServed[] = "policy { glm_epsilon_greedy { dimension: 4 epsilon: 0.2 } } seed: 3";
const std::vector<std::pair<std::string, std::string>> kShadows = {
    {"same", "policy { glm_epsilon_greedy { dimension: 4 epsilon: 0.2 } } seed: 3"},
    {"greedy", "policy { glm_epsilon_greedy { dimension: 4 epsilon: 0.05 } } seed: 8"},
    {"omd", "policy { glb_omd { dimension: 4 } } max_weight: 10"},
};
constexpr char kReadOnlyServed[] = "policy { glb_omd { dimension: 4 } }";
const std::vector<std::pair<std::string, std::string>> kReadOnlyShadows = {
    {"narrow", "policy { glb_omd { dimension: 4 radius_multiplier: 0.3 } }"},
    {"linucb", "policy { linucb { dimension: 4 } }"},
};

// The value of the bandit_shadow_value series whose line holds every one of `labels`.
double ShadowMetric(const std::string& text, const std::vector<std::string>& labels) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("bandit_shadow_value{", 0) != 0) continue;
    bool all = true;
    for (const auto& l : labels) all = all && line.find(l) != std::string::npos;
    if (all) return std::atof(line.c_str() + line.rfind(' ') + 1);
  }
  return std::nan("");
}

// The same requests to the real server and to the twin.
class Pair {
 public:
  Pair(BanditClient* client, std::string name, std::string served,
       std::vector<std::pair<std::string, std::string>> shadows, uint64_t env_seed)
      : client_(client),
        name_(std::move(name)),
        served_(std::move(served)),
        shadows_(std::move(shadows)),
        env_(env_seed) {}
  void set_client(BanditClient* client) { client_ = client; }

  void Create() {
    v1::CreateInstanceRequest create;
    create.set_name(name_);
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(served_, create.mutable_config()));
    auto got = client_->CreateInstance(create);
    ASSERT_TRUE(got.ok()) << got.status();
    v1::Instance out;
    ASSERT_TRUE(twin_.CreateInstance(create, &out).ok());
    for (const auto& [name, config] : shadows_) {
      v1::AddShadowRequest add;
      add.set_name(name_);
      add.set_shadow(name);
      ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(config, add.mutable_config()));
      auto added = client_->AddShadow(add);
      ASSERT_TRUE(added.ok()) << added.status();
      ASSERT_TRUE(twin_.AddShadow(add, &out).ok());
    }
  }
  // A Select on both (the same decision); returns the two event ids.
  std::pair<std::string, std::string> Select(bool scores = false) {
    v1::SelectRequest sel;
    sel.set_instance(name_);
    sel.set_return_scores(scores);
    for (int c = 0; c < 6; ++c) {
      auto* v = sel.add_candidates();
      for (int j = 0; j < 4; ++j) v->add_values(0.9 * (env_.Uniform() - 0.5));  // norm < 1
    }
    auto d = client_->Select(sel);
    EXPECT_TRUE(d.ok()) << d.status();
    v1::Decision twin_d;
    EXPECT_TRUE(twin_.Select(sel, &twin_d).ok());
    EXPECT_EQ(d->arm_index(), twin_d.arm_index());
    EXPECT_EQ(d->propensity(), twin_d.propensity());
    EXPECT_EQ(d->scores_size(), twin_d.scores_size());
    for (int k = 0; k < d->scores_size() && k < twin_d.scores_size(); ++k)
      EXPECT_EQ(d->scores(k), twin_d.scores(k));
    last_x0_ = sel.candidates(d->arm_index()).values(0);
    return {d->event_id(), twin_d.event_id()};
  }
  void Reward(const std::pair<std::string, std::string>& ids) {
    const double r = env_.Uniform() < 1 / (1 + std::exp(-2 * last_x0_)) ? 1.0 : 0.0;
    v1::UpdateRequest up;
    up.set_instance(name_);
    up.set_event_id(ids.first);
    up.set_reward(r);
    auto u = client_->Update(up);
    EXPECT_TRUE(u.ok()) << u.status();
    up.set_event_id(ids.second);
    v1::UpdateResponse resp;
    EXPECT_TRUE(twin_.Update(up, &resp).ok());
  }
  void Rounds(int n) {
    for (int i = 0; i < n; ++i) Reward(Select());
  }
  // Every shadow of the server equals the twin's.
  void ExpectShadowsEqual(const std::string& when) {
    auto exported = client_->ExportInstance(name_);
    ASSERT_TRUE(exported.ok()) << exported.status();
    auto decoded = server::SnapshotStore::Decode(*exported);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    const v1::InstanceSnapshot& got = *decoded;
    v1::ExportInstanceRequest req;
    req.set_name(name_);
    v1::ExportInstanceResponse resp;
    ASSERT_TRUE(twin_.ExportInstance(req, &resp).ok());
    auto decoded_twin = server::SnapshotStore::Decode(resp.snapshot());
    ASSERT_TRUE(decoded_twin.ok()) << decoded_twin.status();
    const v1::InstanceSnapshot& want = *decoded_twin;
    ASSERT_EQ(got.shadows_size(), want.shadows_size()) << when;
    for (int i = 0; i < want.shadows_size(); ++i)
      EXPECT_TRUE(MessageDifferencer::Equals(got.shadows(i), want.shadows(i)))
          << name_ << ", " << when << ": shadow " << want.shadows(i).name();
    EXPECT_TRUE(MessageDifferencer::Equals(got.policy(), want.policy())) << name_ << ", " << when;
  }
  server::DecisionService& twin() { return twin_; }

 private:
  BanditClient* client_;
  const std::string name_;
  const std::string served_;
  const std::vector<std::pair<std::string, std::string>> shadows_;
  server::DecisionService twin_;
  Rng env_;
  double last_x0_ = 0;
};

void CrashAndCompare(const std::vector<std::string>& args, const std::string& dir) {
  auto server = std::make_unique<ServerProcess>(args, dir);
  ASSERT_TRUE(server->running()) << server->Log();
  auto client = std::make_unique<BanditClient>(server->target());
  Pair pair(client.get(), "s", kServed, kShadows, 7);
  Pair read_only(client.get(), "r", kReadOnlyServed, kReadOnlyShadows, 8);
  pair.Create();
  read_only.Create();
  if (::testing::Test::HasFatalFailure()) return;
  // With --snapshot_every_changes=50: snapshots and a journal tail.
  pair.Rounds(170);
  read_only.Rounds(130);
  const auto pending = pair.Select();
  const auto read_only_pending = read_only.Select();
  pair.ExpectShadowsEqual("before the kill");
  read_only.ExpectShadowsEqual("before the kill");
  server->Stop(SIGKILL);

  server = std::make_unique<ServerProcess>(args, dir);
  ASSERT_TRUE(server->running()) << server->Log();
  client = std::make_unique<BanditClient>(server->target());
  pair.set_client(client.get());
  read_only.set_client(client.get());
  pair.ExpectShadowsEqual("after the restart");
  read_only.ExpectShadowsEqual("after the restart");
  pair.Reward(pending);  // scored before the kill, learned after it
  read_only.Reward(read_only_pending);
  pair.Rounds(40);
  read_only.Rounds(40);
  pair.ExpectShadowsEqual("40 rounds after the restart");
  read_only.ExpectShadowsEqual("40 rounds after the restart");
  {
    auto r = client->GetInstance("r");
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->shadows_size(), 2);
    EXPECT_EQ(r->shadows(0).events(), 171);
    EXPECT_EQ(r->shadows(1).events(), 171);
  }

  auto inst = client->GetInstance("s");
  ASSERT_TRUE(inst.ok());
  ASSERT_EQ(inst->shadows_size(), 3);
  const v1::ShadowStatus& same = inst->shadows(0);
  EXPECT_EQ(same.events(), 211);
  EXPECT_NEAR(same.ips().value(), same.served().value(), 1e-12);
  const std::string metrics = HttpGet(server->metrics_port(), "/metrics");
  for (const auto& [estimator, e] : std::vector<std::pair<std::string, v1::Estimate>>{
           {"ips", same.ips()}, {"dr", same.dr()}, {"served", same.served()}}) {
    EXPECT_NEAR(ShadowMetric(metrics, {"shadow=\"same\"", "estimator=\"" + estimator + "\"",
                                       "bound=\"estimate\""}),
                e.value(), 1e-9)
        << estimator << "\n"
        << metrics;
    EXPECT_NEAR(ShadowMetric(metrics, {"shadow=\"same\"", "estimator=\"" + estimator + "\"",
                                       "bound=\"hi\""}),
                e.hi(), 1e-9)
        << estimator;
  }

  // Promote on both: the promoted policy decides as the twin's does (the rounds compare the
  // decisions and their probabilities), and that survives another kill.
  v1::PromoteShadowRequest promote;
  promote.set_name("s");
  promote.set_shadow("greedy");
  auto promoted = client->PromoteShadow(promote);
  ASSERT_TRUE(promoted.ok()) << promoted.status();
  v1::Instance out;
  ASSERT_TRUE(pair.twin().PromoteShadow(promote, &out).ok());
  EXPECT_EQ(promoted->config().policy().glm_epsilon_greedy().epsilon(), 0.05);
  for (int i = 0; i < 20; ++i) pair.Reward(pair.Select(/*scores=*/true));
  server->Stop(SIGKILL);
  server = std::make_unique<ServerProcess>(args, dir);
  ASSERT_TRUE(server->running()) << server->Log();
  client = std::make_unique<BanditClient>(server->target());
  pair.set_client(client.get());
  pair.ExpectShadowsEqual("after promote and a second kill");
  for (int i = 0; i < 20; ++i) pair.Reward(pair.Select(/*scores=*/true));
  pair.ExpectShadowsEqual("at the end");
}

TEST(ShadowCrash, FileBackendAlways) {
  const bandit::testing::TempDir temp("banditd-shadow-crash");
  const std::string& dir = temp.path();
  CrashAndCompare({"--durability=always", "--snapshot_every_changes=50"}, dir);
}

TEST(ShadowCrash, PostgresAlways) {
  const bandit::testing::TempDir temp("banditd-shadow-crash-pg");
  const std::string& dir = temp.path();
  CrashAndCompare({"--storage=postgres", "--postgres_dsn=" + SharedPostgres().CreateDatabase(),
                   "--durability=always", "--snapshot_every_changes=50"},
                  dir);
}

}  // namespace
}  // namespace bandit
