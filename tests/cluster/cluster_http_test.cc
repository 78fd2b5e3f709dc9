// Personalizer's HTTP API on a cluster of real banditd processes (--cluster --http_listen) on a
// real PostgreSQL: a request for an instance another node owns is served by the owner (its
// calls forwarded through the cluster's router to the owner's gRPC port, with the caller's key),
// so the API works on any node. Rank on node A for an instance node B owns, rewards on B and on
// A, against a twin instance (same config and seed) driven over gRPC: the same decisions, the
// same learning; the instance stays with its owner. An instance auto-created through a node it
// is not placed on lands on the node rendezvous hashing places it on.
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <string>
#include <thread>

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/cpp/bandit_client.h"
#include "server/cluster/rendezvous.h"
#include "tests/common/httplib_client.h"
#include "tests/common/temp_dir.h"
#include "tests/integration/postgres_process.h"
#include "tests/integration/server_process.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using bandit::client::BanditClient;
using bandit::client::ClientOptions;
using bandit::testing::HttpGet;
using bandit::testing::PostgresProcess;
using bandit::testing::ServerProcess;
using bandit::testing::SharedPostgres;
namespace v1 = bandit::v1;

constexpr char kAdmin[] = "admin-token-0123456789";
constexpr char kWriter[] = "writer-token-0123456789";
// A named-feature instance with a fixed seed, so two of them decide alike.
constexpr char kConfig[] =
    "policy { linucb { alpha: 0.5 } } feature_space { bits: 5 interactions: \"UA\" } seed: 42";

class ClusterHttp : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = bandit::testing::NewTempDir("cluster-http");
    const std::string tokens = dir_ + "/tokens";
    {
      std::ofstream f(tokens);
      f << "admin " << kAdmin << " ops\nwriter " << kWriter << " app\n";
    }
    chmod(tokens.c_str(), 0600);
    dsn_ = SharedPostgres().CreateDatabase();
    for (const char* id : {"n1", "n2"}) {
      nodes_[id] = std::make_unique<ServerProcess>(std::vector<std::string>{
          "--storage=postgres", "--postgres_dsn=" + dsn_, "--cluster",
          std::string("--node_id=") + id, "--lease_ms=1500", "--grace_period_ms=2000",
          "--http_listen=127.0.0.1:0", "--tokens_file=" + tokens, "--personalizer_auto_create"});
      ASSERT_TRUE(nodes_[id]->running()) << nodes_[id]->Log();
      std::ifstream f(nodes_[id]->dir() + "/ports");
      int grpc = 0, metrics = 0;
      f >> grpc >> metrics >> http_[id];
      ASSERT_GT(http_[id], 0) << nodes_[id]->Log();
      ClientOptions options;
      options.token = kAdmin;
      grpc_[id] = std::make_unique<BanditClient>(nodes_[id]->target(), options);
    }
  }
  void TearDown() override {
    grpc_.clear();
    nodes_.clear();
    std::filesystem::remove_all(dir_);
  }

  using Answer = bandit::testing::HttpAnswer;
  // One POST with `key`; a 503 (an instance between owners, a node still joining) is retried
  // for up to 20 s, as a client's retry policy would.
  Answer Send(const std::string& node, const std::string& path, const std::string& body,
              const char* key = kWriter) {
    Answer a;
    for (int i = 0; i < 400; ++i) {
      a = bandit::testing::SendHttp(http_.at(node), "POST", path, body, key);
      if (a.status != 503 && a.status != 0) return a;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return a;
  }
  std::string Owner(const std::string& instance) {
    return PostgresProcess::ExecOn(
        dsn_, absl::StrCat("SELECT coalesce(owner, '-') FROM bandit_leases WHERE instance = '",
                           instance, "'"));
  }
  double Forwarded(const std::string& node) {
    const std::string metrics = HttpGet(nodes_.at(node)->metrics_port(), "/metrics");
    const std::string key = "\nbandit_cluster_forwarded_calls_total ";  // the sample
    const size_t at = metrics.find(key);
    double value = -1;
    if (at != std::string::npos)
      (void)absl::SimpleAtod(
          metrics.substr(at + key.size(), metrics.find('\n', at) - at - key.size()), &value);
    return value;
  }

  std::string dir_, dsn_;
  std::map<std::string, std::unique_ptr<ServerProcess>> nodes_;
  std::map<std::string, int> http_;
  std::map<std::string, std::unique_ptr<BanditClient>> grpc_;
};

// The first name of `prefix`-0, -1, ... that rendezvous hashing places on `node` of n1, n2.
std::string PlacedOn(const std::string& node, const std::string& prefix) {
  for (int i = 0;; ++i) {
    std::string name = absl::StrCat(prefix, "-", i);
    if (server::cluster::RendezvousOwner({"n1", "n2"}, name) == node) return name;
  }
}

template <typename Call>
auto Retry(Call call) {
  auto r = call();
  for (int i = 0; i < 400 && !r.ok() && r.status().code() == absl::StatusCode::kUnavailable; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    r = call();
  }
  return r;
}

v1::CreateInstanceRequest Create(const std::string& name) {
  v1::CreateInstanceRequest req;
  req.set_name(name);
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(kConfig, req.mutable_config()));
  return req;
}

TEST_F(ClusterHttp, RankOnANodeThatDoesNotOwnTheInstanceDecidesAsTheOwner) {
  const std::string name = PlacedOn("n2", "shop");
  const std::string twin = PlacedOn("n2", "twin");
  ASSERT_TRUE(Retry([&] { return grpc_["n1"]->CreateInstance(Create(name)); }).ok());
  ASSERT_TRUE(Retry([&] { return grpc_["n1"]->CreateInstance(Create(twin)); }).ok());
  ASSERT_EQ(Owner(name), "n2");
  const double forwarded_before = Forwarded("n1");
  ASSERT_GE(forwarded_before, 0);
  const char* users[] = {"student", "parent", "retiree"};
  double reward_sum = 0;
  constexpr int kRounds = 30;
  for (int t = 0; t < kRounds; ++t) {
    const std::string context =
        absl::StrCat("[{\"User\":{\"kind\":\"", users[t % 3], "\",\"age\":", 20 + t % 7, "}}]");
    std::string body = absl::StrCat("{\"contextFeatures\":", context, ",\"actions\":[");
    v1::SelectRequest select;
    select.set_instance(twin);
    select.set_return_scores(true);
    select.set_context(context);
    for (const char* id : {"a", "b", "c", "d"}) {
      const std::string features = absl::StrCat("[{\"Action\":{\"topic\":\"", id, "\"}}]");
      absl::StrAppend(&body, id[0] == 'a' ? "" : ",", "{\"id\":\"", id,
                      "\",\"features\":", features, "}");
      v1::NamedAction* a = select.add_actions();
      a->set_id(id);
      a->set_features(features);
    }
    absl::StrAppend(&body, "]}");
    // Rank on n1, which does not own the instance.
    Answer ranked = Send("n1", absl::StrCat("/instances/", name, "/personalizer/v1.0/rank"), body);
    ASSERT_EQ(ranked.status, 201) << ranked.body << nodes_["n1"]->Log();
    auto d = Retry([&] { return grpc_["n2"]->Select(select); });
    ASSERT_TRUE(d.ok()) << d.status();
    ASSERT_NO_FATAL_FAILURE(
        bandit::testing::ExpectRankingOf(ranked.body, *d, absl::StrCat("round ", t)));
    rapidjson::Document doc;
    ASSERT_FALSE(doc.Parse(ranked.body.c_str()).HasParseError());
    // The reward on the owner (and every third one through n1 again).
    const std::string chosen = d->action_id();
    const double reward = (t % 3 == 0) == (chosen == "a") && (chosen == "a" || chosen == "b");
    reward_sum += reward;
    Answer rewarded = Send(t % 3 == 2 ? "n1" : "n2",
                           absl::StrCat("/instances/", name, "/personalizer/v1.0/events/",
                                        doc["eventId"].GetString(), "/reward"),
                           absl::StrCat("{\"value\":", reward, "}"));
    EXPECT_EQ(rewarded.status, 204) << rewarded.body;
    v1::UpdateRequest up;
    up.set_instance(twin);
    up.set_event_id(d->event_id());
    up.set_reward(reward);
    ASSERT_TRUE(Retry([&] { return grpc_["n2"]->Update(up); }).ok());
  }
  auto got = Retry([&] { return grpc_["n2"]->GetInstance(name); });
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->stats().updates(), kRounds);
  EXPECT_DOUBLE_EQ(got->stats().reward_sum(), reward_sum);
  // Served by its owner throughout: n1 forwarded every rank and its rewards, and holds nothing.
  EXPECT_EQ(Owner(name), "n2");
  EXPECT_GE(Forwarded("n1") - forwarded_before, kRounds + kRounds / 3);
}

// PUT model through a node that does not own the instance: its one ImportInstance (replace)
// is forwarded to the owner, which replaces the instance and keeps it.
TEST_F(ClusterHttp, PutModelThroughANodeThatDoesNotOwnTheInstanceReplacesItOnTheOwner) {
  const std::string name = PlacedOn("n2", "model");
  const std::string source = PlacedOn("n1", "source");
  ASSERT_TRUE(Retry([&] { return grpc_["n1"]->CreateInstance(Create(name)); }).ok());
  v1::CreateInstanceRequest eps;
  eps.set_name(source);
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "policy { epsilon_greedy { epsilon: 0.2 } num_arms: 3 } seed: 9", eps.mutable_config()));
  ASSERT_TRUE(Retry([&] { return grpc_["n1"]->CreateInstance(eps); }).ok());
  for (int t = 0; t < 6; ++t) {
    v1::SelectRequest sel;
    sel.set_instance(source);
    auto d = Retry([&] { return grpc_["n1"]->Select(sel); });
    ASSERT_TRUE(d.ok()) << d.status();
    v1::UpdateRequest up;
    up.set_instance(source);
    up.set_event_id(d->event_id());
    up.set_reward(t % 2);
    ASSERT_TRUE(Retry([&] { return grpc_["n1"]->Update(up); }).ok());
  }
  auto model = Retry([&] { return grpc_["n1"]->ExportInstance(source); });
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ(Owner(name), "n2");
  const double forwarded_before = Forwarded("n1");
  const std::string path = absl::StrCat("/instances/", name, "/personalizer/v1.1-preview.3/model");
  Answer put;
  for (int i = 0; i < 400; ++i) {
    put = bandit::testing::SendHttp(http_.at("n1"), "PUT", path, *model, kAdmin);
    if (put.status != 503 && put.status != 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(put.status, 204) << put.body << nodes_["n1"]->Log();
  EXPECT_EQ(Owner(name), "n2");
  EXPECT_GE(Forwarded("n1") - forwarded_before, 1);
  auto got = Retry([&] { return grpc_["n2"]->GetInstance(name); });
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->stats().updates(), 6);
  EXPECT_TRUE(got->config().policy().has_epsilon_greedy());
}

TEST_F(ClusterHttp, AutoCreatedThroughAnyNodeLandsOnItsPlacement) {
  const std::string name = PlacedOn("n1", "auto");
  const std::string body =
      "{\"contextFeatures\":[{\"User\":{\"kind\":\"student\"}}],\"actions\":[{\"id\":\"a\","
      "\"features\":[{\"Action\":{\"topic\":\"a\"}}]},{\"id\":\"b\",\"features\":[{\"Action\":"
      "{\"topic\":\"b\"}}]}]}";
  // The creation runs on n1 as a forwarded CreateInstance, which needs an admin key there (on
  // the node it is placed on, the Rank's writer key creates it).
  Answer ranked =
      Send("n2", absl::StrCat("/instances/", name, "/personalizer/v1.0/rank"), body, kAdmin);
  ASSERT_EQ(ranked.status, 201) << ranked.body << nodes_["n2"]->Log();
  EXPECT_EQ(Owner(name), "n1");
  auto got = Retry([&] { return grpc_["n1"]->GetInstance(name); });
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->stats().rounds(), 1);
}

}  // namespace
}  // namespace bandit
