// Personalizer's REST API on the real banditd binary (--http_listen on port 0): the same Rank
// over HTTP and over gRPC decides the same; bad input gets Personalizer's status and code and
// changes nothing; keys, instance binding, the root path, metrics, and model export/import.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <rapidjson/document.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/cpp/bandit_client.h"
#include "server/api/auth.h"
#include "tests/common/httplib_client.h"
#include "tests/common/temp_dir.h"
#include "tests/integration/server_process.h"
#include "tests/security/test_certs.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using bandit::client::BanditClient;
using bandit::client::ClientOptions;
using bandit::testing::ServerProcess;
namespace v1 = bandit::v1;

constexpr char kAdmin[] = "admin-token-0123456789";
constexpr char kWriter[] = "writer-token-0123456789";
constexpr char kReader[] = "reader-token-0123456789";
constexpr char kShopKey[] = "shop-key-0123456789abc";  // writer bound to instance "shop"

// A named-feature instance with a fixed seed, so two of them decide alike.
constexpr char kConfig[] =
    "policy { linucb { alpha: 0.5 } } feature_space { bits: 5 interactions: \"UA\" } seed: 42";

std::string TokensFile(const std::string& dir) {
  const std::string path = dir + "/tokens";
  std::ofstream f(path);
  f << "admin " << kAdmin << " ops\n"
    << "writer " << kWriter << " app\n"
    << "reader " << kReader << " dashboards\n"
    << "writer " << kShopKey << " shop-frontend instance=shop\n";
  f.close();
  chmod(path.c_str(), 0600);
  return path;
}

int HttpPort(const ServerProcess& server) {
  std::ifstream f(server.dir() + "/ports");
  int grpc = 0, metrics = 0, http = 0;
  f >> grpc >> metrics >> http;
  return http;
}

using Answer = bandit::testing::HttpAnswer;

Answer Send(int port, const std::string& method, const std::string& path,
            const std::string& body = "", const char* key = kWriter) {
  return bandit::testing::SendHttp(port, method, path, body, key);
}

v1::CreateInstanceRequest Create(const std::string& name, const std::string& text = kConfig) {
  v1::CreateInstanceRequest req;
  req.set_name(name);
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, req.mutable_config()));
  return req;
}

// A rank request of round `t`: the user type and the actions (one excluded every fifth round).
std::string RankBody(int t, std::string* context, std::vector<std::string>* excluded) {
  const char* users[] = {"student", "parent", "retiree"};
  *context =
      absl::StrCat("[{\"User\":{\"kind\":\"", users[t % 3], "\",\"age\":", 20 + t % 7, "}}]");
  excluded->clear();
  if (t % 5 == 0) excluded->push_back("c");
  std::string body = absl::StrCat("{\"contextFeatures\":", *context, ",\"actions\":[");
  const char* ids[] = {"a", "b", "c", "d"};
  for (int i = 0; i < 4; ++i)
    absl::StrAppend(&body, i ? "," : "", "{\"id\":\"", ids[i],
                    "\",\"features\":[{\"Action\":{\"topic\":\"", ids[i], "\"}}]}");
  absl::StrAppend(&body, "]");
  if (!excluded->empty()) absl::StrAppend(&body, ",\"excludedActions\":[\"c\"]");
  absl::StrAppend(&body, "}");
  return body;
}

// Rounds [from, to) of RankBody on `instance` over Personalizer's API, each rewarded with
// value(t).
template <typename Value>
void RankAndReward(int port, const std::string& instance, int from, int to, Value value) {
  std::string context;
  std::vector<std::string> excluded;
  const std::string base = absl::StrCat("/instances/", instance, "/personalizer/v1.0/");
  for (int t = from; t < to; ++t) {
    Answer a = Send(port, "POST", base + "rank", RankBody(t, &context, &excluded));
    ASSERT_EQ(a.status, 201) << a.body;
    rapidjson::Document doc;
    doc.Parse(a.body.c_str());
    const std::string reward = absl::StrCat(base, "events/", doc["eventId"].GetString(), "/reward");
    ASSERT_EQ(Send(port, "POST", reward, absl::StrCat("{\"value\":", value(t), "}")).status, 204);
  }
}

v1::SelectRequest SelectOf(const std::string& instance, const std::string& context,
                           const std::vector<std::string>& excluded) {
  v1::SelectRequest req;
  req.set_instance(instance);
  req.set_return_scores(true);
  req.set_context(context);
  for (const char* id : {"a", "b", "c", "d"}) {
    v1::NamedAction* a = req.add_actions();
    a->set_id(id);
    a->set_features(absl::StrCat("[{\"Action\":{\"topic\":\"", id, "\"}}]"));
  }
  for (const auto& e : excluded) req.add_excluded_actions(e);
  return req;
}

class PersonalizerHttp : public ::testing::Test {
 protected:
  void SetUp() override {
    tokens_dir_ = bandit::testing::NewTempDir("personalizer-http");
    server_ = std::make_unique<ServerProcess>(std::vector<std::string>{
        "--http_listen=127.0.0.1:0", "--tokens_file=" + TokensFile(tokens_dir_),
        "--max_message_bytes=65536", "--durability=always"});
    ASSERT_TRUE(server_->running()) << server_->Log();
    port_ = HttpPort(*server_);
    ASSERT_GT(port_, 0) << server_->Log();
    ClientOptions options;
    options.token = kAdmin;
    grpc_ = std::make_unique<BanditClient>(server_->target(), options);
  }
  void TearDown() override {
    grpc_.reset();
    server_.reset();
    std::filesystem::remove_all(tokens_dir_);
  }
  v1::InstanceStats Stats(const std::string& name) {
    auto got = grpc_->GetInstance(name);
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() ? got->stats() : v1::InstanceStats();
  }

  std::string tokens_dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<BanditClient> grpc_;
  int port_ = 0;
};

TEST_F(PersonalizerHttp, RankOverHttpDecidesAsSelectOverGrpc) {
  ASSERT_TRUE(grpc_->CreateInstance(Create("over-http")).ok());
  ASSERT_TRUE(grpc_->CreateInstance(Create("over-grpc")).ok());
  for (int t = 0; t < 60; ++t) {
    std::string context;
    std::vector<std::string> excluded;
    const std::string body = RankBody(t, &context, &excluded);
    Answer a = Send(port_, "POST", "/instances/over-http/personalizer/v1.0/rank", body);
    ASSERT_EQ(a.status, 201) << a.body;
    auto d = grpc_->Select(SelectOf("over-grpc", context, excluded));
    ASSERT_TRUE(d.ok()) << d.status();
    // Identical decision: the chosen action, and the whole ranking with its probabilities.
    ASSERT_NO_FATAL_FAILURE(
        bandit::testing::ExpectRankingOf(a.body, *d, absl::StrCat("round ", t)));
    rapidjson::Document doc;
    ASSERT_FALSE(doc.Parse(a.body.c_str()).HasParseError());
    // The same reward on both: the user "student" likes "a", the others "b".
    const std::string chosen = d->action_id();
    const double reward = (t % 3 == 0) == (chosen == "a") && (chosen == "a" || chosen == "b");
    Answer r = Send(port_, "POST",
                    absl::StrCat("/instances/over-http/personalizer/v1.0/events/",
                                 doc["eventId"].GetString(), "/reward"),
                    absl::StrCat("{\"value\":", reward, "}"));
    EXPECT_EQ(r.status, 204) << r.body;
    v1::UpdateRequest up;
    up.set_instance("over-grpc");
    up.set_event_id(d->event_id());
    up.set_reward(reward);
    ASSERT_TRUE(grpc_->Update(up).ok());
  }
  EXPECT_EQ(Stats("over-http").updates(), 60);
  EXPECT_DOUBLE_EQ(Stats("over-http").reward_sum(), Stats("over-grpc").reward_sum());
}

TEST_F(PersonalizerHttp, BadInputGetsPersonalizersStatusAndCodeAndChangesNothing) {
  ASSERT_TRUE(grpc_->CreateInstance(Create("shop")).ok());
  auto before = grpc_->ExportInstance("shop");
  ASSERT_TRUE(before.ok());
  const std::string rank = "/instances/shop/personalizer/v1.0/rank";
  std::string context;
  std::vector<std::string> excluded;
  const std::string good = RankBody(1, &context, &excluded);
  struct Case {
    std::string method, path, body;
    const char* key;
    int status;
    std::string code, target;
  };
  const Case cases[] = {
      {"POST", rank, "{\"actions\": [", kWriter, 400, "InvalidRankRequest", ""},
      {"POST", rank, "[1,2]", kWriter, 400, "InvalidRankRequest", ""},
      {"POST", rank, "{\"actions\": {\"id\": \"a\"}}", kWriter, 400, "InvalidRankRequest",
       "actions"},
      {"POST", rank, "{\"actions\": [{\"id\": 7}]}", kWriter, 400, "InvalidRankRequest",
       "actions[0].id"},
      {"POST", rank, "{\"actions\": [{\"id\": \"a\"}], \"eventId\": 5}", kWriter, 400,
       "InvalidRankRequest", "eventId"},
      {"POST", rank, std::string(2000, '[') + std::string(2000, ']'), kWriter, 400,
       "InvalidRankRequest", ""},
      {"POST", rank, "{\"actions\": [{\"id\": \"a\", \"features\": [{\"x\": [\"s\"]}]}]}", kWriter,
       400, "InvalidRankRequest", ""},
      {"POST", rank, good.substr(0, good.size() - 1) + ",\"deferActivation\":1}", kWriter, 400,
       "InvalidRankRequest", "deferActivation"},
      {"POST", rank, "{\"actions\":[{\"id\":\"" + std::string(70000, 'x') + "\"}]}", kWriter, 400,
       "PayloadSizeExceeded", ""},
      {"POST", "/instances/shop/personalizer/v1.0/events/e1/reward", "{\"value\": \"1\"}", kWriter,
       400, "InvalidRewardRequest", "value"},
      {"POST", "/instances/shop/personalizer/v1.0/events/bad%20id/activate", "", kWriter, 400,
       "InvalidEventIdToActivate", "eventId"},
      {"POST", "/instances/shop/personalizer/v1.0/nothing", good, kWriter, 404, "ResourceNotFound",
       ""},
      {"POST", "/personalizer/v9/rank", good, kWriter, 404, "ResourceNotFound", ""},
      {"GET", rank, "", kWriter, 405, "BadRequest", ""},
      {"PATCH", rank, good, kWriter, 405, "BadRequest", ""},
      {"POST", rank, good, nullptr, 401, "401", ""},
      {"POST", rank, good, "not-a-known-token-at-all", 401, "401", ""},
      {"POST", rank, good, kReader, 403, "InvalidApiAccess", ""},
      {"POST", "/instances/other/personalizer/v1.0/rank", good, kShopKey, 403, "InvalidApiAccess",
       ""},
      {"PUT", "/instances/shop/personalizer/v1.1-preview.3/configurations/service",
       "{\"rewardWaitTime\":\"PT1H\",\"modelExportFrequency\":\"PT1H\"}", kAdmin, 400,
       "InvalidServiceConfiguration", "modelExportFrequency"},
      {"PUT", "/instances/shop/personalizer/v1.1-preview.3/configurations/service",
       "{\"learningMode\":\"Sometimes\"}", kAdmin, 400, "InvalidServiceConfiguration",
       "learningMode"},
      {"PUT", "/instances/shop/personalizer/v1.1-preview.3/configurations/service",
       "{\"rewardWaitTime\":\"PT2H\",\"explorationPercentage\":0.3}", kAdmin, 400,
       "InvalidServiceConfiguration", "explorationPercentage"},
      {"POST", "/instances/shop/personalizer/v1.1-preview.3/multislot/rank", good, kWriter, 400,
       "BadRequest", "slots"},
      {"POST", "/instances/shop/personalizer/v1.1-preview.3/multislot/events/e1/reward",
       "{\"value\": 1}", kWriter, 400, "BadRequest", "reward"},
      {"GET", "/instances/shop/personalizer/v1.1-preview.3/multislot/rank", "", kWriter, 405,
       "BadRequest", ""},
      {"POST", "/instances/nobody/personalizer/v1.0/rank", good, kWriter, 404, "ResourceNotFound",
       ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.method + " " + c.path.substr(0, 80) + " " + c.body.substr(0, 80));
    Answer a = Send(port_, c.method, c.path, c.body, c.key);
    EXPECT_EQ(a.status, c.status) << a.body;
    EXPECT_EQ(a.code, c.code) << a.body;
    if (!c.target.empty()) {
      EXPECT_EQ(a.target, c.target) << a.body;
    }
    EXPECT_NE(a.body.find("\"message\""), std::string::npos) << a.body;
  }
  auto after = grpc_->ExportInstance("shop");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*before, *after) << "a refused request changed the instance";
  EXPECT_EQ(Stats("shop").rounds(), 0);
}

TEST_F(PersonalizerHttp, RewardActivateAndTheRootPathWithABoundKey) {
  ASSERT_TRUE(grpc_->CreateInstance(Create("shop")).ok());
  std::string context;
  std::vector<std::string> excluded;
  // The root path: the key names the instance.
  Answer a =
      Send(port_, "POST", "/personalizer/v1.0/rank", RankBody(2, &context, &excluded), kShopKey);
  ASSERT_EQ(a.status, 201) << a.body;
  rapidjson::Document doc;
  doc.Parse(a.body.c_str());
  const std::string event = doc["eventId"].GetString();
  EXPECT_EQ(Stats("shop").rounds(), 1);
  // An unbound key at the root without --personalizer_default_instance: no instance.
  EXPECT_EQ(Send(port_, "POST", "/personalizer/v1.0/rank", RankBody(2, &context, &excluded)).status,
            404);
  const std::string events = "/personalizer/v1.0/events/" + event;
  EXPECT_EQ(Send(port_, "POST", events + "/activate", "", kShopKey).status, 204);
  Answer r = Send(port_, "POST", events + "/reward", "{\"value\": 1}", kShopKey);
  EXPECT_EQ(r.status, 204) << r.body;
  EXPECT_EQ(Stats("shop").updates(), 1);
  EXPECT_DOUBLE_EQ(Stats("shop").reward_sum(), 1);
  // A second reward is accepted as Personalizer accepts it, and not learned (earliest wins).
  r = Send(port_, "POST", events + "/reward", "{\"value\": 0.5}", kShopKey);
  EXPECT_EQ(r.status, 204);
  EXPECT_TRUE(r.headers.count("x-bandit-reward-not-learned")) << r.body;
  EXPECT_EQ(Stats("shop").updates(), 1);
  EXPECT_EQ(Stats("shop").rejected_rewards(), 1);
  // Deferred activation with a caller's event id: the reward is kept until the activation.
  std::string deferred_body = RankBody(2, &context, &excluded);
  deferred_body.pop_back();
  deferred_body += ",\"deferActivation\":true,\"eventId\":\"view-7\"}";
  a = Send(port_, "POST", "/personalizer/v1.0/rank", deferred_body, kShopKey);
  ASSERT_EQ(a.status, 201) << a.body;
  EXPECT_NE(a.body.find("\"eventId\":\"view-7\""), std::string::npos) << a.body;
  EXPECT_EQ(Send(port_, "POST", "/personalizer/v1.0/events/view-7/reward", "{\"value\": 1}",
                 kShopKey)
                .status,
            204);
  EXPECT_EQ(Stats("shop").updates(), 1);  // kept, not learned yet
  EXPECT_EQ(Send(port_, "POST", "/personalizer/v1.0/events/view-7/activate", "", kShopKey).status,
            204);
  EXPECT_EQ(Stats("shop").updates(), 2);
  EXPECT_EQ(Stats("shop").activated(), 1);
  // Multi-slot (v1.1-preview.3): two slots, distinct actions, a reward per slot.
  std::string multi = RankBody(3, &context, &excluded);
  multi.pop_back();
  multi += ",\"eventId\":\"page-9\",\"slots\":[{\"id\":\"hero\",\"baselineAction\":\"a\"},"
           "{\"id\":\"side\",\"baselineAction\":\"b\",\"excludedActions\":[\"d\"]}]}";
  const std::string ms = "/personalizer/v1.1-preview.3/multislot";
  a = Send(port_, "POST", ms + "/rank", multi, kShopKey);
  ASSERT_EQ(a.status, 201) << a.body;
  rapidjson::Document slots;
  slots.Parse(a.body.c_str());
  ASSERT_TRUE(slots.HasMember("slots") && slots["slots"].Size() == 2) << a.body;
  EXPECT_EQ(std::string(slots["eventId"].GetString()), "page-9");
  EXPECT_EQ(std::string(slots["slots"][0]["id"].GetString()), "hero");
  const std::string hero = slots["slots"][0]["rewardActionId"].GetString();
  const std::string side = slots["slots"][1]["rewardActionId"].GetString();
  EXPECT_NE(hero, side);
  EXPECT_NE(side, "d");
  const int64_t before = Stats("shop").updates();
  EXPECT_EQ(Send(port_, "POST", ms + "/events/page-9/reward",
                 "{\"reward\":[{\"slotId\":\"hero\",\"value\":1},{\"slotId\":\"side\",\"value\":0}]}",
                 kShopKey)
                .status,
            204);
  EXPECT_EQ(Stats("shop").updates(), before + 2);
  // A slot the decision does not have: Personalizer's 400, nothing learned.
  a = Send(port_, "POST", ms + "/rank", multi.substr(0, multi.find(",\"eventId\"")) +
                                             ",\"slots\":[{\"id\":\"hero\"}]}",
           kShopKey);
  ASSERT_EQ(a.status, 201) << a.body;
  slots.Parse(a.body.c_str());
  const std::string ev = slots["eventId"].GetString();
  EXPECT_EQ(Send(port_, "POST", ms + "/events/" + ev + "/reward",
                 "{\"reward\":[{\"slotId\":\"footer\",\"value\":1}]}", kShopKey)
                .status,
            400);
  EXPECT_EQ(Stats("shop").updates(), before + 2);
  // Several slot rewards are all applied or none: a bad one after a good one (a slot the
  // decision does not have, a slot named twice, a number out of range) refuses the whole list,
  // and the good one is still open afterwards.
  a = Send(port_, "POST", ms + "/rank", multi.substr(0, multi.find(",\"eventId\"")) +
                                             ",\"eventId\":\"page-10\",\"slots\":[{\"id\":"
                                             "\"hero\"},{\"id\":\"side\"}]}",
           kShopKey);
  ASSERT_EQ(a.status, 201) << a.body;
  const v1::InstanceStats stats_before = Stats("shop");
  const std::string reward10 = ms + "/events/page-10/reward";
  Answer bad = Send(port_, "POST", reward10,
                    "{\"reward\":[{\"slotId\":\"hero\",\"value\":1},"
                    "{\"slotId\":\"footer\",\"value\":1}]}",
                    kShopKey);
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body,
            "{\"error\":{\"code\":\"BadRequest\",\"message\":\"reward[1]: slot_id 'footer' is "
            "not a slot of event 'page-10', expected one of: hero, side\"}}");
  bad = Send(port_, "POST", reward10,
             "{\"reward\":[{\"slotId\":\"side\",\"value\":0.5},"
             "{\"slotId\":\"side\",\"value\":1}]}",
             kShopKey);
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body,
            "{\"error\":{\"code\":\"BadRequest\",\"message\":\"reward[1] rewards event "
            "'page-10' slot 'side' as reward[0] does, expected one reward for each\"}}");
  bad = Send(port_, "POST", reward10,
             "{\"reward\":[{\"slotId\":\"hero\",\"value\":1},"
             "{\"slotId\":\"side\",\"value\":1e999}]}",
             kShopKey);
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(bad.code, "BadRequest") << bad.body;
  const v1::InstanceStats stats_after = Stats("shop");
  EXPECT_EQ(stats_after.updates(), stats_before.updates());
  EXPECT_EQ(stats_after.reward_sum(), stats_before.reward_sum());
  EXPECT_EQ(stats_after.rejected_rewards(), stats_before.rejected_rewards());
  EXPECT_EQ(stats_after.pending(), stats_before.pending());
  Answer good = Send(port_, "POST", reward10,
                     "{\"reward\":[{\"slotId\":\"hero\",\"value\":1},"
                     "{\"slotId\":\"side\",\"value\":0.25}]}",
                     kShopKey);
  EXPECT_EQ(good.status, 204) << good.body;
  EXPECT_FALSE(good.headers.count("x-bandit-reward-not-learned")) << good.body;
  EXPECT_EQ(Stats("shop").updates(), stats_before.updates() + 2);
  EXPECT_DOUBLE_EQ(Stats("shop").reward_sum(), stats_before.reward_sum() + 1.25);
  // Configuration as Personalizer reports it; restating it is accepted.
  Answer config =
      Send(port_, "GET", "/instances/shop/personalizer/v1.1-preview.3/configurations/service", "",
           kReader);
  ASSERT_EQ(config.status, 200) << config.body;
  EXPECT_NE(config.body.find("\"rewardWaitTime\":\"PT10M\""), std::string::npos) << config.body;
  Answer put =
      Send(port_, "PUT", "/instances/shop/personalizer/v1.1-preview.3/configurations/service",
           config.body, kAdmin);
  EXPECT_EQ(put.status, 200) << put.body;
  // Per-route, per-status metrics.
  const std::string metrics = bandit::testing::HttpGet(server_->metrics_port(), "/metrics");
  EXPECT_NE(
      metrics.find("bandit_http_request_duration_seconds_count{code=\"201\",route=\"rank\"} 2"),
      std::string::npos);  // the first rank and the deferred one
  EXPECT_NE(
      metrics.find(
          "bandit_http_request_duration_seconds_count{code=\"201\",route=\"multislot\"} 3"),
      std::string::npos);
  EXPECT_NE(
      metrics.find("bandit_http_request_duration_seconds_count{code=\"404\",route=\"rank\"} 1"),
      std::string::npos);
  // The connection series are exposed from the start, zero counts included.
  for (const char* series :
       {"bandit_http_connections_open ", "bandit_http_connections_cut_total{reason=\"header\"} 0",
        "bandit_http_connections_cut_total{reason=\"write\"} 0",
        "bandit_http_connections_refused_total{reason=\"max_connections_per_address\"} 0"})
    EXPECT_NE(metrics.find(series), std::string::npos) << series;
}

// PUT configurations/service changes the instance live: each Personalizer field maps onto one
// ConfigureInstance (checked over gRPC), learningMode's strings included; Apprentice serves the
// first action not excluded and reports Personalizer's apprentice metrics.
TEST_F(PersonalizerHttp, ServiceConfigurationChangesLiveAndLearningModes) {
  ASSERT_TRUE(grpc_->CreateInstance(Create("modes")).ok());
  const std::string path = "/instances/modes/personalizer/v1.1-preview.3/configurations/service";
  Answer put = Send(port_, "PUT", path,
                    "{\"rewardWaitTime\":\"PT1H\",\"defaultReward\":0.5,"
                    "\"rewardAggregation\":\"sum\",\"learningMode\":\"LoggingOnly\"}",
                    kAdmin);
  ASSERT_EQ(put.status, 200) << put.body;
  rapidjson::Document doc;
  ASSERT_FALSE(doc.Parse(put.body.c_str()).HasParseError()) << put.body;
  EXPECT_STREQ(doc["rewardWaitTime"].GetString(), "PT1H");
  EXPECT_EQ(doc["defaultReward"].GetDouble(), 0.5);
  EXPECT_STREQ(doc["rewardAggregation"].GetString(), "sum");
  EXPECT_STREQ(doc["learningMode"].GetString(), "LoggingOnly");
  auto inst = grpc_->GetInstance("modes");
  ASSERT_TRUE(inst.ok());
  EXPECT_EQ(inst->config().pending().reward_wait_ms(), 3'600'000);
  EXPECT_EQ(inst->config().pending().default_reward(), 0.5);
  EXPECT_EQ(inst->config().pending().reward_aggregation(), v1::SUM);
  EXPECT_EQ(inst->config().learning_mode(), v1::LOGGING_ONLY);
  // Refused: a writer's key, and a change that cannot be honoured (nothing of the PUT applies).
  EXPECT_EQ(Send(port_, "PUT", path, "{\"learningMode\":\"Online\"}", kWriter).status, 403);
  Answer refused = Send(port_, "PUT", path,
                        "{\"learningMode\":\"Online\",\"explorationPercentage\":0.3}", kAdmin);
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_EQ(refused.code, "InvalidServiceConfiguration");
  EXPECT_EQ(refused.target, "explorationPercentage");
  EXPECT_EQ(grpc_->GetInstance("modes")->config().learning_mode(), v1::LOGGING_ONLY);

  put = Send(port_, "PUT", path,
             "{\"rewardAggregation\":\"earliest\",\"learningMode\":\"Apprentice\"}", kAdmin);
  ASSERT_EQ(put.status, 200) << put.body;
  for (int t = 0; t < 10; ++t) {
    std::string context;
    std::vector<std::string> excluded;
    Answer a = Send(port_, "POST", "/instances/modes/personalizer/v1.0/rank",
                    RankBody(t, &context, &excluded));
    ASSERT_EQ(a.status, 201) << a.body;
    rapidjson::Document ranked;
    ranked.Parse(a.body.c_str());
    EXPECT_STREQ(ranked["rewardActionId"].GetString(), "a");
    EXPECT_STREQ(ranked["ranking"][0]["id"].GetString(), "a");
    EXPECT_EQ(ranked["ranking"][0]["probability"].GetDouble(), 1.0);
    ASSERT_EQ(Send(port_, "POST",
                   absl::StrCat("/instances/modes/personalizer/v1.0/events/",
                                ranked["eventId"].GetString(), "/reward"),
                   absl::StrCat("{\"value\":", t % 2, "}"))
                  .status,
              204);
  }
  Answer got = Send(port_, "GET", path, "", kReader);
  ASSERT_EQ(got.status, 200) << got.body;
  ASSERT_FALSE(doc.Parse(got.body.c_str()).HasParseError()) << got.body;
  EXPECT_STREQ(doc["learningMode"].GetString(), "Apprentice");
  ASSERT_TRUE(doc.HasMember("latestApprenticeModeMetrics")) << got.body;
  EXPECT_EQ(doc["latestApprenticeModeMetrics"]["numberOfEvents"].GetInt64(), 10);
  EXPECT_EQ(doc["latestApprenticeModeMetrics"]["sumOfRewards"].GetDouble(), 5.0);
  inst = grpc_->GetInstance("modes");
  ASSERT_TRUE(inst.ok());
  EXPECT_EQ(inst->stats().updates(), 10);
  EXPECT_EQ(inst->apprentice().events(), 10);
  EXPECT_EQ(doc["latestApprenticeModeMetrics"]["sumOfImitatedRewards"].GetDouble(),
            inst->apprentice().imitated_reward_sum());
  // Multi-slot in Apprentice: each slot serves its baselineAction (the policy, still deciding,
  // would not always agree), and its reward is the apprentice's, per slot and pooled.
  for (int t = 0; t < 6; ++t) {
    std::string context;
    std::vector<std::string> excluded;
    std::string multi = RankBody(t, &context, &excluded);
    multi.pop_back();
    const std::string hero_baseline = t % 2 ? "d" : "b";
    multi += absl::StrCat(",\"slots\":[{\"id\":\"hero\",\"baselineAction\":\"",
                          hero_baseline, "\"},{\"id\":\"side\",\"baselineAction\":\"a\"}]}");
    Answer a =
        Send(port_, "POST", "/instances/modes/personalizer/v1.1-preview.3/multislot/rank", multi);
    ASSERT_EQ(a.status, 201) << a.body;
    rapidjson::Document ranked;
    ranked.Parse(a.body.c_str());
    ASSERT_EQ(ranked["slots"].Size(), 2u) << a.body;
    EXPECT_EQ(std::string(ranked["slots"][0]["rewardActionId"].GetString()), hero_baseline);
    EXPECT_STREQ(ranked["slots"][1]["rewardActionId"].GetString(), "a");
    Answer r = Send(port_, "POST",
                    absl::StrCat("/instances/modes/personalizer/v1.1-preview.3/multislot/events/",
                                 ranked["eventId"].GetString(), "/reward"),
                    "{\"reward\":[{\"slotId\":\"hero\",\"value\":1},"
                    "{\"slotId\":\"side\",\"value\":0.5}]}");
    ASSERT_EQ(r.status, 204) << r.body;
    EXPECT_FALSE(r.headers.count("x-bandit-reward-not-learned")) << r.body;
  }
  inst = grpc_->GetInstance("modes");
  ASSERT_TRUE(inst.ok());
  EXPECT_EQ(inst->apprentice().events(), 10 + 12);
  EXPECT_DOUBLE_EQ(inst->apprentice().reward_sum(), 5.0 + 6 * 1.5);
  ASSERT_EQ(inst->apprentice().slots_size(), 2);
  EXPECT_EQ(inst->apprentice().slots(0).events(), 6);
  EXPECT_DOUBLE_EQ(inst->apprentice().slots(0).reward_sum(), 6.0);
  EXPECT_DOUBLE_EQ(inst->apprentice().slots(1).reward_sum(), 3.0);
  got = Send(port_, "GET", path, "", kReader);
  ASSERT_FALSE(doc.Parse(got.body.c_str()).HasParseError()) << got.body;
  EXPECT_EQ(doc["latestApprenticeModeMetrics"]["numberOfEvents"].GetInt64(), 22);
  // Restating the configuration as read changes nothing.
  put = Send(port_, "PUT", path, got.body, kAdmin);
  EXPECT_EQ(put.status, 200) << put.body;
  put = Send(port_, "PUT", path, "{\"learningMode\":\"Online\"}", kAdmin);
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(grpc_->GetInstance("modes")->config().learning_mode(), v1::ONLINE);
}

// logs/properties: the date range of the decision log, from its oldest and newest decisions'
// times (checked against the log as exported over gRPC); an empty range without decisions.
TEST_F(PersonalizerHttp, LogsPropertiesGiveTheDecisionLogsDateRange) {
  ASSERT_TRUE(grpc_->CreateInstance(Create("logged", std::string(kConfig) +
                                                         " decision_log { enabled: true }"))
                  .ok());
  const std::string path = "/instances/logged/personalizer/v1.1-preview.3/logs/properties";
  Answer empty = Send(port_, "GET", path, "", kReader);
  EXPECT_EQ(empty.status, 200);
  EXPECT_EQ(empty.body, "{\"dateRange\":{}}");
  for (int t = 0; t < 3; ++t) {
    std::string context;
    std::vector<std::string> excluded;
    ASSERT_EQ(Send(port_, "POST", "/instances/logged/personalizer/v1.0/rank",
                   RankBody(t, &context, &excluded))
                  .status,
              201);
  }
  std::vector<int64_t> decided;
  v1::ExportDecisionLogRequest exp;
  exp.set_name("logged");
  auto read = grpc_->ExportDecisionLog(exp, [&](const v1::LoggedDecision& d) {
    decided.push_back(d.decided_at_ms());
    return absl::OkStatus();
  });
  ASSERT_TRUE(read.ok()) << read;
  ASSERT_EQ(decided.size(), 3u);
  auto rfc3339 = [](int64_t ms) {
    return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(ms), absl::UTCTimeZone());
  };
  Answer props = Send(port_, "GET", path, "", kReader);
  EXPECT_EQ(props.status, 200);
  EXPECT_EQ(props.body, absl::StrCat("{\"dateRange\":{\"from\":\"", rfc3339(decided.front()),
                                     "\",\"to\":\"", rfc3339(decided.back()), "\"}}"));
}

// Personalizer's evaluations: created (201, Location, pending), polled until completed, listed,
// deleted; the online policy's figures are the rewards the test gave; each refusal has
// Personalizer's status and code.
TEST_F(PersonalizerHttp, EvaluationsAreCreatedPolledListedAndDeleted) {
  ASSERT_TRUE(grpc_->CreateInstance(
                       Create("evals", "policy { vw { arguments: '--cb_explore_adf --epsilon 0.2 "
                                       "-q :: -b 12' } } decision_log { enabled: true } seed: 1"))
                  .ok());
  RankAndReward(port_, "evals", 0, 60, [](int t) { return t % 2; });
  const absl::Time now = absl::Now();
  const auto when = [now](absl::Duration from_now) {
    return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", now + from_now, absl::UTCTimeZone());
  };
  const std::string base = "/instances/evals/personalizer/v1.1-preview.3/evaluations";
  const auto contract = [&](const std::string& start, const std::string& end,
                            const std::string& policies) {
    return absl::StrCat("{\"name\":\"compare\",\"startTime\":\"", start, "\",\"endTime\":\"",
                        end, "\",\"enableOfflineExperimentation\":false,\"policies\":[",
                        policies, "]}");
  };
  const std::string other =
      "{\"name\":\"low epsilon\",\"arguments\":\"--cb_explore_adf --epsilon 0.05 -q :: -b 12\"}";
  Answer created = Send(port_, "POST", base,
                        contract(when(absl::Hours(-1)), when(absl::Hours(1)), other), kAdmin);
  ASSERT_EQ(created.status, 201) << created.body;
  rapidjson::Document doc;
  doc.Parse(created.body.c_str());
  const std::string id = doc["id"].GetString();
  EXPECT_EQ(std::string(doc["jobId"].GetString()), id);
  EXPECT_EQ(std::string(doc["evaluationType"].GetString()), "Manual");
  EXPECT_TRUE(doc.HasMember("creationTime"));
  EXPECT_EQ(created.headers.find("Location")->second, base + "/" + id);
  // Polled as the SDK's callers do.
  Answer got;
  for (int i = 0; i < 500; ++i) {
    got = Send(port_, "GET", base + "/" + id, "", kReader);
    ASSERT_EQ(got.status, 200) << got.body;
    doc.Parse(got.body.c_str());
    if (std::string(doc["status"].GetString()) != "pending") break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_EQ(std::string(doc["status"].GetString()), "completed") << got.body;
  std::map<std::string, const rapidjson::Value*> by_source;
  for (const auto& r : doc["policyResults"].GetArray())
    by_source[r["policySource"].GetString()] = &r;
  ASSERT_EQ(by_source.size(), 4u) << got.body;
  const rapidjson::Value& online = (*by_source["Online"])["totalSummary"];
  EXPECT_EQ(online["ipsEstimatorDenominator"].GetDouble(), 60);
  EXPECT_DOUBLE_EQ(online["ipsEstimatorNumerator"].GetDouble(), 30);  // half the rounds paid 1
  EXPECT_DOUBLE_EQ(online["averageReward"].GetDouble(), 0.5);
  EXPECT_EQ(std::string((*by_source["Custom"])["name"].GetString()), "low epsilon");
  EXPECT_EQ(std::string(online["aggregateTimeWindow"].GetString()), "PT2H");
  EXPECT_GT((*by_source["Custom"])["summary"].GetArray().Size(), 0u);
  Answer listed = Send(port_, "GET", base, "", kReader);
  ASSERT_EQ(listed.status, 200);
  doc.Parse(listed.body.c_str());
  ASSERT_TRUE(doc.IsArray());
  EXPECT_EQ(doc.GetArray().Size(), 1u);
  // Refusals.
  const auto refused = [&](const std::string& body, int status, const std::string& code) {
    Answer a = Send(port_, "POST", base, body, kAdmin);
    EXPECT_EQ(a.status, status) << body << " -> " << a.body;
    EXPECT_EQ(a.code, code) << body << " -> " << a.body;
  };
  refused(contract(when(absl::Hours(1)), when(absl::Hours(-1)), other), 400,
          "InvalidEvaluationContract");
  refused(contract(when(absl::Hours(-1)), when(absl::Hours(1)), absl::StrCat(other, ",", other)),
          400, "DuplicateCustomPolicyNames");
  refused(contract(when(absl::Hours(-1)), when(absl::Hours(1)),
                   "{\"name\":\"bad\",\"arguments\":\"--cb_explore_adf --bogus\"}"),
          400, "InvalidPolicyConfiguration");
  refused(contract("2001-01-01T00:00:00Z", "2001-01-02T00:00:00Z", other), 400,
          "NoLogsExistInDateRange");
  refused("{\"name\":\"x\",\"startTime\":\"yesterday\"}", 400, "InvalidEvaluationContract");
  EXPECT_EQ(Send(port_, "POST", base, contract(when(absl::Hours(-1)), when(absl::Hours(1)), other),
                 kReader)
                .status,
            403);
  // The learning settings: an evaluated policy applied, others put (each trained on the log),
  // refusals with Personalizer's codes.
  const std::string config = "/instances/evals/personalizer/v1.1-preview.3/configurations/";
  Answer applied = Send(port_, "POST", config + "applyFromEvaluation",
                        absl::StrCat("{\"evaluationId\":\"", id, "\",\"policyName\":\"low epsilon\"}"),
                        kAdmin);
  EXPECT_EQ(applied.status, 204) << applied.body;
  Answer policy = Send(port_, "GET", config + "policy", "", kReader);
  ASSERT_EQ(policy.status, 200);
  doc.Parse(policy.body.c_str());
  EXPECT_EQ(std::string(doc["arguments"].GetString()),
            "--cb_explore_adf --epsilon 0.05 -q :: -b 12");
  Answer none = Send(port_, "POST", config + "applyFromEvaluation",
                     absl::StrCat("{\"evaluationId\":\"", id, "\",\"policyName\":\"nope\"}"), kAdmin);
  EXPECT_EQ(none.status, 404);
  EXPECT_EQ(none.code, "LearningSettingsNotFound");
  Answer gone = Send(port_, "POST", config + "applyFromEvaluation",
                     "{\"evaluationId\":\"nosuch\",\"policyName\":\"low epsilon\"}", kAdmin);
  EXPECT_EQ(gone.code, "EvaluationNotFound");
  Answer put = Send(port_, "PUT", config + "policy",
                    "{\"name\":\"wider\",\"arguments\":\"--cb_explore_adf --epsilon 0.3 -q :: -b 12\"}",
                    kAdmin);
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(put.body,
            "{\"name\":\"wider\",\"arguments\":\"--cb_explore_adf --epsilon 0.3 -q :: -b 12\"}");
  Answer refused_put = Send(port_, "PUT", config + "policy",
                            "{\"name\":\"x\",\"arguments\":\"--cb_explore_adf --bogus\"}", kAdmin);
  EXPECT_EQ(refused_put.status, 400);
  EXPECT_EQ(refused_put.code, "InvalidPolicyConfiguration");
  policy = Send(port_, "GET", config + "policy", "", kReader);
  doc.Parse(policy.body.c_str());
  EXPECT_EQ(std::string(doc["arguments"].GetString()),
            "--cb_explore_adf --epsilon 0.3 -q :: -b 12");
  // The default's settings hash into 2^18, not this instance's 2^12: the instance's feature
  // space becomes theirs.
  Answer reset = Send(port_, "DELETE", config + "policy", "", kAdmin);
  ASSERT_EQ(reset.status, 200) << reset.body;
  policy = Send(port_, "GET", config + "policy", "", kReader);
  doc.Parse(policy.body.c_str());
  EXPECT_EQ(std::string(doc["arguments"].GetString()), "--cb_explore_adf --squarecb -q :: -b 18");
  Answer unknown = Send(port_, "GET", base + "/nosuch", "", kReader);
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(unknown.code, "EvaluationNotFound");
  EXPECT_EQ(Send(port_, "DELETE", base + "/" + id, "", kAdmin).status, 204);
  EXPECT_EQ(Send(port_, "GET", base + "/" + id, "", kReader).code, "EvaluationNotFound");
  listed = Send(port_, "GET", base, "", kReader);
  EXPECT_EQ(listed.body, "[]");
}

TEST_F(PersonalizerHttp, ModelExportedFromOneInstanceContinuesExactlyOnAnother) {
  ASSERT_TRUE(grpc_->CreateInstance(Create("source")).ok());
  ASSERT_TRUE(
      grpc_->CreateInstance(Create("target", "policy { linucb {} } feature_space { bits: 4 }"))
          .ok());
  std::string context;
  std::vector<std::string> excluded;
  ASSERT_NO_FATAL_FAILURE(RankAndReward(port_, "source", 0, 20, [](int t) { return t % 2; }));
  Answer model =
      Send(port_, "GET", "/instances/source/personalizer/v1.1-preview.3/model", "", kAdmin);
  ASSERT_EQ(model.status, 200);
  // A file that is not a model leaves the target as it was.
  EXPECT_EQ(Send(port_, "PUT", "/instances/target/personalizer/v1.1-preview.3/model", "not a model",
                 kAdmin)
                .code,
            "InvalidModelImportFormat");
  EXPECT_TRUE(grpc_->GetInstance("target").ok());
  Answer put =
      Send(port_, "PUT", "/instances/target/personalizer/v1.1-preview.3/model", model.body, kAdmin);
  ASSERT_EQ(put.status, 204) << put.body;
  for (int t = 20; t < 40; ++t) {
    const std::string body = RankBody(t, &context, &excluded);
    Answer s = Send(port_, "POST", "/instances/source/personalizer/v1.0/rank", body);
    Answer d = Send(port_, "POST", "/instances/target/personalizer/v1.0/rank", body);
    ASSERT_EQ(s.status, 201);
    ASSERT_EQ(d.status, 201);
    rapidjson::Document sd, dd;
    sd.Parse(s.body.c_str());
    dd.Parse(d.body.c_str());
    EXPECT_EQ(std::string(sd["rewardActionId"].GetString()), dd["rewardActionId"].GetString());
    EXPECT_EQ(std::string(sd["ranking"][0]["id"].GetString()), dd["ranking"][0]["id"].GetString());
  }
  // Reset through the model route: the learned state is gone.
  EXPECT_EQ(Send(port_, "DELETE", "/instances/target/personalizer/v1.1-preview.3/model", "", kAdmin)
                .status,
            204);
  EXPECT_EQ(Stats("target").updates(), 0);
}

// PUT model with a Vowpal Wabbit model file (what Personalizer's model export held): the
// instance becomes a vw instance of the file's arguments and ranks as the exported one does.
TEST_F(PersonalizerHttp, ModelPutAsAVwModelFileRanksAsItsSource) {
  ASSERT_TRUE(
      grpc_
          ->CreateInstance(Create("vwsource",
                                  "policy { vw { arguments: '--cb_explore_adf --epsilon 0.2 "
                                  "-q :: -b 16' } } seed: 3"))
          .ok());
  std::string context;
  std::vector<std::string> excluded;
  ASSERT_NO_FATAL_FAILURE(
      RankAndReward(port_, "vwsource", 0, 30, [](int t) { return t % 3 == 0 ? 1 : 0; }));
  auto model = grpc_->ExportInstance("vwsource", bandit::v1::VW);
  ASSERT_TRUE(model.ok()) << model.status();
  Answer put =
      Send(port_, "PUT", "/instances/vwtarget/personalizer/v1.1-preview.3/model", *model, kAdmin);
  ASSERT_EQ(put.status, 204) << put.body;
  auto target = grpc_->GetInstance("vwtarget");
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_TRUE(target->config().policy().has_vw());
  for (int t = 30; t < 40; ++t) {
    const std::string body = RankBody(t, &context, &excluded);
    Answer s = Send(port_, "POST", "/instances/vwsource/personalizer/v1.0/rank", body);
    Answer d = Send(port_, "POST", "/instances/vwtarget/personalizer/v1.0/rank", body);
    ASSERT_EQ(s.status, 201);
    ASSERT_EQ(d.status, 201);
    rapidjson::Document sd, dd;
    sd.Parse(s.body.c_str());
    dd.Parse(d.body.c_str());
    std::map<std::string, double> ps, pd;
    for (const auto& r : sd["ranking"].GetArray())
      ps[r["id"].GetString()] = r["probability"].GetDouble();
    for (const auto& r : dd["ranking"].GetArray())
      pd[r["id"].GetString()] = r["probability"].GetDouble();
    EXPECT_EQ(ps, pd) << t;
  }
}

// PUT model is one durable step: after a refused file the instance exports byte for byte as
// before, and a kill -9 right after the 204 restarts into the imported instance (its learned
// state and config: it ranks as its source does), never the old one and never none.
// Rounds that wait on nothing (--durability=none, no cluster) are served on the I/O thread that
// read them; with --http_rounds_on_io_threads=false, on a handler thread. The same requests
// (client-chosen event ids, a seeded instance) must get the same answers, byte for byte, both
// ways, refusals included, and pipelined requests their answers in the order sent.
TEST(PersonalizerHttpRounds, OnTheIoThreadsAnswerAsOnTheHandlerThreads) {
  ServerProcess io_threads(
      std::vector<std::string>{"--http_listen=127.0.0.1:0", "--durability=none"});
  ServerProcess handlers(std::vector<std::string>{
      "--http_listen=127.0.0.1:0", "--durability=none", "--http_rounds_on_io_threads=false"});
  ASSERT_TRUE(io_threads.running()) << io_threads.Log();
  ASSERT_TRUE(handlers.running()) << handlers.Log();
  const int ports[2] = {HttpPort(io_threads), HttpPort(handlers)};
  for (ServerProcess* server : {&io_threads, &handlers}) {
    BanditClient grpc(server->target());
    ASSERT_TRUE(grpc.CreateInstance(Create("shop")).ok());
  }
  const std::string base = "/instances/shop/personalizer/v1.0/";
  // Sends the same request to both servers; they must answer alike. Returns the answer.
  auto both = [&](const std::string& method, const std::string& path, const std::string& body) {
    Answer a = Send(ports[0], method, path, body);
    Answer b = Send(ports[1], method, path, body);
    EXPECT_EQ(a.status, b.status) << method << " " << path << ": " << a.body << " / " << b.body;
    EXPECT_EQ(a.body, b.body) << method << " " << path;
    return a;
  };
  int rewarded = 0;
  for (int t = 0; t < 40; ++t) {
    std::string context;
    std::vector<std::string> excluded;
    std::string body = RankBody(t, &context, &excluded);
    body.insert(1, absl::StrCat("\"eventId\":\"round-", t, "\","));
    Answer ranked = both("POST", base + "rank", body);
    ASSERT_EQ(ranked.status, 201) << ranked.body;
    rapidjson::Document doc;
    ASSERT_FALSE(doc.Parse(ranked.body.c_str()).HasParseError());
    ASSERT_EQ(std::string(doc["eventId"].GetString()), absl::StrCat("round-", t));
    const std::string event = absl::StrCat(base, "events/round-", t);
    if (t % 4 == 3) {
      EXPECT_EQ(both("POST", event + "/activate", "").status, 204);
      continue;
    }
    const bool liked = std::string(doc["rewardActionId"].GetString()) == (t % 3 ? "b" : "a");
    EXPECT_EQ(both("POST", event + "/reward", absl::StrCat("{\"value\":", liked, "}")).status,
              204);
    ++rewarded;
  }
  // Refusals on the same path: a body that is not JSON, a reward that is not a number, a reward
  // for an event never ranked (accepted, not learned), and an event id used twice.
  EXPECT_EQ(both("POST", base + "rank", "{").status, 400);
  EXPECT_EQ(both("POST", base + "events/round-0/reward", "{\"value\":\"high\"}").status, 400);
  EXPECT_EQ(both("POST", base + "events/never/reward", "{\"value\":1}").status, 204);
  {
    std::string context;
    std::vector<std::string> excluded;
    std::string body = RankBody(0, &context, &excluded);
    body.insert(1, "\"eventId\":\"round-1\",");
    EXPECT_EQ(both("POST", base + "rank", body).status, 400);
  }
  for (ServerProcess* server : {&io_threads, &handlers}) {
    BanditClient grpc(server->target());
    auto got = grpc.GetInstance("shop");
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->stats().updates(), rewarded);
  }

  // Three ranks written at once on one connection: three answers, in the order sent.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(ports[0]));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  std::string wire;
  for (int k = 0; k < 3; ++k) {
    std::string context;
    std::vector<std::string> excluded;
    std::string body = RankBody(k, &context, &excluded);
    body.insert(1, absl::StrCat("\"eventId\":\"piped-", k, "\","));
    absl::StrAppend(&wire, "POST ", base, "rank HTTP/1.1\r\nHost: localhost\r\n",
                    "Content-Type: application/json\r\nContent-Length: ", body.size(), "\r\n\r\n",
                    body);
  }
  ASSERT_EQ(send(fd, wire.data(), wire.size(), 0), static_cast<ssize_t>(wire.size()));
  std::string got;
  std::vector<std::string> bodies;
  while (bodies.size() < 3) {
    const size_t head_end = got.find("\r\n\r\n");
    if (head_end != std::string::npos) {
      const std::string head = absl::AsciiStrToLower(got.substr(0, head_end));
      const size_t cl = head.find("content-length: ");
      ASSERT_NE(cl, std::string::npos) << head;
      const size_t length = std::stoul(head.substr(cl + 16));
      if (got.size() >= head_end + 4 + length) {
        EXPECT_EQ(got.compare(0, 12, "HTTP/1.1 201"), 0) << got.substr(0, head_end);
        bodies.push_back(got.substr(head_end + 4, length));
        got.erase(0, head_end + 4 + length);
        continue;
      }
    }
    char buf[65536];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    ASSERT_GT(n, 0) << "the connection closed after " << bodies.size() << " answers";
    got.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  for (int k = 0; k < 3; ++k) {
    rapidjson::Document doc;
    ASSERT_FALSE(doc.Parse(bodies[k].c_str()).HasParseError()) << bodies[k];
    EXPECT_EQ(std::string(doc["eventId"].GetString()), absl::StrCat("piped-", k));
  }
}

TEST(PersonalizerHttpCrash, PutModelSurvivesKillNineAsTheImportedInstance) {
  const bandit::testing::TempDir temp("personalizer-put-crash");
  const std::vector<std::string> args = {"--http_listen=127.0.0.1:0", "--durability=always"};
  const std::string target_model = "/instances/target/personalizer/v1.1-preview.3/model";
  {
    ServerProcess server(args, temp.path());
    ASSERT_TRUE(server.running()) << server.Log();
    const int port = HttpPort(server);
    BanditClient grpc(server.target());
    ASSERT_TRUE(grpc.CreateInstance(Create("source")).ok());
    ASSERT_TRUE(
        grpc.CreateInstance(Create("target", "policy { linucb {} } feature_space { bits: 4 }"))
            .ok());
    ASSERT_NO_FATAL_FAILURE(RankAndReward(port, "source", 0, 20, [](int t) { return t % 2; }));
    ASSERT_NO_FATAL_FAILURE(RankAndReward(port, "target", 0, 5, [](int) { return 1; }));
    Answer model =
        Send(port, "GET", "/instances/source/personalizer/v1.1-preview.3/model", "", nullptr);
    ASSERT_EQ(model.status, 200);
    Answer before = Send(port, "GET", target_model, "", nullptr);
    ASSERT_EQ(before.status, 200);
    Answer refused = Send(port, "PUT", target_model, model.body.substr(0, model.body.size() / 2),
                          nullptr);
    EXPECT_EQ(refused.status, 400);
    EXPECT_EQ(refused.code, "InvalidModelImportFormat");
    EXPECT_EQ(Send(port, "GET", target_model, "", nullptr).body, before.body);
    Answer put = Send(port, "PUT", target_model, model.body, nullptr);
    ASSERT_EQ(put.status, 204) << put.body;
    server.Stop(SIGKILL);
  }
  ServerProcess server(args, temp.path());
  ASSERT_TRUE(server.running()) << server.Log();
  const int port = HttpPort(server);
  BanditClient grpc(server.target());
  auto target = grpc.GetInstance("target");
  ASSERT_TRUE(target.ok()) << target.status() << server.Log();
  EXPECT_EQ(target->stats().updates(), 20);
  EXPECT_EQ(target->config().feature_space().bits(), 5);  // the source's, not the old 4
  std::string context;
  std::vector<std::string> excluded;
  for (int t = 20; t < 30; ++t) {
    const std::string body = RankBody(t, &context, &excluded);
    Answer s = Send(port, "POST", "/instances/source/personalizer/v1.0/rank", body, nullptr);
    Answer d = Send(port, "POST", "/instances/target/personalizer/v1.0/rank", body, nullptr);
    ASSERT_EQ(s.status, 201) << s.body;
    ASSERT_EQ(d.status, 201) << d.body;
    rapidjson::Document sd, dd;
    sd.Parse(s.body.c_str());
    dd.Parse(d.body.c_str());
    EXPECT_EQ(std::string(sd["rewardActionId"].GetString()), dd["rewardActionId"].GetString());
  }
}

TEST(PersonalizerHttpRoot, DefaultInstanceAndAutoCreateWithoutAuth) {
  ServerProcess server({"--http_listen=127.0.0.1:0", "--personalizer_default_instance=home",
                        "--personalizer_auto_create"});
  ASSERT_TRUE(server.running()) << server.Log();
  const int port = HttpPort(server);
  std::string context;
  std::vector<std::string> excluded;
  Answer a =
      Send(port, "POST", "/personalizer/v1.0/rank", RankBody(3, &context, &excluded), nullptr);
  ASSERT_EQ(a.status, 201) << a.body;
  BanditClient grpc(server.target());
  auto home = grpc.GetInstance("home");
  ASSERT_TRUE(home.ok()) << home.status();
  // Personalizer's defaults: VW's learner at 2^18 with SquareCB (docs/personalizer.md).
  EXPECT_EQ(home->config().policy().vw().arguments(), "--cb_explore_adf --squarecb -q :: -b 18");
  EXPECT_EQ(home->config().feature_space().bits(), 18);
  EXPECT_EQ(home->stats().rounds(), 1);
}

}  // namespace
}  // namespace bandit

namespace bandit {
namespace BANDIT_UNITY_ID {

TEST(InstanceBoundTokens, ParseAndCheck) {
  auto auth = server::Authorizer::Parse(
      "writer bound-token-0123456789 shop-app instance=shop\n"
      "writer free-token-01234567890 instance=\n",
      "t");
  EXPECT_EQ(auth.status().code(), absl::StatusCode::kInvalidArgument);  // empty NAME
  auth = server::Authorizer::Parse("writer bound-token-0123456789 instance=a instance=b\n", "t");
  EXPECT_EQ(auth.status().code(), absl::StatusCode::kInvalidArgument);  // two instances
  auth = server::Authorizer::Parse(
      "writer bound-token-0123456789 instance=shop shop-app\n"
      "admin admin-token-0123456789\n",
      "t");
  ASSERT_TRUE(auth.ok()) << auth.status();
  const std::string bound = "Bearer bound-token-0123456789";
  EXPECT_EQ((*auth)->BoundInstance("bound-token-0123456789"), "shop");
  EXPECT_EQ((*auth)->BoundInstance("admin-token-0123456789"), "");
  EXPECT_TRUE((*auth)->Authorize(server::Rpc::kSelect, &bound, "shop").ok());
  EXPECT_EQ((*auth)->Authorize(server::Rpc::kSelect, &bound, "other").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ((*auth)->Authorize(server::Rpc::kListInstances, &bound, "").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ((*auth)->Authorize(server::Rpc::kCreateInstance, &bound, "shop").code(),
            absl::StatusCode::kPermissionDenied);  // the role still applies
  const std::string admin = "Bearer admin-token-0123456789";
  EXPECT_TRUE((*auth)->Authorize(server::Rpc::kListInstances, &admin, "").ok());
}

TEST_F(PersonalizerHttp, ABoundKeyOverGrpcReachesItsInstanceOnly) {
  ASSERT_TRUE(grpc_->CreateInstance(Create("shop")).ok());
  ASSERT_TRUE(grpc_->CreateInstance(Create("other")).ok());
  ClientOptions options;
  options.token = kShopKey;
  BanditClient shop(server_->target(), options);
  std::string context;
  std::vector<std::string> excluded;
  RankBody(0, &context, &excluded);
  EXPECT_TRUE(shop.Select(SelectOf("shop", context, excluded)).ok());
  EXPECT_EQ(shop.Select(SelectOf("other", context, excluded)).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(shop.ListInstances(10, "").status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(shop.GetInstance("shop").ok());
  EXPECT_EQ(shop.GetInstance("other").status().code(), absl::StatusCode::kPermissionDenied);
}

// The HTTP listener serves TLS with the gRPC port's certificate and key (--tls_cert,
// --tls_key; certificates made here with openssl): a rank over https with the CA trusted is
// answered; a client trusting another CA refuses the server, and plain HTTP to the port gets
// no HTTP answer.
TEST(PersonalizerHttpTls, RankOverHttpsWithTheGrpcPortsCertificate) {
  const bandit::testing::TestCerts certs = bandit::testing::TestCerts::Make();
  ASSERT_TRUE(certs.ok) << certs.error;
  ServerProcess server({"--http_listen=127.0.0.1:0", "--tls_cert=" + certs.server_pem,
                        "--tls_key=" + certs.server_key, "--personalizer_auto_create"});
  ASSERT_TRUE(server.running()) << server.Log();
  const int port = HttpPort(server);
  ASSERT_GT(port, 0) << server.Log();
  std::string context;
  std::vector<std::string> excluded;
  const std::string body = RankBody(1, &context, &excluded);
  const std::string path = "/instances/secure/personalizer/v1.0/rank";

  httplib::SSLClient https("localhost", port);
  https.set_ca_cert_path(certs.ca_pem.c_str());
  https.enable_server_certificate_verification(true);
  https.set_read_timeout(10, 0);
  httplib::Result r = https.Post(path.c_str(), body, "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error()) << "\n" << server.Log();
  EXPECT_EQ(r->status, 201) << r->body;
  rapidjson::Document doc;
  ASSERT_FALSE(doc.Parse(r->body.c_str()).HasParseError()) << r->body;
  EXPECT_TRUE(doc.HasMember("eventId") && doc.HasMember("rewardActionId")) << r->body;

  httplib::SSLClient untrusting("localhost", port);
  untrusting.set_ca_cert_path(certs.rogue_ca_pem.c_str());
  untrusting.enable_server_certificate_verification(true);
  untrusting.set_read_timeout(10, 0);
  httplib::Result refused = untrusting.Post(path.c_str(), body, "application/json");
  EXPECT_FALSE(refused);
  if (!refused) {
    EXPECT_EQ(refused.error(), httplib::Error::SSLServerVerification);
  }

  httplib::Client plain("127.0.0.1", port);
  plain.set_read_timeout(10, 0);
  httplib::Result cleartext = plain.Post(path.c_str(), body, "application/json");
  EXPECT_FALSE(cleartext) << cleartext->status << " " << cleartext->body;
  certs.Remove();
}

// With --tls_client_ca the HTTP listener asks for a client certificate and checks it in the
// handshake, as the gRPC port does: a client with a certificate of that CA is served; one
// without a certificate, or with one of another CA, gets no HTTP answer.
TEST(PersonalizerHttpTls, MutualTlsNeedsAClientCertificateOfTheClientCa) {
  // A refused client may still write its request into the closed connection (with TLS 1.3 the
  // server checks the client's certificate after the client's side of the handshake is done),
  // and OpenSSL's write does not ask the kernel to spare it SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  const bandit::testing::TestCerts certs = bandit::testing::TestCerts::Make();
  ASSERT_TRUE(certs.ok) << certs.error;
  ServerProcess server({"--http_listen=127.0.0.1:0", "--tls_cert=" + certs.server_pem,
                        "--tls_key=" + certs.server_key, "--tls_client_ca=" + certs.ca_pem,
                        "--personalizer_auto_create"});
  ASSERT_TRUE(server.running()) << server.Log();
  const int port = HttpPort(server);
  ASSERT_GT(port, 0) << server.Log();
  std::string context;
  std::vector<std::string> excluded;
  const std::string body = RankBody(1, &context, &excluded);
  const std::string path = "/instances/mutual/personalizer/v1.0/rank";
  auto rank = [&](const std::string& cert, const std::string& key) {
    std::unique_ptr<httplib::SSLClient> client =
        cert.empty() ? std::make_unique<httplib::SSLClient>("localhost", port)
                     : std::make_unique<httplib::SSLClient>("localhost", port, cert, key);
    client->set_ca_cert_path(certs.ca_pem.c_str());
    client->enable_server_certificate_verification(true);
    client->set_read_timeout(10, 0);
    httplib::Result r = client->Post(path.c_str(), body, "application/json");
    return r ? r->status : 0;
  };
  EXPECT_EQ(rank(certs.client_pem, certs.client_key), 201) << server.Log();
  EXPECT_EQ(rank("", ""), 0);
  EXPECT_EQ(rank(certs.rogue_client_pem, certs.rogue_client_key), 0);
  EXPECT_EQ(rank(certs.client_pem, certs.client_key), 201) << server.Log();
  certs.Remove();
}

}  // namespace
}  // namespace bandit
