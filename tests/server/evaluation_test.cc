// Offline evaluations of a decision log (DecisionService::CreateEvaluation, EvaluationRunner):
// each policy's figures against the same sums computed here from the decisions as they were
// served (the online policy's mean reward, uniform and baseline choice reweighted by the logged
// propensities, and a custom vw policy run by a twin learner that scores each logged context
// and then learns it, as VW learns a logged example); the requests refused with their statuses;
// and a job interrupted by a restart run again from the journal, saying so.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/features/feature_space.h"
#include "core/vw/cb_learner.h"
#include "server/service/decision_service.h"
#include "server/service/evaluation_runner.h"
#include "tests/server/file_node.h"
#include "tests/server/server_test_util.h"
#include "tests/server/vw_rounds.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

using testing::Create;
namespace v1 = bandit::v1;

constexpr char kServed[] = "--cb_explore_adf --epsilon 0.3 -q UA -l 0.1 -b 12";
constexpr char kCustom[] = "--cb_explore_adf --epsilon 0.1 -q UA -b 12";

double RewardOf(int round, int arm) {
  if (arm == 2) return round % 3 == 0 ? 1.0 : 0.5;
  return arm == 0 ? 0.2 : 0.0;
}

struct Served {
  int64_t start_ms = 0, end_ms = 0;
  // The sums each policy's IPS numerator is, computed from the decisions as served.
  double online = 0, uniform = 0, baseline = 0, custom = 0;
  int64_t events = 0, custom_nonzero = 0;
  // A kCustom learner taught every decision as logged (VW's learn of a logged example).
  std::shared_ptr<vw::CbLearner> twin;
};

// `rounds` decisions one second apart, each rewarded at once; the custom policy's twin scores
// every logged context before it learns it.
Served Serve(DecisionService& svc, ManualClock& clock, int rounds) {
  Served s;
  v1::Instance out;
  EXPECT_TRUE(svc.CreateInstance(Create("v", absl::StrCat("policy { vw { arguments: '", kServed,
                                                          "' } } seed: 3 decision_log { enabled: "
                                                          "true }")),
                                 &out)
                  .ok());
  auto options = vw::ParseVwArguments(kCustom);
  EXPECT_TRUE(options.ok());
  s.twin = std::make_shared<vw::CbLearner>(*options, 1);
  vw::CbLearner& twin = *s.twin;
  auto space = *features::FeatureSpace::Create(options->space);
  s.start_ms = clock.NowMs();
  for (int round = 0; round < rounds; ++round) {
    const v1::SelectRequest req = testing::VwRound(round);
    v1::Decision d;
    EXPECT_TRUE(svc.Select(req, &d).ok());
    const int arm = d.arm_index();
    const double p = d.propensity(), r = RewardOf(round, arm);
    v1::UpdateRequest u;
    u.set_instance("v");
    u.set_event_id(d.event_id());
    u.set_reward(r);
    v1::UpdateResponse resp;
    EXPECT_TRUE(svc.Update(u, &resp).ok());
    s.online += r;
    s.uniform += 0.25 / p * r;
    s.baseline += (arm == 0 ? 1.0 : 0.0) / p * r;
    const auto xs = testing::VwVectors(space, req);
    vw::CbLearner::Prediction pred;
    twin.Predict(xs, &pred);
    s.custom += pred.pmf[arm] / p * r;
    s.custom_nonzero += pred.pmf[arm] > 0;
    EXPECT_TRUE(twin.Learn(xs[arm], 0, 4, -static_cast<float>(r), static_cast<float>(p)));
    ++s.events;
    clock.Advance(1000);
  }
  s.end_ms = clock.NowMs();
  return s;
}

const v1::EvaluationPolicyResult* ResultOf(const v1::Evaluation& e, const std::string& name) {
  for (const auto& r : e.results())
    if (r.name() == name) return &r;
  return nullptr;
}

void ExpectNear(double ours, double want, const std::string& what) {
  EXPECT_NEAR(ours, want, 1e-9 * std::max(1.0, std::fabs(want))) << what;
}

TEST(Evaluation, EachPolicysFiguresAreTheLogsOwnSums) {
  ManualClock clock;
  DecisionService svc(&clock);
  const Served served = Serve(svc, clock, 400);
  EvaluationRunner runner(&svc, 1);
  svc.SetEvaluationJobs(runner.Jobs());
  v1::CreateEvaluationRequest req;
  req.set_instance("v");
  req.set_name("first");
  req.set_start_ms(served.start_ms);
  req.set_end_ms(served.end_ms);
  auto* p = req.add_policies();
  p->set_name("lower epsilon");
  p->set_arguments(kCustom);
  v1::Evaluation created;
  ASSERT_TRUE(svc.CreateEvaluation(req, &created).ok());
  EXPECT_EQ(created.status(), v1::EVALUATION_PENDING);
  EXPECT_FALSE(created.id().empty());
  runner.WaitIdle();
  v1::GetEvaluationRequest get;
  get.set_instance("v");
  get.set_id(created.id());
  v1::Evaluation e;
  ASSERT_TRUE(svc.GetEvaluation(get, &e).ok());
  ASSERT_EQ(e.status(), v1::EVALUATION_COMPLETED) << e.error();
  EXPECT_EQ(e.events(), served.events);
  EXPECT_FALSE(e.restarted());
  EXPECT_EQ(e.window_ms(), 5 * 60'000);  // 400 s: two windows of 5 minutes at most
  const double n = static_cast<double>(served.events);
  for (const auto& [name, sum] : std::vector<std::pair<std::string, double>>{
           {"Online", served.online},
           {"Random", served.uniform},
           {"Baseline", served.baseline},
           {"lower epsilon", served.custom}}) {
    const auto* r = ResultOf(e, name);
    ASSERT_NE(r, nullptr) << name;
    ExpectNear(r->total().ips_numerator(), sum, name + " ips_numerator");
    EXPECT_EQ(r->total().ips_denominator(), n) << name;
    ExpectNear(r->total().average_reward(), sum / n, name + " average_reward");
    // The windows add up to the total.
    double windows = 0;
    int64_t events = 0;
    for (const auto& w : r->summary()) {
      windows += w.ips_numerator();
      events += w.events();
      EXPECT_EQ(w.window_ms(), e.window_ms());
      EXPECT_EQ(w.start_ms() % e.window_ms(), 0);
    }
    ExpectNear(windows, sum, name + " windows");
    EXPECT_EQ(events, served.events);
  }
  EXPECT_EQ(ResultOf(e, "Online")->source(), v1::POLICY_SOURCE_ONLINE);
  EXPECT_EQ(ResultOf(e, "Online")->arguments(), kServed);
  EXPECT_EQ(ResultOf(e, "Online")->total().non_zero_probability(), 1.0);
  EXPECT_EQ(ResultOf(e, "lower epsilon")->source(), v1::POLICY_SOURCE_CUSTOM);
  EXPECT_DOUBLE_EQ(ResultOf(e, "lower epsilon")->total().non_zero_probability(),
                   static_cast<double>(served.custom_nonzero) / n);
  EXPECT_TRUE(e.warnings().empty());  // the served policy explored
  v1::ListEvaluationsRequest list;
  list.set_instance("v");
  v1::ListEvaluationsResponse listed;
  ASSERT_TRUE(svc.ListEvaluations(list, &listed).ok());
  ASSERT_EQ(listed.evaluations_size(), 1);
  EXPECT_EQ(listed.evaluations(0).id(), created.id());
  v1::DeleteEvaluationRequest del;
  del.set_instance("v");
  del.set_id(created.id());
  ASSERT_TRUE(svc.DeleteEvaluation(del, nullptr).ok());
  EXPECT_EQ(svc.GetEvaluation(get, &e).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(svc.DeleteEvaluation(del, nullptr).code(), absl::StatusCode::kNotFound);
}

TEST(Evaluation, RequestsRefusedWithTheirStatusesChangeNothing) {
  ManualClock clock;
  DecisionService svc(&clock);
  const Served served = Serve(svc, clock, 20);
  v1::CreateEvaluationRequest good;
  good.set_instance("v");
  good.set_name("e");
  good.set_start_ms(served.start_ms);
  good.set_end_ms(served.end_ms);
  const auto refused = [&](v1::CreateEvaluationRequest req, absl::StatusCode code,
                           const std::string& says) {
    v1::Evaluation out;
    const absl::Status s = svc.CreateEvaluation(req, &out);
    EXPECT_EQ(s.code(), code) << s;
    EXPECT_NE(s.message().find(says), std::string::npos) << s;
  };
  auto req = good;
  req.set_end_ms(good.start_ms());
  refused(req, absl::StatusCode::kInvalidArgument, "expected a time after start_ms");
  req = good;
  req.set_name("");
  refused(req, absl::StatusCode::kInvalidArgument, "name is empty");
  req = good;
  for (int i = 0; i < 2; ++i) {
    auto* p = req.add_policies();
    p->set_name("same");
    p->set_arguments(kCustom);
  }
  refused(req, absl::StatusCode::kInvalidArgument, "expected distinct names");
  req = good;
  auto* p = req.add_policies();
  p->set_name("bad");
  p->set_arguments("--cb_explore_adf --no_such_flag");
  refused(req, absl::StatusCode::kInvalidArgument, "--no_such_flag");
  req = good;
  req.set_start_ms(served.end_ms + 1000);
  req.set_end_ms(served.end_ms + 2000);
  refused(req, absl::StatusCode::kFailedPrecondition, "logged no decision");
  req = good;
  req.set_instance("nope");
  refused(req, absl::StatusCode::kNotFound, "nope");
  req = good;
  req.set_id("bad id!");
  refused(req, absl::StatusCode::kInvalidArgument, "id");
  v1::ListEvaluationsRequest list;
  list.set_instance("v");
  v1::ListEvaluationsResponse listed;
  ASSERT_TRUE(svc.ListEvaluations(list, &listed).ok());
  EXPECT_EQ(listed.evaluations_size(), 0);
  // A caller's id is kept, and taken once.
  req = good;
  req.set_id("mine-1");
  v1::Evaluation out;
  ASSERT_TRUE(svc.CreateEvaluation(req, &out).ok());
  EXPECT_EQ(out.id(), "mine-1");
  refused(req, absl::StatusCode::kAlreadyExists, "mine-1");
  v1::GetEvaluationRequest get;
  get.set_instance("v");
  get.set_id("other");
  EXPECT_EQ(svc.GetEvaluation(get, &out).code(), absl::StatusCode::kNotFound);
}

// An evaluation journaled pending whose job never ran (the node stopped first) runs when the
// journal is recovered, from the start, and says it was restarted; its result survives the
// next restart as it was recorded.
TEST(Evaluation, AJobARestartInterruptedRunsAgainFromTheJournal) {
  FaultInjectionFs fs;
  ManualClock clock;
  std::string id;
  Served served;
  {
    testing::FileNode node(&fs, &clock);
    DecisionService& svc = node.svc;
    served = Serve(svc, clock, 50);
    v1::CreateEvaluationRequest req;  // no runner attached: it stays pending
    req.set_instance("v");
    req.set_name("interrupted");
    req.set_start_ms(served.start_ms);
    req.set_end_ms(served.end_ms);
    v1::Evaluation out;
    ASSERT_TRUE(svc.CreateEvaluation(req, &out).ok());
    id = out.id();
    ASSERT_TRUE(node.persistence->storage()->Flush().ok());
  }
  v1::Evaluation finished;
  {
    testing::FileNode node(&fs, &clock);
    DecisionService& svc = node.svc;
    v1::GetEvaluationRequest get;
    get.set_instance("v");
    get.set_id(id);
    ASSERT_TRUE(svc.GetEvaluation(get, &finished).ok());
    EXPECT_EQ(finished.status(), v1::EVALUATION_PENDING);
    EvaluationRunner runner(&svc, 2);
    svc.SetEvaluationJobs(runner.Jobs());
    EXPECT_EQ(svc.ResumeEvaluations(), 1);
    runner.WaitIdle();
    ASSERT_TRUE(svc.GetEvaluation(get, &finished).ok());
    EXPECT_EQ(finished.status(), v1::EVALUATION_COMPLETED) << finished.error();
    EXPECT_TRUE(finished.restarted());
    ExpectNear(ResultOf(finished, "Online")->total().ips_numerator(), served.online, "online");
    svc.SetEvaluationJobs({});
    ASSERT_TRUE(node.persistence->storage()->Flush().ok());
  }
  testing::FileNode node(&fs, &clock);
  DecisionService& svc = node.svc;
  v1::GetEvaluationRequest get;
  get.set_instance("v");
  get.set_id(id);
  v1::Evaluation again;
  ASSERT_TRUE(svc.GetEvaluation(get, &again).ok());
  EXPECT_EQ(again.SerializeAsString(), finished.SerializeAsString());
  // A snapshot export holds it too.
  v1::ExportInstanceRequest ex;
  ex.set_name("v");
  v1::ExportInstanceResponse snapshot;
  ASSERT_TRUE(svc.ExportInstance(ex, &snapshot).ok());
  v1::ImportInstanceRequest im;
  im.set_name("w");
  im.set_snapshot(snapshot.snapshot());
  v1::Instance imported;
  ASSERT_TRUE(svc.ImportInstance(im, &imported).ok());
  get.set_instance("w");
  ASSERT_TRUE(svc.GetEvaluation(get, &again).ok());
  EXPECT_EQ(again.SerializeAsString(), finished.SerializeAsString());
}

// A log that never explored (a deterministic policy) says so instead of a confident number.
TEST(Evaluation, ALogThatNeverExploredIsFlagged) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("v", "policy { vw { arguments: '--cb_adf -q UA -b 12' } } "
                                             "decision_log { enabled: true }"),
                                 &out)
                  .ok());
  const int64_t start = clock.NowMs();
  for (int round = 0; round < 30; ++round) {
    v1::Decision d;
    ASSERT_TRUE(svc.Select(testing::VwRound(round), &d).ok());
    v1::UpdateRequest u;
    u.set_instance("v");
    u.set_event_id(d.event_id());
    u.set_reward(RewardOf(round, d.arm_index()));
    v1::UpdateResponse resp;
    ASSERT_TRUE(svc.Update(u, &resp).ok());
    clock.Advance(1000);
  }
  EvaluationRunner runner(&svc, 1);
  svc.SetEvaluationJobs(runner.Jobs());
  v1::CreateEvaluationRequest req;
  req.set_instance("v");
  req.set_name("greedy");
  req.set_start_ms(start);
  req.set_end_ms(clock.NowMs());
  v1::Evaluation e;
  ASSERT_TRUE(svc.CreateEvaluation(req, &e).ok());
  runner.WaitIdle();
  v1::GetEvaluationRequest get;
  get.set_instance("v");
  get.set_id(e.id());
  ASSERT_TRUE(svc.GetEvaluation(get, &e).ok());
  ASSERT_EQ(e.status(), v1::EVALUATION_COMPLETED);
  ASSERT_EQ(e.warnings_size(), 1);
  EXPECT_NE(e.warnings(0).find("did not explore"), std::string::npos);
  // Uniform choice agrees with the greedy choice only where it took the same action.
  EXPECT_LT(ResultOf(e, "Random")->total().non_zero_probability(), 1.0 + 1e-12);
}

// A job holds its policies' learners inside the node's memory budget: one that does not fit
// fails and says so (serving keeps its room), and gives back what it held either way.
TEST(Evaluation, AJobThatDoesNotFitTheMemoryBudgetFailsSayingSo) {
  ManualClock clock;
  ServiceLimits limits;
  limits.max_memory_bytes = 12 << 20;
  DecisionService svc(&clock, limits);
  const Served served = Serve(svc, clock, 20);
  EvaluationRunner runner(&svc, 1);
  svc.SetEvaluationJobs(runner.Jobs());
  v1::CreateEvaluationRequest req;
  req.set_instance("v");
  req.set_name("too big");
  req.set_start_ms(served.start_ms);
  req.set_end_ms(served.end_ms);
  // 2^22 weights of 4 floats: 64 MiB for the learner alone.
  auto* p = req.add_policies();
  p->set_name("wide");
  p->set_arguments("--cb_explore_adf -q UA -b 22");
  v1::Evaluation e;
  ASSERT_TRUE(svc.CreateEvaluation(req, &e).ok());
  runner.WaitIdle();
  v1::GetEvaluationRequest get;
  get.set_instance("v");
  get.set_id(e.id());
  ASSERT_TRUE(svc.GetEvaluation(get, &e).ok());
  EXPECT_EQ(e.status(), v1::EVALUATION_FAILED);
  EXPECT_NE(e.error().find("memory budget"), std::string::npos) << e.error();
  EXPECT_EQ(svc.memory()->used(MemoryKind::kEvaluation), 0);
  EXPECT_EQ(svc.memory()->refusals(MemoryOp::kEvaluation), 1);
  // One that fits runs, and gives its bytes back.
  req.clear_policies();
  p = req.add_policies();
  p->set_name("narrow");
  p->set_arguments(kCustom);
  ASSERT_TRUE(svc.CreateEvaluation(req, &e).ok());
  runner.WaitIdle();
  get.set_id(e.id());
  ASSERT_TRUE(svc.GetEvaluation(get, &e).ok());
  EXPECT_EQ(e.status(), v1::EVALUATION_COMPLETED) << e.error();
  EXPECT_EQ(svc.memory()->used(MemoryKind::kEvaluation), 0);
  v1::GetInstanceRequest which;
  which.set_name("v");
  v1::Instance instance;
  ASSERT_TRUE(svc.GetInstance(which, &instance).ok());
  EXPECT_GT(EvaluationJobBytes(e, instance.config()), 2 * DecisionService::kDecisionLogChunkBytes);
}

// SetLearningPolicy with train_on_log: the served policy becomes the learner of the new
// arguments, taught the log's rewarded decisions in order as VW learns logged examples: after
// it, every Select's probabilities are those of a twin taught the same decisions here; the
// change is one journal record that recovery replays into the same instance. Refused: arguments
// the learner refuses.
TEST(LearningPolicy, ReplacedByALearnerTrainedOnTheLog) {
  FaultInjectionFs fs;
  ManualClock clock;
  std::string live;
  {
    testing::FileNode node(&fs, &clock);
    DecisionService& svc = node.svc;
    // Serve() teaches a twin of kCustom every decision as logged: the trained learner must be
    // that twin.
    const Served served = Serve(svc, clock, 120);
    v1::SetLearningPolicyRequest req;
    req.set_name("v");
    req.set_arguments("--cb_explore_adf --no_such_flag");
    req.set_train_on_log(true);
    v1::Instance out;
    EXPECT_EQ(svc.SetLearningPolicy(req, &out).code(), absl::StatusCode::kInvalidArgument);
    const std::string before = testing::Exported(svc, "v");
    EXPECT_EQ(testing::Exported(svc, "v"), before);  // refusals changed nothing
    req.set_arguments(kCustom);
    ASSERT_TRUE(svc.SetLearningPolicy(req, &out).ok());
    EXPECT_EQ(out.config().policy().vw().arguments(), kCustom);
    auto space = *features::FeatureSpace::Create(served.twin->options().space);
    for (int round = 500; round < 510; ++round) {
      const v1::SelectRequest select = testing::VwRound(round);
      v1::Decision d;
      ASSERT_TRUE(svc.Select(select, &d).ok());
      vw::CbLearner::Prediction p;
      served.twin->Predict(testing::VwVectors(space, select), &p);
      ASSERT_EQ(d.ranking_size(), 4);
      for (const auto& r : d.ranking())
        EXPECT_FLOAT_EQ(static_cast<float>(r.probability()), p.pmf[r.id().back() - '0']) << round;
    }
    live = testing::Exported(svc, "v");
    ASSERT_TRUE(node.persistence->storage()->Flush().ok());
  }
  testing::FileNode node(&fs, &clock);
  DecisionService& restarted = node.svc;
  EXPECT_EQ(testing::Exported(restarted, "v"), live);
}

// Learning settings of another feature space (other interactions and bits): the decisions are
// hashed into the new one from then on (the explanation's terms and indices say so), a decision
// pending from before is rewarded but not learned (its vectors were the old space's: the
// learned state is the same with or without its reward), recovery replays the change, and an
// instance with shadows (which learn from its decisions' vectors) refuses it.
TEST(LearningPolicy, ReplacedByOneOfAnotherFeatureSpace) {
  FaultInjectionFs fs;
  ManualClock clock;
  std::string live;
  constexpr char kWider[] = "--cb_explore_adf --epsilon 0.1 -q UA -q AA -b 14";
  {
    testing::FileNode node(&fs, &clock);
    DecisionService& svc = node.svc;
    Serve(svc, clock, 60);
    v1::Decision waiting;
    ASSERT_TRUE(svc.Select(testing::VwRound(60), &waiting).ok());
    v1::Instance out;
    v1::AddShadowRequest shadow;
    shadow.set_name("v");
    shadow.set_shadow("twin");
    shadow.mutable_config()->mutable_policy()->mutable_vw()->set_arguments(kServed);
    ASSERT_TRUE(svc.AddShadow(shadow, &out).ok());
    v1::SetLearningPolicyRequest req;
    req.set_name("v");
    req.set_arguments(kWider);
    req.set_train_on_log(true);
    const std::string before = testing::Exported(svc, "v");
    const absl::Status refused = svc.SetLearningPolicy(req, &out);
    EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(refused.message().find("shadows"), std::string::npos) << refused;
    EXPECT_EQ(testing::Exported(svc, "v"), before);
    v1::RemoveShadowRequest remove;
    remove.set_name("v");
    remove.set_shadow("twin");
    ASSERT_TRUE(svc.RemoveShadow(remove, &out).ok());
    ASSERT_TRUE(svc.SetLearningPolicy(req, &out).ok());
    EXPECT_EQ(out.config().feature_space().bits(), 14);
    ASSERT_EQ(out.config().feature_space().interactions_size(), 2);
    // The pending decision's reward: accepted, not learned.
    const v1::InstanceSnapshot a = testing::SnapshotOf(svc, "v");
    v1::UpdateRequest u;
    u.set_instance("v");
    u.set_event_id(waiting.event_id());
    u.set_reward(1.0);
    v1::UpdateResponse updated;
    ASSERT_TRUE(svc.Update(u, &updated).ok());
    const v1::InstanceSnapshot b = testing::SnapshotOf(svc, "v");
    EXPECT_EQ(a.policy().SerializeAsString(), b.policy().SerializeAsString());
    EXPECT_EQ(b.stats().updates(), a.stats().updates() + 1);
    // New decisions: hashed into 2^14 with the action-action terms.
    v1::SelectRequest select = testing::VwRound(61);
    select.set_explain(true);
    v1::Decision d;
    ASSERT_TRUE(svc.Select(select, &d).ok());
    bool action_pair = false;
    for (const auto& term : d.explanation()) {
      EXPECT_LT(term.index(), 1u << 14);
      action_pair |= term.name().rfind("Action^", 0) == 0 &&
                     term.name().find("*Action^") != std::string::npos;
    }
    EXPECT_TRUE(action_pair);
    // An instance over its own arms takes no named actions: a vw learner cannot replace it.
    ASSERT_TRUE(svc.CreateInstance(Create("arms", "policy { epsilon_greedy { epsilon: 0.1 } "
                                                  "num_arms: 3 } decision_log { enabled: true }"),
                                   &out)
                    .ok());
    req.set_name("arms");
    const std::string arms_before = testing::Exported(svc, "arms");
    const absl::Status other_kind = svc.SetLearningPolicy(req, &out);
    EXPECT_EQ(other_kind.code(), absl::StatusCode::kFailedPrecondition) << other_kind;
    EXPECT_EQ(testing::Exported(svc, "arms"), arms_before);
    live = testing::Exported(svc, "v");
    ASSERT_TRUE(node.persistence->storage()->Flush().ok());
  }
  testing::FileNode node(&fs, &clock);
  EXPECT_EQ(testing::Exported(node.svc, "v"), live);
}

TEST(Evaluation, WindowsAndTheirIsoNames) {
  EXPECT_EQ(EvaluationWindowMs(0, 60'000), 5 * 60'000);
  EXPECT_EQ(EvaluationWindowMs(0, 64 * 5 * 60'000), 5 * 60'000);
  EXPECT_EQ(EvaluationWindowMs(0, 64 * 5 * 60'000 + 1), 15 * 60'000);
  EXPECT_EQ(EvaluationWindowMs(0, int64_t{30} * 24 * 3'600'000), 24 * 3'600'000);
  EXPECT_EQ(EvaluationWindowMs(0, int64_t{365} * 24 * 3'600'000), 7 * 24 * 3'600'000);
  EXPECT_EQ(IsoDuration(5 * 60'000), "PT5M");
  EXPECT_EQ(IsoDuration(3'600'000), "PT1H");
  EXPECT_EQ(IsoDuration(6 * 3'600'000), "PT6H");
  EXPECT_EQ(IsoDuration(24 * 3'600'000), "P1D");
  EXPECT_EQ(IsoDuration(7 * 24 * 3'600'000), "P7D");
}

}  // namespace BANDIT_UNITY_ID
}  // namespace bandit::server
