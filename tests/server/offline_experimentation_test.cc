// Offline experimentation and feature importance (evaluation_runner.h, offline_experimentation.h)
// on a simulated log whose truth is known: a click model where a user's kind matches one action
// (an interaction of the User and Action namespaces), a user tier that raises every reward (a
// main effect of User), and a Noise namespace that does nothing. The online policy interacts
// the wrong namespaces (-q NA). The search must find an interaction of User with Action; its
// held-out estimate must cover the reward that setting earns when it is served live on fresh
// traffic of the same model; feature importance must rank User first and Noise last. Also: the
// stages' settings as VW's command line reads them, the CPU budget cutting the search short,
// and the held-out split's share.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/service/decision_service.h"
#include "server/service/evaluation_runner.h"
#include "server/service/offline_experimentation.h"
#include "tests/server/server_test_util.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

using testing::Create;
namespace v1 = bandit::v1;

constexpr char kOnline[] = "--cb_explore_adf --epsilon 0.5 -q NA -b 14";
constexpr int kActions = 4;

// The click model: P(click) for a user of `kind` and `tier` shown action `a`.
double ClickProbability(int kind, int tier, int a) {
  return 0.1 + (a == kind ? 0.6 : 0.0) + (tier == 1 ? 0.2 : 0.0);
}

struct Traffic {
  std::mt19937_64 rng;
  int64_t rounds = 0;
  explicit Traffic(uint64_t seed) : rng(seed) {}
  // One round on `instance`: a Select, a click drawn from the model, the Update. The reward.
  double Round(DecisionService& svc, const std::string& instance) {
    const int kind = static_cast<int>(rng() % kActions), tier = static_cast<int>(rng() % 2);
    const int noise = static_cast<int>(rng() % 10);
    v1::SelectRequest req;
    req.set_instance(instance);
    // Event ids of our own: the held-out split hashes them, and the server's carry a random
    // instance id.
    req.set_event_id(absl::StrCat(instance, "-", rounds++));
    req.set_context(absl::StrCat(R"({"User":{"kind":"k)", kind, R"(","tier":"t)", tier,
                                 R"("},"Noise":{"n":"z)", noise, R"("}})"));
    for (int a = 0; a < kActions; ++a) {
      auto* action = req.add_actions();
      action->set_id(absl::StrCat("item-", a));
      action->set_features(absl::StrCat(R"({"Action":{"id":"a)", a, R"("}})"));
    }
    v1::Decision d;
    EXPECT_TRUE(svc.Select(req, &d).ok());
    const double reward =
        std::uniform_real_distribution<double>(0, 1)(rng) < ClickProbability(kind, tier, d.arm_index())
            ? 1.0
            : 0.0;
    v1::UpdateRequest u;
    u.set_instance(instance);
    u.set_event_id(d.event_id());
    u.set_reward(reward);
    v1::UpdateResponse resp;
    EXPECT_TRUE(svc.Update(u, &resp).ok());
    return reward;
  }
};

void CreateVw(DecisionService& svc, const std::string& name, const std::string& arguments,
              int seed, bool log) {
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create(name, absl::StrCat("policy { vw { arguments: '",
                                                           arguments, "' } } seed: ", seed,
                                                           log ? " decision_log { enabled: true }"
                                                               : "")),
                                 &out)
                  .ok());
}

// An evaluation of instance "v" from `start` to `end` run to its end (with offline
// experimentation unless `optimize` is false).
v1::Evaluation Evaluate(DecisionService& svc, int64_t start, int64_t end,
                        EvaluationLimits limits = {}, bool optimize = true) {
  EvaluationRunner runner(&svc, 1, std::move(limits));
  svc.SetEvaluationJobs(runner.Jobs());
  v1::CreateEvaluationRequest req;
  req.set_instance("v");
  req.set_name("search");
  req.set_start_ms(start);
  req.set_end_ms(end);
  req.set_offline_experimentation(optimize);
  v1::Evaluation created;
  EXPECT_TRUE(svc.CreateEvaluation(req, &created).ok());
  runner.WaitIdle();
  v1::GetEvaluationRequest get;
  get.set_instance("v");
  get.set_id(created.id());
  v1::Evaluation e;
  EXPECT_TRUE(svc.GetEvaluation(get, &e).ok());
  svc.SetEvaluationJobs({});
  return e;
}

constexpr int kLogged = 3000;

TEST(OfflineExperimentation, FindsTheInteractionThatDrivesTheRewardAndItsEstimateHolds) {
  ManualClock clock;
  DecisionService svc(&clock);
  CreateVw(svc, "v", kOnline, 3, true);
  Traffic traffic(42);
  const int64_t start = clock.NowMs();
  for (int i = 0; i < kLogged; ++i) {
    traffic.Round(svc, "v");
    clock.Advance(100);
  }
  const v1::Evaluation e = Evaluate(svc, start, clock.NowMs());
  ASSERT_EQ(e.status(), v1::EVALUATION_COMPLETED) << e.error();
  ASSERT_TRUE(e.has_optimization());
  const v1::Optimization& o = e.optimization();
  EXPECT_FALSE(o.budget_exhausted());
  EXPECT_EQ(o.optimal_policy(), "Optimized");
  // The winner interacts User with Action: the pair itself, every pair, or the pairs together.
  const bool interacts = absl::StrContains(o.arguments(), "UA") ||
                         absl::StrContains(o.arguments(), "::");
  EXPECT_TRUE(interacts) << o.arguments();
  EXPECT_FALSE(absl::StrContains(o.arguments(), "NA") && !absl::StrContains(o.arguments(), "UA"))
      << o.arguments();
  // Every stage ran: interactions, learning rates, cb_types, exploration.
  int rates = 0, types = 0, explorers = 0;
  for (const auto& t : o.trials()) {
    rates += absl::StartsWith(t.name(), "--learning_rate");
    types += absl::StartsWith(t.name(), "--cb_type");
    explorers += t.name() == "--squarecb" || absl::StartsWith(t.name(), "--epsilon");
  }
  EXPECT_GE(rates, 7);
  EXPECT_GE(types, 3);
  EXPECT_GE(explorers, 1);
  // The held-out third: about a third of the decisions, and the winner beats the online policy
  // there by more than its interval.
  EXPECT_NEAR(static_cast<double>(o.optimal_held_out().events()) / kLogged, 1.0 / 3, 0.03);
  EXPECT_EQ(o.optimal_held_out().events(), o.online_held_out().events());
  EXPECT_TRUE(o.beats_online()) << o.optimal_held_out().average_reward() << " vs "
                                << o.online_held_out().average_reward();
  // The winner is among the results, and can be applied by its name.
  const v1::EvaluationPolicyResult* best = nullptr;
  for (const auto& r : e.results())
    if (r.source() == v1::POLICY_SOURCE_OFFLINE_EXPERIMENTATION) best = &r;
  ASSERT_NE(best, nullptr);
  EXPECT_EQ(best->name(), o.optimal_policy());
  EXPECT_EQ(best->arguments(), o.arguments());
  EXPECT_EQ(best->total().events(), kLogged);

  // The truth: the winner served live from scratch on fresh traffic of the same model, as many
  // rounds as the log held, averaged over three seeds.
  double live = 0;
  for (int seed = 0; seed < 3; ++seed) {
    const std::string name = absl::StrCat("live-", seed);
    CreateVw(svc, name, o.arguments(), 11 + seed, false);
    Traffic fresh(100 + seed);
    for (int i = 0; i < kLogged; ++i) live += fresh.Round(svc, name);
  }
  live /= 3.0 * kLogged;
  const auto& held = o.optimal_held_out();
  EXPECT_NEAR(held.average_reward(), live, held.confidence_interval())
      << "held-out estimate " << held.average_reward() << " +- " << held.confidence_interval()
      << ", served live " << live;
  // Against the search's own figure on its two thirds, the held-out one is the honest one; the
  // online policy (the wrong interaction, half of its choices uniform) earns less live than
  // the winner: its logged mean is its live value.
  EXPECT_LT(o.online_held_out().average_reward(), live);
}

TEST(FeatureImportance, RanksTheNamespaceThatDrivesTheRewardFirst) {
  ManualClock clock;
  DecisionService svc(&clock);
  // The online settings learn the User main effect (the tier) directly; the interaction too.
  CreateVw(svc, "v", "--cb_explore_adf --epsilon 0.5 -q UA -b 14", 3, true);
  Traffic traffic(7);
  const int64_t start = clock.NowMs();
  for (int i = 0; i < kLogged; ++i) {
    traffic.Round(svc, "v");
    clock.Advance(100);
  }
  const v1::Evaluation e = Evaluate(svc, start, clock.NowMs(), {}, /*optimize=*/false);
  ASSERT_EQ(e.status(), v1::EVALUATION_COMPLETED) << e.error();
  EXPECT_FALSE(e.has_optimization());
  std::vector<v1::FeatureImportance> namespaces, features;
  for (const auto& f : e.feature_importance())
    (f.feature().empty() ? namespaces : features).push_back(f);
  ASSERT_EQ(namespaces.size(), 3u);
  EXPECT_EQ(namespaces.front().namespace_(), "User");
  EXPECT_DOUBLE_EQ(namespaces.front().importance(), 100.0);
  EXPECT_EQ(namespaces.back().namespace_(), "Noise");
  EXPECT_LT(namespaces.back().importance(), 0.5 * namespaces[1].importance());
  // Every decision's chosen action holds each namespace; the features: 4 kinds, 2 tiers, 10
  // noise values, 4 action ids, each seen in its share of the decisions.
  for (const auto& n : namespaces) EXPECT_EQ(n.occurrences(), kLogged) << n.namespace_();
  EXPECT_EQ(features.size(), 4u + 2u + 10u + 4u);
  int64_t tiers = 0;
  for (const auto& f : features)
    if (absl::StartsWith(f.feature(), "tier")) tiers += f.occurrences();
  EXPECT_EQ(tiers, kLogged);
  // The most important feature is a User one, the least a Noise one.
  EXPECT_EQ(features.front().namespace_(), "User");
  EXPECT_EQ(features.back().namespace_(), "Noise");
}

TEST(OfflineExperimentation, TheCpuBudgetCutsTheSearchShort) {
  ManualClock clock;
  DecisionService svc(&clock);
  CreateVw(svc, "v", kOnline, 3, true);
  Traffic traffic(42);
  const int64_t start = clock.NowMs();
  for (int i = 0; i < 300; ++i) {
    traffic.Round(svc, "v");
    clock.Advance(100);
  }
  // A clock that advances one second per reading: the budget of 4 s pays for few settings.
  double now = 0;
  EvaluationLimits limits{.cpu_budget_seconds = 4, .cpu_seconds = [&] { return now += 1; }};
  const v1::Evaluation e = Evaluate(svc, start, clock.NowMs(), limits);
  ASSERT_EQ(e.status(), v1::EVALUATION_COMPLETED) << e.error();
  EXPECT_TRUE(e.optimization().budget_exhausted());
  EXPECT_LT(e.optimization().trials_size(), 8);
  bool warned = false;
  for (const auto& w : e.warnings()) warned |= absl::StrContains(w, "CPU budget");
  EXPECT_TRUE(warned);
}

std::string ArgumentsOf(DecisionService& svc, const std::string& name) {
  v1::GetInstanceRequest get;
  get.set_name(name);
  v1::Instance out;
  EXPECT_TRUE(svc.GetInstance(get, &out).ok());
  return out.config().policy().vw().arguments();
}

TEST(AutoOptimization, AppliesTheWinnerOnItsScheduleAndCanBeUndone) {
  ManualClock clock;
  DecisionService svc(&clock);
  CreateVw(svc, "v", kOnline, 3, true);
  CreateVw(svc, "unlogged", kOnline, 3, false);
  EvaluationRunner runner(&svc, 1);
  svc.SetEvaluationJobs(runner.Jobs());
  const int64_t t0 = clock.NowMs();
  constexpr int64_t kHour = 3600'000;
  v1::ConfigureInstanceRequest on;
  on.set_name("v");
  on.mutable_auto_optimization()->set_enabled(true);
  on.mutable_auto_optimization()->set_frequency_ms(kHour);
  on.mutable_auto_optimization()->set_start_ms(t0 + kLogged * 100 + 1000);
  v1::Instance configured;
  // Refused: without the decision log, and with a frequency under a minute.
  v1::ConfigureInstanceRequest bad = on;
  bad.set_name("unlogged");
  EXPECT_EQ(svc.ConfigureInstance(bad, &configured).code(), absl::StatusCode::kFailedPrecondition);
  bad.set_name("v");
  bad.mutable_auto_optimization()->set_frequency_ms(59'999);
  EXPECT_EQ(svc.ConfigureInstance(bad, &configured).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(svc.ConfigureInstance(on, &configured).ok());
  const std::string online = ArgumentsOf(svc, "v");
  Traffic traffic(42);
  for (int i = 0; i < kLogged; ++i) {
    traffic.Round(svc, "v");
    clock.Advance(100);
  }
  // Not before its start; at it, one automatic evaluation over the last hour's decisions.
  EXPECT_EQ(svc.StartDueAutoOptimizations(), 0);
  clock.Advance(1000);
  EXPECT_EQ(svc.StartDueAutoOptimizations(), 1);
  EXPECT_EQ(svc.StartDueAutoOptimizations(), 0);  // one at a time
  runner.WaitIdle();
  v1::ListEvaluationsRequest list;
  list.set_instance("v");
  v1::ListEvaluationsResponse listed;
  ASSERT_TRUE(svc.ListEvaluations(list, &listed).ok());
  ASSERT_EQ(listed.evaluations_size(), 1);
  const v1::Evaluation& e = listed.evaluations(0);
  EXPECT_EQ(e.type(), v1::EVALUATION_TYPE_AUTO);
  EXPECT_TRUE(e.offline_experimentation());
  EXPECT_EQ(e.events(), kLogged);
  // The winner beat the online policy (the wrong interaction): applied, trained on the log.
  ASSERT_EQ(e.status(), v1::EVALUATION_OPTIMAL_POLICY_APPLIED) << e.DebugString();
  EXPECT_EQ(e.replaced_arguments(), online);
  EXPECT_EQ(ArgumentsOf(svc, "v"), e.optimization().arguments());
  // Not due again until an hour after it.
  clock.Advance(kHour - 1);
  EXPECT_EQ(svc.StartDueAutoOptimizations(), 0);
  // Undone: the replaced arguments set again.
  v1::SetLearningPolicyRequest undo;
  undo.set_name("v");
  undo.set_arguments(e.replaced_arguments());
  undo.set_train_on_log(true);
  ASSERT_TRUE(svc.SetLearningPolicy(undo, &configured).ok());
  EXPECT_EQ(ArgumentsOf(svc, "v"), online);
  // Turned off: nothing more.
  v1::ConfigureInstanceRequest off;
  off.set_name("v");
  off.mutable_auto_optimization()->set_enabled(false);
  ASSERT_TRUE(svc.ConfigureInstance(off, &configured).ok());
  clock.Advance(10 * kHour);
  EXPECT_EQ(svc.StartDueAutoOptimizations(), 0);
  svc.SetEvaluationJobs({});
}

TEST(OfflineExperimentation, StagesAreSettingsVwTakes) {
  auto base = vw::ParseVwArguments("--cb_explore_adf --epsilon 0.2 -l 0.001 -q UA --power_t 0");
  ASSERT_TRUE(base.ok());
  const auto interactions = InteractionStage(*base, {"UN", "A"});
  std::vector<std::string> names;
  for (const auto& s : interactions) names.push_back(s.name);
  // UA is the base's own: not again. NA is offered; all pairs together; none; every pair.
  EXPECT_EQ(names, (std::vector<std::string>{"no interactions", "-q ::", "-q NA",
                                             "-q UA -q NA"}));
  for (const auto& s : interactions) {
    auto parsed = vw::ParseVwArguments(s.arguments);
    ASSERT_TRUE(parsed.ok()) << s.arguments;
    EXPECT_EQ(parsed->regressor.learning_rate, 0.001f) << s.arguments;  // the rest kept
    EXPECT_EQ(parsed->epsilon, 0.2f);
  }
  EXPECT_EQ(LearningRateStage(*base).size(), 7u);  // 4 rates x 2 power_t, less the base's
  EXPECT_EQ(CbTypeStage(*base).size(), 3u);
  const auto explore = ExplorationStage(*base);
  ASSERT_EQ(explore.size(), 1u);  // epsilon 0.2 is the base's own
  EXPECT_EQ(explore[0].name, "--squarecb");
  auto square = vw::ParseVwArguments(explore[0].arguments);
  ASSERT_TRUE(square.ok());
  EXPECT_EQ(square->explorer, vw::Explorer::kSquareCb);
  EXPECT_TRUE(CbTypeStage(*square).empty());  // SquareCB learns with mtr only
  // The held-out share over many ids: a third.
  int held = 0;
  for (int i = 0; i < 30000; ++i) held += HeldOut(absl::StrCat("event-", i));
  EXPECT_NEAR(held / 30000.0, 1.0 / 3, 0.01);
}

}  // namespace BANDIT_UNITY_ID
}  // namespace bandit::server
