// Named features end to end through DecisionService: an instance with a feature space decides
// exactly as a twin fed the hashed vectors through the dense API, refuses bad input with the
// path and leaves its state alone, and replays named requests exactly after a crash.
#include <google/protobuf/text_format.h>
#include <gmock/gmock.h>
#include <nlohmann/json.hpp>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cpp/decision_log_format.h"
#include "client/cpp/named_request.h"
#include "core/features/config.h"
#include "core/features/feature_space.h"
#include "core/registry.h"
#include "server/service/decision_service.h"
#include "server/service/persistence.h"
#include "server/storage/file_storage.h"
#include "server/storage/snapshot_store.h"
#include "tests/server/fault_injection_fs.h"
#include "tests/server/file_node.h"
#include "tests/server/server_test_util.h"
#include "core/ope/evaluator.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

using absl::StatusCode;
using ::testing::HasSubstr;
using testing::Create;
namespace v1 = bandit::v1;

constexpr char kNamed[] =
    "policy { linucb { alpha: 0.5 } } feature_space { bits: 8 interactions: 'UA' } seed: 5";
constexpr char kDense[] = "policy { linucb { alpha: 0.5 dimension: 256 } } seed: 5";

const char* kColors[] = {"red", "green", "blue", "black"};
const char* kCountries[] = {"US", "DE", "IN"};

// One round's named request: a user with categorical and numeric features, five actions with
// their own features, sometimes one excluded.
v1::SelectRequest NamedRequest(const std::string& instance, int round) {
  v1::SelectRequest req;
  req.set_instance(instance);
  const int country = round % 3, age = 20 + (round * 7) % 40;
  req.set_context(absl::StrCat(R"({"User":{"country":")", kCountries[country], R"(","age":)", age,
                               R"(},"device":"mobile"})"));
  for (int a = 0; a < 5; ++a) {
    auto* action = req.add_actions();
    action->set_id(absl::StrCat("item-", a));
    action->set_features(absl::StrCat(R"({"Action":{"color":")", kColors[a % 4], R"(","price":)",
                                      1 + a, R"(}})"));
  }
  if (round % 4 == 3) req.add_excluded_actions(absl::StrCat("item-", round % 5));
  return req;
}

// The same request as the dense API takes it: the hashed vector of each action not excluded.
v1::SelectRequest DenseRequest(const std::string& instance, const v1::SelectRequest& named,
                               std::vector<int>* action_of) {
  features::FeatureSpaceOptions o;
  o.bits = 8;
  o.interactions = {"UA"};
  auto space = *features::FeatureSpace::Create(o);
  features::InputLimits limits;
  features::ParsedFeatures shared;
  EXPECT_TRUE(space.Parse(named.context(), "context", limits, false, &shared).ok());
  v1::SelectRequest req;
  req.set_instance(instance);
  action_of->clear();
  for (int i = 0; i < named.actions_size(); ++i) {
    bool excluded = false;
    for (const auto& e : named.excluded_actions()) excluded |= e == named.actions(i).id();
    if (excluded) continue;
    features::ParsedFeatures action;
    EXPECT_TRUE(space.Parse(named.actions(i).features(), "a", limits, false, &action).ok());
    features::SparseFeatures f;
    space.Featurize(action, &shared, false, &f);
    std::vector<double> dense(256, 0.0);
    for (size_t k = 0; k < f.index.size(); ++k) dense[f.index[k]] += f.value[k];
    auto* c = req.add_candidates();
    for (double v : dense) c->add_values(v);
    action_of->push_back(i);
  }
  return req;
}

double Reward(int round, int action) { return ((round % 3) + action) % 4 == 0 ? 1.0 : 0.0; }

int PlayNamedOn(DecisionService& svc, const std::string& name, int round) {
  v1::SelectRequest req = NamedRequest(name, round);
  v1::Decision d;
  EXPECT_TRUE(svc.Select(req, &d).ok());
  v1::UpdateRequest up;
  up.set_instance(name);
  up.set_event_id(d.event_id());
  up.set_reward(Reward(round, d.arm_index()));
  v1::UpdateResponse r;
  EXPECT_TRUE(svc.Update(up, &r).ok());
  return d.arm_index();
}

int PlayNamed(DecisionService& svc, int round) { return PlayNamedOn(svc, "x", round); }

TEST(NamedInputs, DecidesExactlyAsTheDenseTwinFedTheHashedVectors) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("named", kNamed), &out).ok());
  EXPECT_EQ(out.config().policy().linucb().dimension(), 256);  // filled from bits
  EXPECT_EQ(out.config().feature_space().version(), 1);
  ASSERT_TRUE(svc.CreateInstance(Create("dense", kDense), &out).ok());
  int differ_from_first = 0;
  for (int round = 0; round < 300; ++round) {
    v1::SelectRequest named = NamedRequest("named", round);
    named.set_return_scores(round % 2 == 0);
    std::vector<int> action_of;
    v1::SelectRequest dense = DenseRequest("dense", named, &action_of);
    v1::Decision dn, dd;
    ASSERT_TRUE(svc.Select(named, &dn).ok()) << round;
    ASSERT_TRUE(svc.Select(dense, &dd).ok()) << round;
    ASSERT_EQ(dn.arm_index(), action_of[dd.arm_index()]) << round;
    EXPECT_EQ(dn.action_id(), absl::StrCat("item-", dn.arm_index()));
    differ_from_first += dn.arm_index() != action_of[0];
    if (named.return_scores()) {
      ASSERT_EQ(dn.ranking_size(), 5);
      EXPECT_EQ(dn.ranking(0).id(), dn.action_id());
      EXPECT_EQ(dn.ranking(0).probability(), 1.0);  // LinUCB is deterministic
      if (named.excluded_actions_size() > 0) {
        EXPECT_EQ(dn.ranking(4).id(), named.excluded_actions(0));
        EXPECT_EQ(dn.ranking(4).probability(), 0.0);
      }
    }
    const double r = Reward(round, dn.arm_index());
    v1::UpdateRequest un, ud;
    un.set_instance("named");
    un.set_event_id(dn.event_id());
    un.set_reward(r);
    ud.set_instance("dense");
    ud.set_event_id(dd.event_id());
    ud.set_reward(r);
    v1::UpdateResponse resp;
    ASSERT_TRUE(svc.Update(un, &resp).ok());
    ASSERT_TRUE(svc.Update(ud, &resp).ok());
  }
  EXPECT_GT(differ_from_first, 30);  // the decisions depend on what was learned
}

TEST(NamedInputs, DirectUpdateLearnsTheSameAsDenseFeatures) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("named", kNamed), &out).ok());
  ASSERT_TRUE(svc.CreateInstance(Create("dense", kDense), &out).ok());
  for (int round = 0; round < 50; ++round) {
    v1::SelectRequest named = NamedRequest("named", round);
    std::vector<int> action_of;
    v1::SelectRequest dense = DenseRequest("dense", named, &action_of);
    v1::UpdateRequest un, ud;
    un.set_instance("named");
    un.mutable_direct()->set_context(named.context());
    *un.mutable_direct()->mutable_action() = named.actions(action_of[0]);
    un.set_reward(Reward(round, action_of[0]));
    ud.set_instance("dense");
    for (double v : dense.candidates(0).values()) ud.mutable_direct()->add_features(v);
    ud.set_reward(un.reward());
    v1::UpdateResponse resp;
    ASSERT_TRUE(svc.Update(un, &resp).ok()) << round;
    ASSERT_TRUE(svc.Update(ud, &resp).ok());
  }
  for (int round = 50; round < 60; ++round) {
    std::vector<int> action_of;
    v1::SelectRequest named = NamedRequest("named", round);
    v1::SelectRequest dense = DenseRequest("dense", named, &action_of);
    v1::Decision dn, dd;
    ASSERT_TRUE(svc.Select(named, &dn).ok());
    ASSERT_TRUE(svc.Select(dense, &dd).ok());
    EXPECT_EQ(dn.arm_index(), action_of[dd.arm_index()]);
  }
}

TEST(NamedInputs, BadInputNamesWhatWasExpectedAndChangesNothing) {
  ManualClock clock;
  DecisionService svc(&clock), twin(&clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("n", kNamed), &out).ok());
  ASSERT_TRUE(twin.CreateInstance(Create("n", kNamed), &out).ok());
  ASSERT_TRUE(svc.CreateInstance(Create("d", kDense), &out).ok());
  auto refused = [&](v1::SelectRequest req, const std::string& message) {
    v1::Decision d;
    absl::Status s = svc.Select(req, &d);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(std::string(s.message()), HasSubstr(message));
  };
  v1::SelectRequest good = NamedRequest("n", 0);
  {
    v1::SelectRequest r = good;
    r.set_context(R"({"User":{"age":1e39}})");
    refused(r, "context.User.age: expected a number within a float's range");
  }
  {
    v1::SelectRequest r = good;
    r.mutable_actions(2)->set_features(R"({"Action":{"color":)");
    refused(r, "actions[2].features: malformed JSON");
  }
  {
    v1::SelectRequest r = good;
    r.mutable_actions(3)->set_id("item-1");
    refused(r, "actions[3].id 'item-1' repeats actions[1].id");
  }
  {
    v1::SelectRequest r = good;
    r.add_excluded_actions("nope");
    refused(r, "excluded_actions[0] 'nope' is not the id of one of the actions");
  }
  {
    v1::SelectRequest r = good;
    for (const auto& a : good.actions()) r.add_excluded_actions(a.id());
    refused(r, "excludes every action");
  }
  {
    v1::SelectRequest r = good;
    r.mutable_actions(0)->set_id("");
    refused(r, "actions[0].id has 0 bytes");
  }
  {
    // 400 user features x 300 action features through -q UA: 120 000 terms, over the 100 000
    // a named action may make (--max_named_terms).
    v1::SelectRequest r = good;
    std::string user = R"({"User":{)", action = R"({"Action":{)";
    for (int i = 0; i < 400; ++i) absl::StrAppend(&user, i ? "," : "", "\"u", i, "\":1");
    for (int i = 0; i < 300; ++i) absl::StrAppend(&action, i ? "," : "", "\"a", i, "\":1");
    r.set_context(user + "}}");
    r.mutable_actions(1)->set_features(action + "}}");
    refused(r, "actions[1]: expected at most 100000 terms per action");
  }
  {
    v1::SelectRequest r = good;
    r.add_candidates()->add_values(1);
    refused(r, "candidates or x is set with named actions");
  }
  {
    std::vector<int> action_of;
    refused(DenseRequest("n", good, &action_of), "the instance has a feature_space");
  }
  {
    v1::SelectRequest r = good;
    r.set_instance("d");
    refused(r, "the instance has no feature_space");
  }
  // Nothing changed: the next decisions equal an untouched twin's.
  for (int round = 0; round < 20; ++round) {
    v1::SelectRequest a = NamedRequest("n", round);
    v1::Decision da, db;
    ASSERT_TRUE(svc.Select(a, &da).ok());
    ASSERT_TRUE(twin.Select(a, &db).ok());
    EXPECT_EQ(da.arm_index(), db.arm_index());
    EXPECT_EQ(da.event_id().substr(da.event_id().find('-')),
              db.event_id().substr(db.event_id().find('-')));
  }
}

TEST(NamedInputs, ConfigsAreCheckedAtCreate) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  auto create = [&](const std::string& config) {
    return svc.CreateInstance(Create(absl::StrCat("c", out.name().size(), config.size()), config),
                              &out);
  };
  EXPECT_THAT(
      std::string(create("policy { linucb { dimension: 8 } } feature_space { bits: 4 }").message()),
      HasSubstr("expected 2^feature_space.bits = 16"));
  EXPECT_THAT(std::string(create("policy { epsilon_greedy { epsilon: 0.1 } num_arms: 3 } "
                                 "feature_space { bits: 4 }")
                              .message()),
              HasSubstr("expected a contextual policy"));
  EXPECT_THAT(std::string(create("policy { linucb {} } feature_space { bits: 18 }").message()),
              HasSubstr("2^feature_space.bits = 262144: use fewer bits"));
  EXPECT_THAT(std::string(create("policy { linucb {} } feature_space { bits: 4 version: 2 }")
                              .message()),
              HasSubstr("written by a newer server"));
  EXPECT_THAT(std::string(create("policy { linucb {} } feature_space { bits: 4 "
                                 "interactions: 'ABCD' }")
                              .message()),
              HasSubstr("feature_space.interactions[0]"));
  EXPECT_TRUE(create("policy { glm_epsilon_greedy { epsilon: 0.2 } } feature_space { bits: 6 }")
                  .ok());
}

TEST(NamedInputs, RankingCarriesThePolicysProbabilities) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  // The GLB policies check ||x|| <= max_feature_norm (1 by default, the papers' assumption):
  // named features with values 1..60 need a larger bound.
  ASSERT_TRUE(svc.CreateInstance(Create("g", "policy { glm_epsilon_greedy { epsilon: 0.3 "
                                             "max_feature_norm: 100 } } feature_space { bits: 6 } "
                                             "seed: 9"),
                                 &out)
                  .ok());
  v1::SelectRequest req = NamedRequest("g", 3);  // one action excluded
  req.set_return_scores(true);
  v1::Decision d;
  absl::Status selected = svc.Select(req, &d);
  ASSERT_TRUE(selected.ok()) << selected;
  ASSERT_EQ(d.ranking_size(), 5);
  double sum = 0;
  for (const auto& r : d.ranking()) sum += r.probability();
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_EQ(d.ranking(0).id(), d.action_id());
  EXPECT_EQ(d.ranking(0).probability(), d.propensity());
  EXPECT_EQ(d.ranking(4).id(), req.excluded_actions(0));
  EXPECT_EQ(d.ranking(4).probability(), 0.0);
  // epsilon-greedy over 4 offered actions: the greedy one 0.7 + 0.3/4, the others 0.3/4.
  EXPECT_NEAR(d.ranking(0).probability(), 0.7 + 0.075, 1e-12);
  EXPECT_NEAR(d.ranking(1).probability(), 0.075, 1e-12);
}

// explain: the chosen action's hashed features with LinUCB's weights; their dot product is the
// mean LinUCB reports for the choice (theta . x), and the names are VW's audit names.
TEST(NamedInputs, ExplainListsTheChosenActionsFeaturesWithTheirWeights) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("e", kNamed), &out).ok());
  for (int round = 0; round < 100; ++round) ASSERT_GE(PlayNamedOn(svc, "e", round), 0);
  v1::SelectRequest req = NamedRequest("e", 0);
  req.set_explain(true);
  v1::Decision d;
  ASSERT_TRUE(svc.Select(req, &d).ok());
  ASSERT_GT(d.explanation_size(), 0);
  double dot = 0;
  bool constant = false, interaction = false;
  for (const auto& f : d.explanation()) {
    EXPECT_LT(f.index(), 256u);
    dot += f.value() * f.weight();
    constant |= f.name() == "Constant";
    interaction |= f.name() == absl::StrCat("User^countryUS*Action^color", kColors[d.arm_index() % 4]);
  }
  EXPECT_TRUE(constant);
  EXPECT_TRUE(interaction);
  EXPECT_NEAR(dot, d.diagnostics().at("mean"), 1e-9);
  // Without explain, no explanation; explain on a dense instance is refused.
  req.set_explain(false);
  v1::Decision plain;
  ASSERT_TRUE(svc.Select(req, &plain).ok());
  EXPECT_EQ(plain.explanation_size(), 0);
  ASSERT_TRUE(svc.CreateInstance(Create("dense", kDense), &out).ok());
  std::vector<int> action_of;
  v1::SelectRequest dense = DenseRequest("dense", NamedRequest("dense", 0), &action_of);
  dense.set_explain(true);
  EXPECT_EQ(svc.Select(dense, &plain).code(), StatusCode::kInvalidArgument);
}

// The decision log keeps the context and actions as sent; its DSJSON export writes them as
// Vowpal Wabbit reads them ("c" holds the context's namespaces and "_multi" each action's,
// with its id as "_tag"), and bandit-ope hashes them again: a candidate equal to the served
// policy replays its every decision, so IPS equals the logged mean reward exactly.
TEST(NamedInputs, LogExportsVwsFormAndOpeReplaysTheServedPolicyExactly) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(
      svc.CreateInstance(Create("x", absl::StrCat(kNamed, " decision_log { enabled: true }")), &out)
          .ok());
  double reward_sum = 0;
  for (int round = 0; round < 150; ++round) {
    v1::SelectRequest req = NamedRequest("x", round);
    v1::Decision d;
    ASSERT_TRUE(svc.Select(req, &d).ok());
    v1::UpdateRequest up;
    up.set_instance("x");
    up.set_event_id(d.event_id());
    up.set_reward(Reward(round, d.arm_index()));
    reward_sum += up.reward();
    v1::UpdateResponse r;
    ASSERT_TRUE(svc.Update(up, &r).ok());
  }
  v1::ExportDecisionLogRequest req;
  req.set_name("x");
  DecisionService::DecisionLogCursor cursor;
  std::vector<std::string> lines;
  for (bool done = false; !done;) {
    v1::DecisionLogChunk chunk;
    ASSERT_TRUE(svc.ReadDecisionLog(req, &cursor, &chunk, &done).ok());
    for (const auto& d : chunk.decisions()) {
      EXPECT_TRUE(d.candidates().empty());  // the hashed vectors are not held
      EXPECT_EQ(d.candidate_dim(), 256);
      lines.push_back(client::FormatDecision(client::LogFormat::kDsjson, d, "x"));
    }
  }
  ASSERT_EQ(lines.size(), 150u);
  // Round 3 excluded one of five actions: four offered, the chosen one named by its id.
  auto line3 = nlohmann::json::parse(lines[3]);
  ASSERT_EQ(line3["c"]["_multi"].size(), 4u);
  EXPECT_EQ(line3["c"]["User"]["country"], "US");
  EXPECT_EQ(line3["c"]["_multi"][0]["Action"]["color"], "red");
  EXPECT_TRUE(line3["c"]["_multi"][0].contains("_tag"));

  ope::Candidate same{.name = "same", .config = {}};
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(kNamed, &same.config));
  auto evaluator = ope::Evaluator::Create({same}, ope::EvaluateOptions());
  ASSERT_TRUE(evaluator.ok()) << evaluator.status();
  for (size_t i = 0; i < lines.size(); ++i) {
    auto d = client::ParseDsjson(lines[i]);
    ASSERT_TRUE(d.ok()) << d.status();
    ASSERT_TRUE((*evaluator)->Add(*d, absl::StrCat("line ", i)).ok());
  }
  const auto& est = (*evaluator)->results()[0].estimators;
  EXPECT_EQ(est.events(), 150);
  EXPECT_DOUBLE_EQ(est.Ips().value, reward_sum / 150);
  EXPECT_DOUBLE_EQ(est.Logged().value, reward_sum / 150);

  // Without the feature space the tool cannot hash a named log, and says so.
  ope::Candidate bare{.name = "bare", .config = {}};
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(kDense, &bare.config));
  auto plain = ope::Evaluator::Create({bare}, ope::EvaluateOptions());
  ASSERT_TRUE(plain.ok());
  auto d0 = client::ParseDsjson(lines[0]);
  ASSERT_TRUE(d0.ok());
  EXPECT_THAT(std::string((*plain)->Add(*d0, "line 0").message()),
              HasSubstr("expected candidate configs with the instance's feature_space"));
}

// A key given twice in one object is hashed twice (as VW hashes it); the DSJSON export carries
// both occurrences, reading the line back gives the same texts (so bandit-ope hashes what the
// policy learned from), and VW itself, reading the exported line, sees every occurrence.
TEST(NamedInputs, RepeatedKeysAreExportedAsHashed) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(
      svc.CreateInstance(Create("x", absl::StrCat(kNamed, " decision_log { enabled: true }")), &out)
          .ok());
  v1::SelectRequest req;
  req.set_instance("x");
  const std::string context = R"({"User":{"a":1,"a":2},"User":{"b":"x"}, "device" : "m"})";
  req.set_context(context);
  for (int i = 0; i < 2; ++i) {
    auto* a = req.add_actions();
    a->set_id(absl::StrCat("act", i));
    a->set_features(absl::StrCat(R"({"Action":{"k":1,"k":)", 3 + i, "}}"));
  }
  v1::Decision d;
  ASSERT_TRUE(svc.Select(req, &d).ok());
  v1::UpdateRequest up;
  up.set_instance("x");
  up.set_event_id(d.event_id());
  up.set_reward(1);
  v1::UpdateResponse r;
  ASSERT_TRUE(svc.Update(up, &r).ok());
  const std::vector<v1::LoggedDecision> logged = testing::LoggedDecisions(svc, "x");
  ASSERT_EQ(logged.size(), 1u);
  const std::string line = client::FormatDecision(client::LogFormat::kDsjson, logged[0], "x");
  EXPECT_NE(line.find(R"("User":{"a":1,"a":2},"User":{"b":"x"},"device":"m")"), std::string::npos)
      << line;
  EXPECT_NE(line.find(R"("Action":{"k":1,"k":3})"), std::string::npos) << line;

  // Read back: the same texts, so the same hashed vectors.
  auto back = client::ParseDsjson(line);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->named_context(), R"({"User":{"a":1,"a":2},"User":{"b":"x"},"device":"m"})");
  ASSERT_EQ(back->named_actions_size(), 2);
  auto space = *features::FeatureSpace::Create(features::OptionsOf(out.config().feature_space()));
  features::InputLimits limits;
  auto vector_of = [&](const std::string& c, const std::string& a) {
    features::ParsedFeatures shared, action;
    EXPECT_TRUE(space.Parse(c, "c", limits, false, &shared).ok());
    EXPECT_TRUE(space.Parse(a, "a", limits, false, &action).ok());
    features::SparseFeatures f;
    space.Featurize(action, &shared, false, &f);
    return f.index;
  };
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(vector_of(back->named_context(), back->named_actions(i).features()),
              vector_of(context, req.actions(i).features()));

  // VW reads every occurrence from the exported line (where the prebuilt VW 9.11.2 is present).
  const char* source = std::getenv("BANDIT_SOURCE_DIR");
  const std::string vw = std::getenv("VW") ? std::getenv("VW")
                                           : std::string(source ? source : ".") +
                                                 "/../shared/tools/vw/vw";
  if (!std::filesystem::exists(vw)) GTEST_SKIP() << "VW 9.11.2 not found at " << vw << ": skipped";
  const std::string dir = ::testing::TempDir();
  std::ofstream(dir + "/repeated.json") << line << "\n";
  const std::string command = absl::StrCat(vw, " --cb_explore_adf --dsjson --audit --quiet -d ",
                                           dir, "/repeated.json > ", dir, "/audit.txt 2>&1");
  ASSERT_EQ(std::system(command.c_str()), 0);
  std::ifstream in(dir + "/audit.txt");
  const std::string audit((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = audit.find(what); at != std::string::npos; at = audit.find(what, at + 1)) ++n;
    return n;
  };
  // Every action's line (one constant each) lists User^a twice (values 1 and 2) and its own
  // Action^k twice.
  const size_t lines = count("\tConstant:");
  EXPECT_GE(lines, 2u) << audit;
  EXPECT_EQ(count("\tUser^a:"), 2 * lines) << audit;
  EXPECT_EQ(count("\tAction^k:"), 2 * lines) << audit;
  EXPECT_EQ(count(":2:0@0"), lines) << audit;  // User^a's second value, on every line
}

// A shadow of a named instance evaluates on the same hashed vectors; its dimension comes from
// the feature space like the served policy's. A shadow equal to the served policy agrees with
// it on every decision, so its IPS estimate is the served value exactly.
TEST(NamedInputs, ShadowsScoreTheSameHashedVectors) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("s", kNamed), &out).ok());
  v1::AddShadowRequest add;
  add.set_name("s");
  add.set_shadow("twin");
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "policy { linucb { alpha: 0.5 } } seed: 5", add.mutable_config()));
  ASSERT_TRUE(svc.AddShadow(add, &out).ok());
  ASSERT_EQ(out.shadows_size(), 1);
  EXPECT_EQ(out.shadows(0).config().policy().linucb().dimension(), 256);
  for (int round = 0; round < 120; ++round) ASSERT_GE(PlayNamedOn(svc, "s", round), 0);
  v1::GetInstanceRequest get;
  get.set_name("s");
  ASSERT_TRUE(svc.GetInstance(get, &out).ok());
  ASSERT_EQ(out.shadows_size(), 1);
  EXPECT_EQ(out.shadows(0).events(), 120);
  EXPECT_DOUBLE_EQ(out.shadows(0).ips().value(), out.shadows(0).served().value());
}

// The C++ client's builder sends what the JSON text would: the same decision as a request
// written by hand, keys in the order given (nlohmann::ordered_json).
TEST(NamedInputs, CppBuilderBuildsTheSameRequest) {
  ManualClock clock;
  DecisionService a(&clock), b(&clock);
  v1::Instance out;
  ASSERT_TRUE(a.CreateInstance(Create("n", kNamed), &out).ok());
  ASSERT_TRUE(b.CreateInstance(Create("n", kNamed), &out).ok());
  for (int round = 0; round < 40; ++round) {
    v1::SelectRequest by_hand = NamedRequest("n", round);
    client::NamedSelect builder("n");
    const int age = 20 + (round * 7) % 40;
    builder.Context({{"User", {{"country", kCountries[round % 3]}, {"age", age}}},
                     {"device", "mobile"}});
    for (int k = 0; k < 5; ++k)
      builder.Action(absl::StrCat("item-", k),
                     {{"Action", {{"color", kColors[k % 4]}, {"price", 1 + k}}}});
    if (round % 4 == 3) builder.Exclude(absl::StrCat("item-", round % 5));
    const v1::SelectRequest built = builder.Build();
    EXPECT_EQ(built.context(), by_hand.context());
    v1::Decision da, db;
    ASSERT_TRUE(a.Select(by_hand, &da).ok());
    ASSERT_TRUE(b.Select(built, &db).ok());
    ASSERT_EQ(da.action_id(), db.action_id());
    v1::UpdateRequest ua, ub;
    ua.set_instance("n");
    ua.set_event_id(da.event_id());
    ua.set_reward(Reward(round, da.arm_index()));
    ub.set_instance("n");
    ub.set_event_id(db.event_id());
    ub.set_reward(ua.reward());
    v1::UpdateResponse r;
    ASSERT_TRUE(a.Update(ua, &r).ok());
    ASSERT_TRUE(b.Update(ub, &r).ok());
  }
  v1::SelectRequest req;
  EXPECT_THAT(std::string(client::AddActionsFromJson(R"([{"id":1}])", &req).message()),
              HasSubstr("actions[0]: expected an object with a string \"id\""));
  EXPECT_FALSE(client::AddActionsFromJson("{", &req).ok());
  ASSERT_TRUE(client::AddActionsFromJson(R"([{"id":"a","features":{"A":{"x":1}}}])", &req).ok());
  EXPECT_EQ(req.actions(0).features(), R"({"A":{"x":1}})");
  const v1::UpdateRequest direct = client::NamedDirectUpdate(
      "n", {{"User", {{"country", "US"}}}}, "item-1", {{"Action", {{"color", "green"}}}}, 1.0);
  EXPECT_EQ(direct.direct().context(), R"({"User":{"country":"US"}})");
  EXPECT_EQ(direct.direct().action().id(), "item-1");
  v1::UpdateResponse r;
  ASSERT_TRUE(b.Update(direct, &r).ok());
}

using Node = testing::FileNode;


TEST(NamedInputs, NamedSelectsReplayExactlyAfterACrash) {
  testing::ReplaysAsATwinAfterACrash<int>(
      absl::StrCat(kNamed, " decision_log { enabled: true }"), 200,
      [](DecisionService& svc, ManualClock&, int round, int*) { return PlayNamed(svc, round); },
      [](DecisionService&, DecisionService&) {});
}


// ---- Diagonal-covariance policies at VW's default 2^18 ----

constexpr char kDiagonal18[] =
    "policy { linucb { alpha: 0.5 covariance: COVARIANCE_DIAGONAL } } "
    "feature_space { bits: 18 interactions: 'UA' } seed: 5";

// The sparse vectors the service should hand the policy: each action not excluded, hashed.
std::vector<SparseVector> SparseCandidates(const v1::SelectRequest& named, int bits,
                                           std::vector<int>* action_of) {
  features::FeatureSpaceOptions o;
  o.bits = bits;
  o.interactions = {"UA"};
  auto space = *features::FeatureSpace::Create(o);
  features::InputLimits limits;
  features::ParsedFeatures shared;
  EXPECT_TRUE(space.Parse(named.context(), "context", limits, false, &shared).ok());
  std::vector<SparseVector> out;
  action_of->clear();
  for (int i = 0; i < named.actions_size(); ++i) {
    bool excluded = false;
    for (const auto& e : named.excluded_actions()) excluded |= e == named.actions(i).id();
    if (excluded) continue;
    features::ParsedFeatures action;
    EXPECT_TRUE(space.Parse(named.actions(i).features(), "a", limits, false, &action).ok());
    features::SparseFeatures f;
    space.Featurize(action, &shared, false, &f);
    out.push_back(SparseVector{f.index, f.value});
    action_of->push_back(i);
  }
  return out;
}

ServiceLimits BanditdLimits() {
  ServiceLimits l;
  l.instance.max_feature_dim = 4096;  // banditd's defaults
  l.instance.max_vector_size = 4096;
  l.instance.max_diagonal_feature_dim = int64_t{1} << 22;
  return l;
}

// At bits 18 (banditd's limits) a policy that takes sparse vectors serves named Selects and
// Updates, deciding exactly as the core policy fed the same hashed sparse vectors: 200 rounds,
// with shorter requests between longer ones and refused ones part-way, and (when
// `direct_updates`) every fifth update a direct one. With a `twin_shadow` config, a shadow of the
// served policy agrees on every decision (its IPS is the served value). GetInstance reports the
// core policy's weights and state bytes; `out` is that instance.
void DecidesAsTheCorePolicyOnTheSparseVectors(const std::string& config, bool direct_updates,
                                              const std::string& twin_shadow, v1::Instance* out) {
  ManualClock clock;
  DecisionService svc(&clock, BanditdLimits());
  ASSERT_TRUE(svc.CreateInstance(Create("d", config), out).ok());
  if (!twin_shadow.empty()) {
    v1::AddShadowRequest add;
    add.set_name("d");
    add.set_shadow("twin");
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(twin_shadow, add.mutable_config()));
    ASSERT_TRUE(svc.AddShadow(add, out).ok());
  }
  auto core = CreatePolicy(out->config().policy(), 1);
  ASSERT_TRUE(core.ok()) << core.status();
  ASSERT_TRUE((*core)->TakesSparse());
  EXPECT_EQ((*core)->Weights().size(), 1 << 18);  // the dimension filled from the bits
  int differ_from_first = 0;
  const int kRounds = 200;
  for (int round = 0; round < kRounds; ++round) {
    v1::SelectRequest named = NamedRequest("d", round);
    // The server refills one per-thread set of sparse vectors in place: requests of fewer
    // actions between longer ones, and refused requests part-way through the actions, must
    // leave nothing of an earlier request behind.
    if (round % 6 == 5) {
      named.mutable_actions()->DeleteSubrange(2, named.actions_size() - 2);
      named.clear_excluded_actions();
    }
    if (round % 9 == 0) {
      v1::SelectRequest refused = named;
      refused.mutable_actions(refused.actions_size() - 1)->set_features("{\"Action\":");
      v1::Decision no;
      ASSERT_EQ(svc.Select(refused, &no).code(), StatusCode::kInvalidArgument) << round;
    }
    std::vector<int> action_of;
    std::vector<SparseVector> xs = SparseCandidates(named, 18, &action_of);
    SelectContext ctx;
    ctx.sparse_candidates = xs;
    auto expected = (*core)->Select(ctx);
    ASSERT_TRUE(expected.ok());
    v1::Decision d;
    ASSERT_TRUE(svc.Select(named, &d).ok()) << round;
    ASSERT_EQ(d.arm_index(), action_of[expected->arm]) << round;
    differ_from_first += d.arm_index() != action_of[0];
    const double r = Reward(round, d.arm_index());
    Observation obs;
    obs.sparse_features = xs[expected->arm];
    obs.reward = r;
    ASSERT_TRUE((*core)->Update(obs).ok());
    v1::UpdateRequest up;
    up.set_instance("d");
    if (direct_updates && round % 5 == 4) {
      // Logged data: the same context and action as a direct update.
      auto* direct = up.mutable_direct();
      direct->set_context(named.context());
      *direct->mutable_action() = named.actions(d.arm_index());
    } else {
      up.set_event_id(d.event_id());
    }
    up.set_reward(r);
    v1::UpdateResponse resp;
    ASSERT_TRUE(svc.Update(up, &resp).ok()) << round;
  }
  EXPECT_GT(differ_from_first, 20);
  v1::GetInstanceRequest get;
  get.set_name("d");
  ASSERT_TRUE(svc.GetInstance(get, out).ok());
  EXPECT_EQ(out->stats().state_bytes(), (*core)->StateBytes());
  const Vector w = (*core)->Weights();
  ASSERT_EQ(out->weights_size(), w.size());
  for (int j = 0; j < w.size(); ++j) ASSERT_EQ(out->weights(j), w[j]) << j;
  if (!twin_shadow.empty()) {
    ASSERT_EQ(out->shadows_size(), 1);
    EXPECT_EQ(out->shadows(0).events(), kRounds);
    EXPECT_DOUBLE_EQ(out->shadows(0).ips().value(), out->shadows(0).served().value());
  }
}

TEST(NamedInputs, DiagonalPolicyAtBits18DecidesAsTheCorePolicyOnTheSparseVectors) {
  v1::Instance out;
  DecidesAsTheCorePolicyOnTheSparseVectors(kDiagonal18, /*direct_updates=*/true, "", &out);
  // O(2^bits) state: diag(A) and b, theta and 1/a beside them for scoring (single precision),
  // and the coalescing bitmap (1 bit per coordinate).
  EXPECT_EQ(out.stats().state_bytes(), (int64_t{1} << 18) * (16 + 8) + (int64_t{1} << 18) / 8 + 8);
}

// GLB-OMD's sketched covariance at bits 18, direct updates included.
TEST(NamedInputs, SketchedGlbOmdAtBits18DecidesAsTheCorePolicyOnTheSparseVectors) {
  v1::Instance out;
  DecidesAsTheCorePolicyOnTheSparseVectors(
      "policy { glb_omd { covariance: COVARIANCE_SKETCHED sketch_size: 4 max_feature_norm: 1000 "
      "lambda: 1 radius_multiplier: 0.05 } } feature_space { bits: 18 interactions: 'UA' } "
      "seed: 5",
      /*direct_updates=*/true, "", &out);
}

// LinUCB's sketched covariance at bits 18, and a twin shadow of it.
TEST(NamedInputs, SketchedPolicyAtBits18DecidesAsTheCorePolicyOnTheSparseVectors) {
  const std::string policy =
      "policy { linucb { alpha: 0.5 covariance: COVARIANCE_SKETCHED sketch_size: 4 } }";
  v1::Instance out;
  DecidesAsTheCorePolicyOnTheSparseVectors(
      absl::StrCat(policy, " feature_space { bits: 18 interactions: 'UA' } seed: 5"),
      /*direct_updates=*/false, absl::StrCat(policy, " seed: 5"), &out);
}

// A sketched instance (LinUCB's, GLB-OMD's; many shrinks in 200 rounds) recovers from its
// snapshot and journal to the decisions and weights of a twin that never stopped.
TEST(NamedInputs, SketchedSelectsReplayExactlyAfterACrash) {
  for (const char* policy :
       {"linucb { alpha: 0.5 covariance: COVARIANCE_SKETCHED sketch_size: 3 }",
        "glb_omd { covariance: COVARIANCE_SKETCHED sketch_size: 3 max_feature_norm: 1000 "
        "lambda: 1 radius_multiplier: 0.05 }"}) {
    SCOPED_TRACE(policy);
    testing::ReplaysAsATwinAfterACrash<int>(
        absl::StrCat("policy { ", policy, " } feature_space { bits: 10 interactions: 'UA' } "
                     "seed: 5"),
        200,
        [](DecisionService& svc, ManualClock&, int round, int*) { return PlayNamed(svc, round); },
        [](DecisionService& a, DecisionService& b) {
          v1::GetInstanceRequest get;
          get.set_name("x");
          v1::Instance ia, ib;
          ASSERT_TRUE(a.GetInstance(get, &ia).ok());
          ASSERT_TRUE(b.GetInstance(get, &ib).ok());
          ASSERT_EQ(ia.weights_size(), ib.weights_size());
          for (int j = 0; j < ia.weights_size(); ++j)
            ASSERT_EQ(ia.weights(j), ib.weights(j)) << j;
        });
  }
}

// A multi-slot named Select on a diagonal (or sketched) instance at bits 18: each slot is filled by the
// policy over sparse vectors (never densified), the slot's features and index added as VW's
// CCB does; its choice equals the core policy's on the vectors this test builds itself
// (FeatureSpace::ForSlots and AddSlotFeatures), slot after slot among the actions still free,
// learning each slot's reward as the server does. An exported instance with a sparse slot
// choice pending imports into a twin that decides and learns the same.
void FillsNamedSlotsAsTheCorePolicyOnTheSparseVectors(const std::string& config) {
  ManualClock clock;
  DecisionService svc(&clock, BanditdLimits());
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("d", config), &out).ok());
  auto core = CreatePolicy(out.config().policy(), 1);
  ASSERT_TRUE(core.ok()) << core.status();
  features::FeatureSpaceOptions o;
  o.bits = 18;
  o.interactions = {"UA"};
  auto space = *features::FeatureSpace::Create(o);
  auto slot_space = space.ForSlots();
  ASSERT_TRUE(slot_space.ok()) << slot_space.status();
  features::InputLimits limits;
  features::ParsedFeatures hero_features;
  ASSERT_TRUE(space.Parse(R"({"Slot":{"size":"large"}})", "slot", limits, false, &hero_features)
                  .ok());
  auto slotted = [](const std::string& instance, int round) {
    v1::SelectRequest req = NamedRequest(instance, round);
    req.clear_excluded_actions();
    auto* hero = req.add_slots();
    hero->set_id("hero");
    hero->set_features(R"({"Slot":{"size":"large"}})");
    req.add_slots()->set_id("tile");
    return req;
  };
  int tile_not_first = 0;
  std::string pending_event;
  for (int round = 0; round < 120; ++round) {
    const v1::SelectRequest req = slotted("d", round);
    v1::Decision d;
    { const absl::Status st = svc.Select(req, &d); ASSERT_TRUE(st.ok()) << st; }
    ASSERT_EQ(d.slots_size(), 2);
    features::ParsedFeatures shared;
    ASSERT_TRUE(space.Parse(req.context(), "context", limits, false, &shared).ok());
    std::vector<bool> taken(req.actions_size(), false);
    std::vector<SparseVector> chosen(2);
    for (int k = 0; k < 2; ++k) {
      features::ParsedFeatures context = shared;
      slot_space->AddSlotFeatures(k == 0 ? hero_features : features::ParsedFeatures(), k, false,
                                  &context);
      std::vector<SparseVector> xs;
      std::vector<int> position;
      for (int i = 0; i < req.actions_size(); ++i) {
        if (taken[i]) continue;
        features::ParsedFeatures action;
        ASSERT_TRUE(space.Parse(req.actions(i).features(), "a", limits, false, &action).ok());
        features::SparseFeatures f;
        slot_space->Featurize(action, &context, false, &f);
        xs.push_back(SparseVector{f.index, f.value});
        position.push_back(i);
      }
      SelectContext ctx;
      ctx.sparse_candidates = xs;
      auto expected = (*core)->Select(ctx);
      ASSERT_TRUE(expected.ok());
      ASSERT_EQ(d.slots(k).arm_index(), position[expected->arm]) << round << " slot " << k;
      EXPECT_EQ(d.slots(k).propensity(), expected->propensity);
      taken[position[expected->arm]] = true;
      chosen[k] = xs[expected->arm];
      if (k == 1) tile_not_first += position[expected->arm] != position[0];
    }
    for (int k = 0; k < 2; ++k) {
      if (round == 119 && k == 1) {  // left pending for the export below
        pending_event = d.event_id();
        continue;
      }
      const double r = Reward(round, d.slots(k).arm_index()) * (k == 0 ? 1.0 : 0.5);
      ASSERT_TRUE(testing::SlotReward(svc, "d", d.event_id(), d.slots(k).slot_id(), r).ok());
      Observation obs;
      obs.sparse_features = chosen[k];
      obs.reward = r;
      ASSERT_TRUE((*core)->Update(obs).ok());
    }
  }
  EXPECT_GT(tile_not_first, 10);  // the tile's choice is learned, not the first free action
  // Export with the tile's sparse choice pending; the imported twin finishes it and goes on
  // exactly as the original.
  v1::ImportInstanceRequest imp;
  imp.set_name("twin");
  imp.set_snapshot(testing::Exported(svc, "d"));
  ASSERT_TRUE(svc.ImportInstance(imp, &out).ok());
  for (const char* name : {"d", "twin"})
    ASSERT_TRUE(testing::SlotReward(svc, name, pending_event, "tile", 1.0).ok()) << name;
  for (int round = 120; round < 140; ++round) {
    v1::Decision a, b;
    ASSERT_TRUE(svc.Select(slotted("d", round), &a).ok());
    ASSERT_TRUE(svc.Select(slotted("twin", round), &b).ok());
    for (int k = 0; k < 2; ++k) {
      ASSERT_EQ(a.slots(k).arm_index(), b.slots(k).arm_index()) << round;
      const double r = Reward(round, a.slots(k).arm_index());
      ASSERT_TRUE(testing::SlotReward(svc, "d", a.event_id(), a.slots(k).slot_id(), r).ok());
      ASSERT_TRUE(testing::SlotReward(svc, "twin", b.event_id(), b.slots(k).slot_id(), r).ok());
    }
  }
}

TEST(NamedInputs, DiagonalPolicyFillsNamedSlotsAsTheCorePolicyOnTheSparseVectors) {
  FillsNamedSlotsAsTheCorePolicyOnTheSparseVectors(kDiagonal18);
}

TEST(NamedInputs, SketchedPolicyFillsNamedSlotsAsTheCorePolicyOnTheSparseVectors) {
  FillsNamedSlotsAsTheCorePolicyOnTheSparseVectors(
      "policy { linucb { alpha: 0.5 covariance: COVARIANCE_SKETCHED sketch_size: 5 } } "
      "feature_space { bits: 18 interactions: 'UA' } seed: 5");
}

// The instance's decision log as bandit-ope reads it: exported, written as DSJSON, parsed back.
std::vector<v1::LoggedDecision> ExportedDsjsonLog(DecisionService& svc, const std::string& name) {
  v1::ExportDecisionLogRequest req;
  req.set_name(name);
  DecisionService::DecisionLogCursor cursor;
  std::vector<v1::LoggedDecision> log;
  for (bool done = false; !done;) {
    v1::DecisionLogChunk chunk;
    EXPECT_TRUE(svc.ReadDecisionLog(req, &cursor, &chunk, &done).ok());
    for (const auto& d : chunk.decisions()) {
      auto parsed =
          client::ParseDsjson(client::FormatDecision(client::LogFormat::kDsjson, d, name));
      EXPECT_TRUE(parsed.ok()) << parsed.status();
      if (parsed.ok()) log.push_back(*parsed);
    }
  }
  return log;
}

// bandit-ope beyond the dense bound: a log of a diagonal instance at bits 18 is replayed on
// sparse vectors. A candidate equal to the served policy replays its every decision (IPS is the
// logged mean exactly); a full-matrix candidate is refused by name. At bits 8 the sparse path
// (forced) gives the dense path's IPS and SNIPS exactly: the policy decides alike on both forms.
TEST(NamedInputs, OpeReplaysADiagonalLogBeyondTheDenseBoundOnSparseVectors) {
  auto play = [](const std::string& config, double* reward_sum) {
    ManualClock clock;
    DecisionService svc(&clock, BanditdLimits());
    v1::Instance out;
    EXPECT_TRUE(svc.CreateInstance(Create("x", config + " decision_log { enabled: true }"), &out)
                    .ok());
    for (int round = 0; round < 120; ++round) {
      v1::SelectRequest req = NamedRequest("x", round);
      v1::Decision d;
      EXPECT_TRUE(svc.Select(req, &d).ok());
      v1::UpdateRequest up;
      up.set_instance("x");
      up.set_event_id(d.event_id());
      up.set_reward(Reward(round, d.arm_index()));
      *reward_sum += up.reward();
      v1::UpdateResponse r;
      EXPECT_TRUE(svc.Update(up, &r).ok());
    }
    return ExportedDsjsonLog(svc, "x");
  };
  auto evaluate = [](const std::string& config, const std::vector<v1::LoggedDecision>& log,
                     ope::EvaluateOptions options) -> absl::StatusOr<ope::Estimators> {
    ope::Candidate c{.name = "c", .config = {}};
    if (!google::protobuf::TextFormat::ParseFromString(config, &c.config))
      return absl::InternalError("config");
    auto evaluator = ope::Evaluator::Create({c}, options);
    if (!evaluator.ok()) return evaluator.status();
    for (size_t i = 0; i < log.size(); ++i)
      if (auto s = (*evaluator)->Add(log[i], absl::StrCat("line ", i)); !s.ok()) return s;
    return (*evaluator)->results()[0].estimators;
  };

  double reward_sum = 0;
  const auto log18 = play(kDiagonal18, &reward_sum);
  ASSERT_EQ(log18.size(), 120u);
  auto same = evaluate(kDiagonal18, log18, ope::EvaluateOptions());
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->events(), 120);
  EXPECT_DOUBLE_EQ(same->Ips().value, reward_sum / 120);
  EXPECT_TRUE(std::isfinite(same->DoublyRobust().value));
  auto full = evaluate("policy { linucb { alpha: 0.5 } } feature_space { bits: 18 "
                       "interactions: 'UA' } seed: 5",
                       log18, ope::EvaluateOptions());
  EXPECT_EQ(full.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(full.status().message()), HasSubstr("COVARIANCE_DIAGONAL"));

  const std::string diagonal8 =
      "policy { linucb { alpha: 0.5 covariance: COVARIANCE_DIAGONAL } } "
      "feature_space { bits: 8 interactions: 'UA' } seed: 5";
  double sum8 = 0;
  const auto log8 = play(kNamed, &sum8);
  auto dense = evaluate(diagonal8, log8, ope::EvaluateOptions());
  ope::EvaluateOptions sparse_options;
  sparse_options.max_dense_dimension = 1;
  auto sparse = evaluate(diagonal8, log8, sparse_options);
  ASSERT_TRUE(dense.ok()) << dense.status();
  ASSERT_TRUE(sparse.ok()) << sparse.status();
  EXPECT_EQ(sparse->Ips().value, dense->Ips().value);
  EXPECT_EQ(sparse->Snips().value, dense->Snips().value);
  EXPECT_NE(sparse->Ips().value, sum8 / 120);  // another policy than the logging one
}

// What stays refused: a full-matrix policy at bits 18 (the message names the bits and the way
// out), a diagonal one beyond --max_diagonal_feature_dim, a shadow at bits 18.
TEST(NamedInputs, BoundsOnFullMatrixAndDiagonalPolicies) {
  ManualClock clock;
  DecisionService svc(&clock, BanditdLimits());
  v1::Instance out;
  auto full = svc.CreateInstance(
      Create("full", "policy { linucb {} } feature_space { bits: 18 }"), &out);
  EXPECT_EQ(full.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(full.message()), HasSubstr("config.feature_space.bits is 18"));
  EXPECT_THAT(std::string(full.message()), HasSubstr("--max_feature_dim=4096"));
  EXPECT_THAT(std::string(full.message()), HasSubstr("use bits <= 12"));
  EXPECT_THAT(std::string(full.message()), HasSubstr("COVARIANCE_DIAGONAL"));
  auto glb = svc.CreateInstance(
      Create("glb", "policy { glb_omd {} } feature_space { bits: 13 }"), &out);
  EXPECT_THAT(std::string(glb.message()), HasSubstr("config.feature_space.bits is 13"));
  auto big = svc.CreateInstance(
      Create("big",
             "policy { glb_omd { covariance: COVARIANCE_DIAGONAL } } feature_space { bits: 23 }"),
      &out);
  EXPECT_EQ(big.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(big.message()), HasSubstr("--max_diagonal_feature_dim=4194304"));
  // Dense API: the diagonal bound applies to the dimension too.
  auto dense = svc.CreateInstance(
      Create("dense", "policy { linucb { dimension: 8388608 covariance: COVARIANCE_DIAGONAL } }"),
      &out);
  EXPECT_THAT(std::string(dense.message()), HasSubstr("(--max_diagonal_feature_dim)"));
  // A shadow at bits 18 scores the sparse vectors: a full-matrix one is refused.
  ASSERT_TRUE(svc.CreateInstance(Create("d", kDiagonal18), &out).ok());
  v1::AddShadowRequest add;
  add.set_name("d");
  add.set_shadow("s");
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "policy { linucb { } } seed: 5", add.mutable_config()));
  auto shadow = svc.AddShadow(add, &out);
  EXPECT_EQ(shadow.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(shadow.message()), HasSubstr("config.feature_space.bits is 18"));
  EXPECT_THAT(std::string(shadow.message()), HasSubstr("COVARIANCE_DIAGONAL"));
  EXPECT_EQ(out.shadows_size(), 0);
}

// Shadows beyond the dense bound (diagonal and sketched forms) score and learn the sparse
// vectors, with a diagonal ridge as the doubly robust estimate's direct model: exactly what
// bandit-ope computes from the exported log (the same choice at the same bound), so each shadow's
// every estimate equals bandit-ope's for the same config. The served policy's twin agrees on
// every decision (IPS = served value). An export keeps the shadows exactly: the imported instance
// goes on to the same estimates.
TEST(NamedInputs, ShadowsBeyondTheDenseBoundEstimateAsBanditOpeDoes) {
  ManualClock clock;
  DecisionService svc(&clock, BanditdLimits());
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(
                     Create("d", absl::StrCat(kDiagonal18, " decision_log { enabled: true }")),
                     &out)
                  .ok());
  const std::vector<std::pair<std::string, std::string>> shadows = {
      {"twin", "policy { linucb { alpha: 0.5 covariance: COVARIANCE_DIAGONAL } } seed: 5"},
      {"eager", "policy { linucb { alpha: 0.05 covariance: COVARIANCE_DIAGONAL } } seed: 7"},
      {"glb", "policy { glb_omd { covariance: COVARIANCE_DIAGONAL max_feature_norm: 1000 } } seed: 9 ridge_lambda: 2"},
      {"sketch",
       "policy { linucb { alpha: 0.5 covariance: COVARIANCE_SKETCHED sketch_size: 6 } } seed: 5"}};
  for (const auto& [name, config] : shadows) {
    v1::AddShadowRequest add;
    add.set_name("d");
    add.set_shadow(name);
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(config, add.mutable_config()));
    auto added = svc.AddShadow(add, &out);
    ASSERT_TRUE(added.ok()) << name << ": " << added;
  }
  const int kRounds = 150;
  for (int round = 0; round < kRounds; ++round) ASSERT_GE(PlayNamedOn(svc, "d", round), 0);
  v1::GetInstanceRequest get;
  get.set_name("d");
  ASSERT_TRUE(svc.GetInstance(get, &out).ok());
  ASSERT_EQ(out.shadows_size(), 4);
  const std::vector<v1::LoggedDecision> log = ExportedDsjsonLog(svc, "d");
  ASSERT_EQ(log.size(), static_cast<size_t>(kRounds));
  for (const v1::ShadowStatus& sh : out.shadows()) {
    SCOPED_TRACE(sh.name());
    EXPECT_EQ(sh.events(), kRounds);
    EXPECT_EQ(sh.errors(), 0);
    EXPECT_EQ(sh.direct_model(), "diagonal ridge");
    // bandit-ope over the exported log, the shadow's normalized config as its candidate.
    ope::Candidate c{.name = sh.name(), .config = {}};
    *c.config.mutable_policy() = sh.config().policy();
    c.config.set_seed(sh.config().seed());
    *c.config.mutable_feature_space() = out.config().feature_space();
    ope::EvaluateOptions options;
    options.ridge_lambda = sh.config().ridge_lambda();
    auto evaluator = ope::Evaluator::Create({c}, options);
    ASSERT_TRUE(evaluator.ok()) << evaluator.status();
    for (size_t i = 0; i < log.size(); ++i)
      ASSERT_TRUE((*evaluator)->Add(log[i], absl::StrCat("line ", i)).ok());
    const ope::Estimators& e = (*evaluator)->results()[0].estimators;
    EXPECT_EQ(e.events(), kRounds);
    EXPECT_NEAR(sh.ips().value(), e.Ips().value, 1e-12);
    EXPECT_NEAR(sh.snips().value(), e.Snips().value, 1e-12);
    EXPECT_NEAR(sh.dm().value(), e.DirectMethod().value, 1e-12);
    EXPECT_NEAR(sh.dr().value(), e.DoublyRobust().value, 1e-12);
    EXPECT_NEAR(sh.dr().se(), e.DoublyRobust().se, 1e-12);
    if (sh.name() == "twin") {
      EXPECT_DOUBLE_EQ(sh.ips().value(), sh.served().value());
    }
  }
  EXPECT_NE(out.shadows(1).ips().value(), out.shadows(1).served().value());

  // Export, import elsewhere, and both go on alike: the same snapshot of every shadow. (Each
  // diagonal policy at bits 18 is 4 MB in a snapshot: one shadow goes first, to stay within the
  // 16 MB gRPC message an export must fit.)
  v1::RemoveShadowRequest remove;
  remove.set_name("d");
  remove.set_shadow("eager");
  ASSERT_TRUE(svc.RemoveShadow(remove, &out).ok());
  v1::ExportInstanceRequest ex;
  ex.set_name("d");
  v1::ExportInstanceResponse exported;
  auto exported_ok = svc.ExportInstance(ex, &exported);
  ASSERT_TRUE(exported_ok.ok()) << exported_ok;
  auto snap = SnapshotStore::Decode(exported.snapshot());
  ASSERT_TRUE(snap.ok());
  ASSERT_EQ(snap->shadows_size(), 3);
  EXPECT_EQ(snap->shadows(0).direct_model().diagonal().intercept_a(), kRounds);
  EXPECT_GT(snap->shadows(0).direct_model().diagonal().index_size(), 0);
  DecisionService other(&clock, BanditdLimits());
  v1::ImportInstanceRequest im;
  im.set_snapshot(exported.snapshot());
  ASSERT_TRUE(other.ImportInstance(im, &out).ok());
  for (int round = kRounds; round < kRounds + 40; ++round)
    ASSERT_EQ(PlayNamedOn(svc, "d", round), PlayNamedOn(other, "d", round));
  v1::ExportInstanceResponse e1, e2;
  ASSERT_TRUE(svc.ExportInstance(ex, &e1).ok());
  ASSERT_TRUE(other.ExportInstance(ex, &e2).ok());
  auto s1 = SnapshotStore::Decode(e1.snapshot());
  auto s2 = SnapshotStore::Decode(e2.snapshot());
  ASSERT_TRUE(s1.ok() && s2.ok());
  ASSERT_EQ(s1->shadows_size(), 3);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(s1->shadows(i).SerializeAsString(), s2->shadows(i).SerializeAsString()) << i;
}

// Within --max_feature_dim a diagonal instance keeps shadows (scored on dense vectors), and a
// promoted full-matrix shadow takes over, learning the sparse decisions still pending.
TEST(NamedInputs, DiagonalInstanceShadowsAndPromotion) {
  ManualClock clock;
  DecisionService svc(&clock, BanditdLimits());
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(
                     Create("d", "policy { linucb { alpha: 0.5 covariance: COVARIANCE_DIAGONAL } "
                                 "} feature_space { bits: 8 interactions: 'UA' } seed: 5"),
                     &out)
                  .ok());
  for (const char* shadow : {"same", "full"}) {
    v1::AddShadowRequest add;
    add.set_name("d");
    add.set_shadow(shadow);
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
        std::string(shadow) == "same"
            ? "policy { linucb { alpha: 0.5 covariance: COVARIANCE_DIAGONAL } } seed: 5"
            : "policy { linucb { alpha: 0.5 } } seed: 5",
        add.mutable_config()));
    ASSERT_TRUE(svc.AddShadow(add, &out).ok()) << shadow;
  }
  for (int round = 0; round < 100; ++round) ASSERT_GE(PlayNamedOn(svc, "d", round), 0);
  v1::GetInstanceRequest get;
  get.set_name("d");
  ASSERT_TRUE(svc.GetInstance(get, &out).ok());
  ASSERT_EQ(out.shadows_size(), 2);
  for (const auto& sh : out.shadows()) {
    EXPECT_EQ(sh.events(), 100) << sh.name();
    if (sh.name() == "same") {  // the served policy's twin: it agrees on every decision
      EXPECT_DOUBLE_EQ(sh.ips().value(), sh.served().value());
    }
  }
  // A decision left pending, then the full-matrix shadow promoted: it learns that decision from
  // its sparse features, and serves named Selects on dense vectors from then on.
  v1::Decision pending;
  ASSERT_TRUE(svc.Select(NamedRequest("d", 100), &pending).ok());
  v1::PromoteShadowRequest promote;
  promote.set_name("d");
  promote.set_shadow("full");
  ASSERT_TRUE(svc.PromoteShadow(promote, &out).ok());
  v1::UpdateRequest up;
  up.set_instance("d");
  up.set_event_id(pending.event_id());
  up.set_reward(1.0);
  v1::UpdateResponse resp;
  ASSERT_TRUE(svc.Update(up, &resp).ok());
  for (int round = 101; round < 140; ++round) ASSERT_GE(PlayNamedOn(svc, "d", round), 0);
}

TEST(NamedInputs, DiagonalPolicyAtBits18ReplaysExactlyAfterACrash) {
  for (const char* log : {"", " decision_log { enabled: true }"}) {
    ManualClock clock;
    FaultInjectionFs fs;
    DecisionService twin(&clock);
    v1::Instance out;
    const std::string config = absl::StrCat(kDiagonal18, log);
    ASSERT_TRUE(twin.CreateInstance(Create("x", config), &out).ok());
    // With the log, a shadow too: its sparse direct model is rebuilt by the replay.
    v1::AddShadowRequest add;
    add.set_name("x");
    add.set_shadow("s");
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
        "policy { glb_omd { covariance: COVARIANCE_DIAGONAL max_feature_norm: 1000 } } seed: 9", add.mutable_config()));
    if (*log != 0) {
      ASSERT_TRUE(twin.AddShadow(add, &out).ok());
    }
    std::string pending_a, pending_twin;
    {
      Node a(&fs, &clock);
      ASSERT_TRUE(a.svc.CreateInstance(Create("x", config), &out).ok());
      if (*log != 0) {
        ASSERT_TRUE(a.svc.AddShadow(add, &out).ok());
      }
      for (int round = 0; round < 120; ++round) {
        ASSERT_EQ(PlayNamed(a.svc, round), PlayNamed(twin, round));
        if (round == 60) {
          ASSERT_TRUE(a.persistence->SnapshotAll().ok());  // then journal replay
        }
      }
      // A decision left pending (its sparse choice in the journal), rewarded after the crash.
      v1::Decision d1, d2;
      ASSERT_TRUE(a.svc.Select(NamedRequest("x", 120), &d1).ok());
      ASSERT_TRUE(twin.Select(NamedRequest("x", 120), &d2).ok());
      ASSERT_EQ(d1.arm_index(), d2.arm_index());
      pending_a = d1.event_id();
      pending_twin = d2.event_id();
      ASSERT_TRUE(a.persistence->storage()->Flush().ok());
      fs.Crash();
    }
    Node b(&fs, &clock);
    v1::UpdateRequest up;
    up.set_instance("x");
    up.set_reward(1.0);
    v1::UpdateResponse resp;
    up.set_event_id(pending_a);
    ASSERT_TRUE(b.svc.Update(up, &resp).ok());
    up.set_event_id(pending_twin);
    ASSERT_TRUE(twin.Update(up, &resp).ok());
    for (DecisionService* svc : {&b.svc, &twin}) {
      v1::Decision d;
      ASSERT_TRUE(svc->Select(NamedRequest("x", 121), &d).ok());
      up.set_event_id(d.event_id());
      ASSERT_TRUE(svc->Update(up, &resp).ok());
    }
    for (int round = 122; round < 220; ++round)
      ASSERT_EQ(PlayNamed(b.svc, round), PlayNamed(twin, round)) << round << log;
    v1::ExportInstanceRequest ex;
    ex.set_name("x");
    v1::ExportInstanceResponse e1, e2;
    ASSERT_TRUE(b.svc.ExportInstance(ex, &e1).ok());
    ASSERT_TRUE(twin.ExportInstance(ex, &e2).ok());
    auto s1 = SnapshotStore::Decode(e1.snapshot());
    auto s2 = SnapshotStore::Decode(e2.snapshot());
    ASSERT_TRUE(s1.ok() && s2.ok());
    EXPECT_EQ(s1->policy().SerializeAsString(), s2->policy().SerializeAsString());
    EXPECT_EQ(s1->pending_size(), s2->pending_size());
    ASSERT_EQ(s1->shadows_size(), *log != 0 ? 1 : 0);
    if (*log != 0) {
      EXPECT_EQ(s1->shadows(0).SerializeAsString(), s2->shadows(0).SerializeAsString());
      EXPECT_EQ(s1->shadows(0).estimators().events(), 220);
    }
  }
}

}  // namespace
}  // namespace bandit::server
