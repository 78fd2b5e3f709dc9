// A vw instance through DecisionService: its feature space comes from VW's arguments (a stated
// one must agree), and with named features it serves exactly what the learner predicts for the
// hashed vectors (the pmf as scores and as Personalizer's ranking), learning VW's label
// (chosen : -reward : propensity) from each reward.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/features/feature_space.h"
#include "core/vw/cb_learner.h"
#include "core/vw/model_file.h"
#include "server/service/decision_service.h"
#include "server/service/persistence.h"
#include "tests/server/fault_injection_fs.h"
#include "tests/server/server_test_util.h"
#include "tests/server/vw_rounds.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

using testing::Create;
namespace v1 = bandit::v1;

constexpr char kArguments[] = "--cb_explore_adf --epsilon 0.2 -q UA -l 0.1 -b 10";

// The reward of decision `d` of instance "v".
absl::Status Reward(DecisionService& svc, const v1::Decision& d, double reward) {
  v1::UpdateRequest u;
  u.set_instance("v");
  u.set_event_id(d.event_id());
  u.set_reward(reward);
  v1::UpdateResponse resp;
  return svc.Update(u, &resp);
}

TEST(VwInstance, FeatureSpaceComesFromTheArguments) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(
      svc.CreateInstance(
             Create("v", absl::StrCat("policy { vw { arguments: '", kArguments, "' } }")), &out)
          .ok());
  EXPECT_EQ(out.config().feature_space().bits(), 10);
  ASSERT_EQ(out.config().feature_space().interactions_size(), 1);
  EXPECT_EQ(out.config().feature_space().interactions(0), "UA");
  EXPECT_EQ(out.config().policy().vw().dimension(), 1024);
  // A feature space that agrees is accepted; one that does not is refused, naming the field.
  EXPECT_TRUE(svc.CreateInstance(Create("w", absl::StrCat("policy { vw { arguments: '", kArguments,
                                                          "' } } feature_space { bits: 10 "
                                                          "interactions: 'UA' }")),
                                 &out)
                  .ok());
  absl::Status s = svc.CreateInstance(
      Create("x", absl::StrCat("policy { vw { arguments: '", kArguments,
                               "' } } feature_space { bits: 12 interactions: 'UA' }")),
      &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("feature_space.bits is 12"), std::string::npos) << s;
  // --bag's regressors share -b's array, each in 2 bits fewer for 3 of them.
  ASSERT_TRUE(svc.CreateInstance(Create("b", "policy { vw { arguments: '--cb_explore_adf --bag 3 "
                                             "-b 12' } }"),
                                 &out)
                  .ok());
  EXPECT_EQ(out.config().feature_space().bits(), 10);
  s = svc.CreateInstance(Create("c", "policy { vw { arguments: '--cb_explore_adf --bag 3 -b 12' } }"
                                     " feature_space { bits: 12 }"),
                         &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--bag"), std::string::npos) << s;
  // --cover 3 with mtr: 4 policies and their scorers, 8 regressors, 3 bits fewer.
  ASSERT_TRUE(
      svc.CreateInstance(Create("y", "policy { vw { arguments: '--cb_explore_adf --cover 3 -b 12' } }"),
                         &out)
          .ok());
  EXPECT_EQ(out.config().feature_space().bits(), 9);
  s = svc.CreateInstance(Create("z", "policy { vw { arguments: '--cb_explore_adf --cover 3 "
                                     "--cb_type dm' } }"),
                         &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--cb_type"), std::string::npos) << s;
}

// --cb_type dr and --cover learn every action offered: the decision's memo carries them through
// the pending table, a snapshot export and import with decisions still pending, and the rewards
// that arrive after it; a twin learner fed the same vectors and labels in the same order
// predicts every round's probabilities.
TEST(VwInstance, EveryOfferedActionIsLearnedThroughPendingDecisionsAndASnapshot) {
  for (const char* arguments : {"--cb_explore_adf --cover 3 --cb_type dr -q UA -b 12",
                                "--cb_explore_adf --epsilon 0.1 --cb_type ips -q UA -b 10"}) {
    SCOPED_TRACE(arguments);
    ManualClock clock;
    DecisionService svc(&clock);
    v1::Instance out;
    ASSERT_TRUE(svc.CreateInstance(Create("v", absl::StrCat("policy { vw { arguments: '",
                                                            arguments, "' } } seed: 5")),
                                   &out)
                    .ok());
    auto options = vw::ParseVwArguments(arguments);
    ASSERT_TRUE(options.ok());
    vw::CbLearner twin(*options, 0);
    auto space = *features::FeatureSpace::Create(options->space);
    // Each decision is rewarded two rounds later.
    struct Pending {
      v1::Decision d;
      std::vector<SparseVector> xs;
    };
    std::vector<Pending> waiting;
    const auto reward_oldest = [&] {
      const Pending& p = waiting.front();
      const double reward = p.d.arm_index() == 2 ? 1.0 : 0.1 * p.d.arm_index();
      ASSERT_TRUE(Reward(svc, p.d, reward).ok());
      ASSERT_TRUE(twin.LearnOffered(p.xs, p.d.arm_index(), -static_cast<float>(reward),
                                    static_cast<float>(p.d.propensity())));
      waiting.erase(waiting.begin());
    };
    for (int round = 0; round < 80; ++round) {
      const v1::SelectRequest req = testing::VwRound(round);
      v1::Decision d;
      ASSERT_TRUE(svc.Select(req, &d).ok()) << round;
      const std::vector<SparseVector> xs = testing::VwVectors(space, req);
      vw::CbLearner::Prediction p;
      twin.Predict(xs, &p);
      for (const auto& r : d.ranking())
        EXPECT_FLOAT_EQ(static_cast<float>(r.probability()), p.pmf[r.id().back() - '0'])
            << round;
      waiting.push_back({d, xs});
      if (round == 40) {
        // Out and back in with three decisions pending.
        v1::ExportInstanceRequest ex;
        ex.set_name("v");
        v1::ExportInstanceResponse snapshot;
        ASSERT_TRUE(svc.ExportInstance(ex, &snapshot).ok());
        v1::DeleteInstanceRequest del;
        del.set_name("v");
        v1::DeleteInstanceResponse deleted;
        ASSERT_TRUE(svc.DeleteInstance(del, &deleted).ok());
        v1::ImportInstanceRequest im;
        im.set_name("v");
        im.set_snapshot(snapshot.snapshot());
        ASSERT_TRUE(svc.ImportInstance(im, &out).ok());
      }
      if (waiting.size() > 2) reward_oldest();
    }
    while (!waiting.empty()) reward_oldest();
    v1::Decision last;
    const v1::SelectRequest req = testing::VwRound(80);
    ASSERT_TRUE(svc.Select(req, &last).ok());
    vw::CbLearner::Prediction p;
    twin.Predict(testing::VwVectors(space, req), &p);
    for (const auto& r : last.ranking())
      EXPECT_FLOAT_EQ(static_cast<float>(r.probability()), p.pmf[r.id().back() - '0']);
  }
}

TEST(VwInstance, ServesWhatTheLearnerPredictsAndLearnsVwsLabel) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("v", absl::StrCat("policy { vw { arguments: '", kArguments,
                                                          "' } } seed: 11")),
                                 &out)
                  .ok());
  auto options = vw::ParseVwArguments(kArguments);
  ASSERT_TRUE(options.ok());
  vw::CbLearner twin(*options, 0);
  auto space = *features::FeatureSpace::Create(options->space);
  std::map<int, int> chosen_count;
  for (int round = 0; round < 200; ++round) {
    const v1::SelectRequest req = testing::VwRound(round);
    v1::Decision d;
    ASSERT_TRUE(svc.Select(req, &d).ok()) << round;
    // The twin's prediction from the same hashed vectors.
    const std::vector<SparseVector> xs = testing::VwVectors(space, req);
    vw::CbLearner::Prediction p;
    twin.Predict(xs, &p);
    ASSERT_EQ(d.ranking_size(), 4);
    for (const auto& r : d.ranking()) {
      const int a = r.id().back() - '0';
      EXPECT_FLOAT_EQ(static_cast<float>(r.probability()), p.pmf[a]) << round;
    }
    EXPECT_FLOAT_EQ(static_cast<float>(d.propensity()), p.pmf[d.arm_index()]);
    ++chosen_count[d.arm_index()];
    // Action 2 pays, more for US users.
    const double reward = d.arm_index() == 2 ? (round % 3 == 0 ? 1.0 : 0.6) : 0.0;
    ASSERT_TRUE(Reward(svc, d, reward).ok()) << round;
    twin.Learn(xs[d.arm_index()], d.arm_index(), 4, -static_cast<float>(reward),
               static_cast<float>(d.propensity()));
  }
  // It learned: the paying action is the greedy one (0.8 + 0.2/4) in the end, chosen most.
  v1::Decision last;
  ASSERT_TRUE(svc.Select(testing::VwRound(200), &last).ok());
  for (const auto& r : last.ranking())
    if (r.id() == "item-2") EXPECT_NEAR(r.probability(), 0.85, 1e-6);
  EXPECT_GT(chosen_count[2], 100);
}

// A --ccb_explore_adf instance decides slots as VW's conditional contextual bandits do: each
// slot over the actions earlier slots left, its features in the slot's context, and once a
// decision had several slots, every later one (a single featureless slot too) with its slots'
// index: a twin learner fed the same vectors (FeatureSpace::SlotContexts) and the same rewards
// predicts every slot's probabilities. A plain Select and logged data are refused.
TEST(VwInstance, CcbSlotsAsVwDecidesThemWithTheStickyIndex) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  constexpr char kCcb[] = "--ccb_explore_adf --squarecb -q UA -l 0.1 -b 10";
  ASSERT_TRUE(svc.CreateInstance(Create("v", absl::StrCat("policy { vw { arguments: '", kCcb,
                                                          "' } } seed: 5")),
                                 &out)
                  .ok());
  v1::Decision plain;
  absl::Status refused = svc.Select(testing::VwRound(0), &plain);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("slots"), std::string::npos) << refused;

  auto options = vw::ParseVwArguments(kCcb);
  ASSERT_TRUE(options.ok());
  vw::CbLearner twin(*options, 0);
  auto space = *features::FeatureSpace::Create(options->space);
  auto slot_space = *space.ForSlots();
  features::InputLimits limits;
  int indexed_single_slots = 0;
  for (int round = 0; round < 60; ++round) {
    v1::SelectRequest req = testing::VwRound(round);
    // Single featureless slots first, then two slots (the second with features), then single
    // slots again: featurized with the index now.
    const int slots = round >= 10 && round < 40 ? 2 : 1;
    for (int k = 0; k < slots; ++k) {
      auto* slot = req.add_slots();
      slot->set_id(absl::StrCat("s", k));
      if (k == 1) slot->set_features(absl::StrCat(R"({"Slot":{"pos":"p)", round % 2, R"("}})"));
    }
    v1::Decision d;
    ASSERT_TRUE(svc.Select(req, &d).ok()) << round;
    ASSERT_EQ(d.slots_size(), slots);

    features::ParsedFeatures shared;
    ASSERT_TRUE(space.Parse(req.context(), "context", limits, false, &shared).ok());
    std::vector<features::ParsedFeatures> actions(req.actions_size()), slot_features(slots);
    for (int a = 0; a < req.actions_size(); ++a)
      ASSERT_TRUE(space.Parse(req.actions(a).features(), "a", limits, false, &actions[a]).ok());
    for (int k = 0; k < slots; ++k)
      if (!req.slots(k).features().empty())
        ASSERT_TRUE(
            space.Parse(req.slots(k).features(), "s", limits, false, &slot_features[k]).ok());
    if (slots > 1 || slot_features[0].size() > 0) twin.SawMultiSlotDecision();
    const bool indexed = twin.slot_index() == Policy::SlotIndex::kAlways;
    indexed_single_slots += indexed && slots == 1;
    const features::FeatureSpace& used = indexed ? slot_space : space;
    std::vector<features::ParsedFeatures> contexts;
    used.SlotContexts(shared, slot_features, indexed, false, &contexts);
    // Every slot is decided before any is learned; the rewards come back in slot order.
    std::vector<char> taken(req.actions_size(), 0);
    struct Learn {
      SparseVector x;
      int position, offered;
      float propensity;
    };
    std::vector<Learn> learns;
    for (int k = 0; k < slots; ++k) {
      std::vector<int> offered;
      std::vector<SparseVector> xs;
      for (int a = 0; a < req.actions_size(); ++a) {
        if (taken[a]) continue;
        offered.push_back(a);
        SparseVector x;
        used.Featurize(actions[a], &contexts[k], &x.index, &x.value);
        xs.push_back(std::move(x));
      }
      vw::CbLearner::Prediction p;
      twin.Predict(xs, &p);
      const v1::SlotDecision& sd = d.slots(k);
      ASSERT_EQ(sd.ranking_size(), static_cast<int>(offered.size()));
      for (const auto& r : sd.ranking()) {
        const int a = r.id().back() - '0';
        const int j = static_cast<int>(std::find(offered.begin(), offered.end(), a) -
                                       offered.begin());
        EXPECT_FLOAT_EQ(static_cast<float>(r.probability()), p.pmf[j]) << round << " slot " << k;
      }
      const int j = static_cast<int>(
          std::find(offered.begin(), offered.end(), sd.arm_index()) - offered.begin());
      learns.push_back({xs[j], j, static_cast<int>(offered.size()),
                        static_cast<float>(sd.propensity())});
      taken[sd.arm_index()] = 1;
    }
    for (int k = 0; k < slots; ++k) {
      const double reward = d.slots(k).arm_index() == 2 ? 1.0 : 0.1 * k;
      v1::UpdateRequest u;
      u.set_instance("v");
      u.set_event_id(d.event_id());
      u.set_slot_id(absl::StrCat("s", k));
      u.set_reward(reward);
      v1::UpdateResponse resp;
      ASSERT_TRUE(svc.Update(u, &resp).ok()) << round;
      ASSERT_TRUE(twin.Learn(learns[k].x, learns[k].position, learns[k].offered,
                             -static_cast<float>(reward), learns[k].propensity));
    }
  }
  EXPECT_EQ(indexed_single_slots, 20);
  // Logged data (a direct update without its slots) is refused.
  v1::UpdateRequest direct;
  direct.set_instance("v");
  direct.mutable_direct()->set_context(testing::VwRound(0).context());
  *direct.mutable_direct()->mutable_action() = testing::VwRound(0).actions(0);
  direct.set_reward(1);
  v1::UpdateResponse resp;
  EXPECT_EQ(svc.Update(direct, &resp).code(), absl::StatusCode::kInvalidArgument);
}

// explain: the chosen action's terms with the learner's weights; their dot product is the
// chosen action's predicted cost, as the cb_adf reduction scores it.
TEST(VwInstance, ExplainShowsEachTermsWeight) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(
      svc.CreateInstance(Create("v", "policy { vw { arguments: '--cb_adf -q UA -b 12' } }"), &out)
          .ok());
  EXPECT_EQ(out.weights_size(), 0);  // 2^b weights are not copied into GetInstance
  for (int round = 0; round < 40; ++round) {
    v1::SelectRequest req = testing::VwRound(round);
    req.set_instance("v");
    v1::Decision d;
    ASSERT_TRUE(svc.Select(req, &d).ok());
    ASSERT_TRUE(Reward(svc, d, d.arm_index() == 3 ? 1.0 : 0.2).ok());
  }
  v1::SelectRequest req = testing::VwRound(41);
  req.set_instance("v");
  req.set_explain(true);
  v1::Decision d;
  ASSERT_TRUE(svc.Select(req, &d).ok());
  ASSERT_EQ(d.explanation_size(), 9);  // 2 user, 2 action features, the constant, 4 UA pairs
  float cost = 0;
  int nonzero = 0;
  for (const auto& e : d.explanation()) {
    cost += static_cast<float>(e.weight()) * static_cast<float>(e.value());
    nonzero += e.weight() != 0;
  }
  EXPECT_GT(nonzero, 0);
  EXPECT_FLOAT_EQ(cost, static_cast<float>(d.scores(d.arm_index())));
}

// A vw shadow that is the served vw policy's twin (same arguments, same seed) makes the served
// choices with the served probabilities: every importance weight is 1 and its IPS estimate is
// the served mean reward, computed here from the rewards sent. A LinUCB shadow of the same
// instance runs beside it over the same hashed vectors.
TEST(VwInstance, ShadowsOfAndBesideAVwInstance) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  const std::string policy = absl::StrCat("policy { vw { arguments: '", kArguments, "' } }");
  ASSERT_TRUE(svc.CreateInstance(Create("v", absl::StrCat(policy, " seed: 5")), &out).ok());
  for (const auto& [name, config] : std::vector<std::pair<std::string, std::string>>{
           {"twin", absl::StrCat(policy, " seed: 5")},
           {"linucb", "policy { linucb { covariance: COVARIANCE_DIAGONAL } } seed: 9"}}) {
    v1::AddShadowRequest req;
    req.set_name("v");
    req.set_shadow(name);
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(config, req.mutable_config()));
    absl::Status added = svc.AddShadow(req, &out);
    ASSERT_TRUE(added.ok()) << name << ": " << added;
  }
  double reward_sum = 0;
  const int kRounds = 300;
  for (int round = 0; round < kRounds; ++round) {
    v1::Decision d;
    ASSERT_TRUE(svc.Select(testing::VwRound(round), &d).ok());
    const double reward = d.arm_index() == 2 ? 1.0 : 0.0;
    reward_sum += reward;
    ASSERT_TRUE(Reward(svc, d, reward).ok());
  }
  const v1::Instance inst = testing::InstanceOf(svc, "v");
  ASSERT_EQ(inst.shadows_size(), 2);
  for (const auto& s : inst.shadows()) {
    EXPECT_EQ(s.events(), kRounds) << s.name();
    if (s.name() == "twin") EXPECT_NEAR(s.ips().value(), reward_sum / kRounds, 1e-12);
  }
}

// APPRENTICE: the baseline is served and learned as logged data of a decision among every action
// offered, as VW learns Personalizer's apprentice events (the example holds them all, and MTR
// counts them): the learned model equals a twin's fed the same labels.
TEST(VwInstance, ApprenticeLearnsTheBaselineAmongTheActionsOffered) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("v", absl::StrCat("policy { vw { arguments: '", kArguments,
                                                          "' } } learning_mode: APPRENTICE")),
                                 &out)
                  .ok());
  auto options = vw::ParseVwArguments(kArguments);
  ASSERT_TRUE(options.ok());
  vw::CbLearner twin(*options, 0);
  auto space = *features::FeatureSpace::Create(options->space);
  for (int round = 0; round < 80; ++round) {
    v1::SelectRequest req = testing::VwRound(round);
    v1::Decision d;
    ASSERT_TRUE(svc.Select(req, &d).ok()) << round;
    ASSERT_EQ(d.action_id(), "item-0");  // the baseline: the first action
    const double reward = round % 3 == 0 ? 1.0 : 0.0;
    ASSERT_TRUE(Reward(svc, d, reward).ok());
    const std::vector<SparseVector> xs = testing::VwVectors(space, req);
    ASSERT_TRUE(twin.Learn(xs[0], 0, req.actions_size(), -static_cast<float>(reward), 1.f));
  }
  v1::ExportInstanceRequest ex;
  ex.set_name("v");
  ex.set_format(v1::VW);
  v1::ExportInstanceResponse model;
  ASSERT_TRUE(svc.ExportInstance(ex, &model).ok());
  auto served = vw::ReadModelFile(model.vw_model(), "", 0);
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(served->learner->counters().event_sum, 80u);
  EXPECT_EQ(served->learner->counters().action_sum, 80u * 4);
  // Every float a model file keeps (weight, adaptive sum, normalizer; not the rate beside them).
  const auto& a = served->learner->regressor().weights();
  const auto& b = twin.regressor().weights();
  ASSERT_EQ(a.size(), b.size());
  int differ = 0;
  for (size_t i = 0; i < a.size(); i += 4)
    for (size_t j = 0; j < 3; ++j) differ += a[i + j] != b[i + j];
  EXPECT_EQ(differ, 0);
}

// A vw instance exports as VW's model file, and a model file imports as a vw instance that
// predicts what the exported one predicts (and exports the same bytes).
TEST(VwInstance, ExportsAndImportsVwModelFiles) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(
      svc.CreateInstance(
             Create("v", absl::StrCat("policy { vw { arguments: '", kArguments, "' } }")), &out)
          .ok());
  for (int round = 0; round < 50; ++round) {
    v1::Decision d;
    ASSERT_TRUE(svc.Select(testing::VwRound(round), &d).ok());
    ASSERT_TRUE(Reward(svc, d, d.arm_index() == 1 ? 1.0 : 0.0).ok());
  }
  v1::ExportInstanceRequest ex;
  ex.set_name("v");
  ex.set_format(v1::VW);
  v1::ExportInstanceResponse model;
  ASSERT_TRUE(svc.ExportInstance(ex, &model).ok());
  EXPECT_EQ(model.vw_model().substr(4, 6), "9.11.2");
  v1::ImportInstanceRequest im;
  im.set_name("w");
  im.set_vw_model(model.vw_model());
  im.mutable_config()->set_seed(99);
  absl::Status imported = svc.ImportInstance(im, &out);
  ASSERT_TRUE(imported.ok()) << imported;
  EXPECT_EQ(out.config().policy().vw().arguments(),
            "-b 10 --cb_explore_adf --cb_type mtr --epsilon 0.200000002980232 "
            "--learning_rate 0.100000001490116 --quadratic UA");
  EXPECT_EQ(out.config().feature_space().bits(), 10);
  v1::Decision a, b;
  v1::SelectRequest req = testing::VwRound(7);
  ASSERT_TRUE(svc.Select(req, &a).ok());
  req.set_instance("w");
  ASSERT_TRUE(svc.Select(req, &b).ok());
  std::map<std::string, double> pa, pb;
  for (const auto& r : a.ranking()) pa[r.id()] = r.probability();
  for (const auto& r : b.ranking()) pb[r.id()] = r.probability();
  EXPECT_EQ(pa, pb);
  ex.set_name("w");
  v1::ExportInstanceResponse again;
  ASSERT_TRUE(svc.ExportInstance(ex, &again).ok());
  EXPECT_EQ(again.vw_model(), model.vw_model());
  // Refused: a policy beside the file, bytes that are not a model, no name, a non-vw export.
  im.set_name("x");
  im.mutable_config()->mutable_policy()->mutable_linucb();
  EXPECT_EQ(svc.ImportInstance(im, &out).code(), absl::StatusCode::kInvalidArgument);
  im.mutable_config()->clear_policy();
  im.set_vw_model("not a model");
  EXPECT_EQ(svc.ImportInstance(im, &out).code(), absl::StatusCode::kInvalidArgument);
  im.set_vw_model(model.vw_model());
  im.set_name("");
  EXPECT_EQ(svc.ImportInstance(im, &out).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(svc.CreateInstance(Create("l", "policy { linucb { dimension: 2 } }"), &out).ok());
  ex.set_name("l");
  EXPECT_EQ(svc.ExportInstance(ex, &again).code(), absl::StatusCode::kFailedPrecondition);
}

// Selects of one instance prepare their predictions concurrently (the shared side of its lock)
// while Updates land between them: every decision is still the one the journal's order gives,
// so a restart that replays the journal ends in exactly the live state.
TEST(VwInstance, ConcurrentSelectsReplayExactly) {
  FaultInjectionFs fs;
  ManualClock clock;
  std::string live;
  const auto open = [&](DecisionService* svc, std::unique_ptr<Persistence>* persistence) {
    PersistenceOptions o;
    o.data_dir = "/data";
    o.fs = &fs;
    o.clock = &clock;
    o.durability = Durability::kAlways;
    o.snapshot_every_changes = 1'000'000;
    o.snapshot_interval_ms = 1'000'000'000;
    RecoveryReport report;
    auto p = Persistence::Open(o, svc, &report);
    ASSERT_TRUE(p.ok()) << p.status();
    *persistence = *std::move(p);
  };
  {
    SequentialUids uids;
    DecisionService svc(&clock, ServiceLimits{}, &uids);
    std::unique_ptr<Persistence> persistence;
    open(&svc, &persistence);
    v1::Instance out;
    ASSERT_TRUE(svc.CreateInstance(Create("v", absl::StrCat("policy { vw { arguments: '",
                                                            kArguments, "' } } seed: 4")),
                                   &out)
                    .ok());
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (int round = 0; round < 60; ++round) {
          v1::Decision d;
          if (!svc.Select(testing::VwRound(t * 100 + round), &d).ok()) {
            ++failures;
            continue;
          }
          if (!Reward(svc, d, d.arm_index() == 2 ? 1.0 : 0.0).ok()) ++failures;
        }
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
    live = testing::Exported(svc, "v");
    ASSERT_TRUE(persistence->storage()->Flush().ok());
  }
  SequentialUids uids;
  DecisionService restarted(&clock, ServiceLimits{}, &uids);
  std::unique_ptr<Persistence> persistence;
  open(&restarted, &persistence);
  EXPECT_EQ(testing::Exported(restarted, "v"), live);
}

}  // namespace BANDIT_UNITY_ID
}  // namespace bandit::server
