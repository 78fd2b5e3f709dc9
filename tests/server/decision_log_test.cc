// The decision log: what it holds (the served decision, its real propensity and probability
// vector, its outcome), retention, that it changes no decision, the DSJSON export read back by
// an independent JSON reader, crash recovery in `always` mode (nothing acknowledged is missing),
// and refused requests.
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <future>
#include <map>
#include <span>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cpp/decision_log_format.h"
#include "server/instance/instance.h"
#include "server/service/decision_service.h"
#include "server/service/persistence.h"
#include "server/storage/file_storage.h"
#include "tests/server/fault_injection_fs.h"
#include "tests/server/file_node.h"
#include "tests/server/server_test_util.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

namespace v1 = bandit::v1;
using absl::StatusCode;
using google::protobuf::util::MessageDifferencer;
using testing::Create;

constexpr char kGlmEps[] =
    "policy { glm_epsilon_greedy { dimension: 3 link: GAUSSIAN epsilon: 0.3 } } seed: 11 "
    "pending { reward_wait_ms: 1000 default_reward: 0.25 } decision_log { enabled: true }";

std::vector<v1::LoggedDecision> ExportAll(DecisionService& svc, const std::string& name,
                                          v1::ExportDecisionLogRequest req = {}) {
  req.set_name(name);
  std::vector<v1::LoggedDecision> out;
  DecisionService::DecisionLogCursor cursor;
  for (bool done = false; !done;) {
    v1::DecisionLogChunk chunk;
    absl::Status s = svc.ReadDecisionLog(req, &cursor, &chunk, &done);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) break;
    for (const auto& d : chunk.decisions()) out.push_back(d);
  }
  return out;
}

v1::SelectRequest CandidateSelect(const std::string& name, int round) {
  v1::SelectRequest sel;
  sel.set_instance(name);
  for (int c = 0; c < 3; ++c) {
    auto* v = sel.add_candidates();
    for (int k = 0; k < 3; ++k) v->add_values(0.5 * std::sin(0.7 * round + 1.3 * c + 0.4 * k));
  }
  return sel;
}

// 30 rounds: even rounds rewarded, odd ones left to expire with the default reward.
std::vector<v1::Decision> PlayCandidates(DecisionService& svc, ManualClock& clock,
                                         const std::string& name) {
  std::vector<v1::Decision> decisions;
  for (int i = 0; i < 30; ++i) {
    v1::Decision d;
    {
      auto s = svc.Select(CandidateSelect(name, i), &d);
      EXPECT_TRUE(s.ok()) << s;
    }
    decisions.push_back(d);
    clock.Advance(10);
    if (i % 2 == 0) {
      v1::UpdateRequest up;
      up.set_instance(name);
      up.set_event_id(d.event_id());
      up.set_reward(0.1 * i);
      v1::UpdateResponse r;
      EXPECT_TRUE(svc.Update(up, &r).ok());
    }
  }
  clock.Advance(2000);
  svc.ExpireAll();
  return decisions;
}

TEST(DecisionLog, HoldsEveryDecisionWithItsPropensityProbabilitiesAndOutcome) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("c", kGlmEps), &out).ok());
  const int64_t t0 = clock.NowMs();
  const auto decisions = PlayCandidates(svc, clock, "c");
  const auto log = ExportAll(svc, "c");
  ASSERT_EQ(log.size(), decisions.size());
  for (size_t i = 0; i < log.size(); ++i) {
    const auto& d = log[i];
    SCOPED_TRACE(i);
    EXPECT_EQ(d.event_id(), decisions[i].event_id());
    EXPECT_EQ(d.event_seq(), i + 1);
    EXPECT_EQ(d.decided_at_ms(), t0 + 10 * static_cast<int64_t>(i));
    EXPECT_EQ(d.policy(), "glm_epsilon_greedy");
    EXPECT_EQ(d.chosen_index(), decisions[i].arm_index());
    ASSERT_TRUE(d.has_propensity());
    EXPECT_EQ(d.propensity(), decisions[i].propensity());
    // epsilon-greedy over 3 candidates: 0.1 each plus 0.7 on the greedy one.
    ASSERT_EQ(d.probabilities_size(), 3);
    double sum = 0;
    for (double p : d.probabilities()) sum += p;
    EXPECT_NEAR(sum, 1.0, 1e-12);
    EXPECT_EQ(d.probabilities(d.chosen_index()), d.propensity());
    EXPECT_EQ(d.num_candidates(), 3);
    EXPECT_EQ(d.candidate_dim(), 3);
    const v1::SelectRequest sel = CandidateSelect("c", static_cast<int>(i));
    for (int c = 0; c < 3; ++c)
      for (int k = 0; k < 3; ++k) EXPECT_EQ(d.candidates(c * 3 + k), sel.candidates(c).values(k));
    if (i % 2 == 0) {
      EXPECT_EQ(d.outcome(), v1::OUTCOME_REWARDED);
      EXPECT_EQ(d.reward(), 0.1 * static_cast<double>(i));
      EXPECT_EQ(d.outcome_at_ms(), d.decided_at_ms() + 10);
    } else {
      EXPECT_EQ(d.outcome(), v1::OUTCOME_EXPIRED_DEFAULT);
      EXPECT_EQ(d.reward(), 0.25);
    }
    // The log does not leak into the response: scores only when asked for.
    EXPECT_EQ(decisions[i].scores_size(), 0);
  }
  v1::GetInstanceRequest g;
  g.set_name("c");
  ASSERT_TRUE(svc.GetInstance(g, &out).ok());
  EXPECT_EQ(out.stats().decision_log_events(), 30);
  int64_t bytes = 0;
  for (const auto& d : log) bytes += static_cast<int64_t>(d.ByteSizeLong());
  EXPECT_EQ(out.stats().decision_log_bytes(), bytes);
}

// An instance whose snapshot (log included) would not fit in one gRPC message is refused by
// ExportInstance with RESOURCE_EXHAUSTED naming the size, the limit and the way out, rather than
// failing in gRPC's send path; below the limit it exports, and the import carries the log.
TEST(DecisionLog, ExportInstanceBeyondTheMessageLimitIsRefusedWithTheWayOut) {
  ManualClock clock;
  ServiceLimits limits;
  limits.max_message_bytes = 32 << 10;
  DecisionService svc(&clock, limits);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("c", kGlmEps), &out).ok());
  v1::ExportInstanceRequest req;
  req.set_name("c");
  // 30 decisions of 3 x 3 candidates at a time until the export no longer fits.
  int plays = 0;
  absl::Status refused;
  v1::ExportInstanceResponse big;
  for (; plays < 50 && refused.ok(); ++plays) {
    PlayCandidates(svc, clock, "c");
    big.Clear();
    refused = svc.ExportInstance(req, &big);
    if (refused.ok()) {
      EXPECT_LT(big.ByteSizeLong(), size_t{32} << 10);
    }
  }
  ASSERT_GT(plays, 1) << "the first 30 decisions should fit";
  ASSERT_EQ(refused.code(), StatusCode::kResourceExhausted) << refused;
  const std::vector<v1::LoggedDecision> before = ExportAll(svc, "c");
  ASSERT_EQ(before.size(), 30u * plays);
  for (const std::string& part :
       {std::string("instance 'c'"), std::string("32768 bytes"), std::string("--max_message_bytes"),
        absl::StrCat(30 * plays, " decisions"), std::string("ExportDecisionLog"),
        std::string("decision_log.max_events")}) {
    EXPECT_NE(refused.message().find(part), std::string::npos) << part << " in " << refused;
  }
  EXPECT_TRUE(big.snapshot().empty());
  // Nothing changed: the log is whole.
  const std::vector<v1::LoggedDecision> after = ExportAll(svc, "c");
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_TRUE(MessageDifferencer::Equals(after[i], before[i])) << i;
  }

  // The same instance from a server with the default limit: exported and imported with its log.
  DecisionService roomy(&clock);
  ASSERT_TRUE(roomy.CreateInstance(Create("c", kGlmEps), &out).ok());
  for (int i = 0; i < plays; ++i) PlayCandidates(roomy, clock, "c");
  ASSERT_TRUE(roomy.ExportInstance(req, &big).ok());
  EXPECT_GT(big.snapshot().size(), size_t{32} << 10);
  v1::ImportInstanceRequest imp;
  imp.set_name("copy");
  imp.set_snapshot(big.snapshot());
  ASSERT_TRUE(roomy.ImportInstance(imp, &out).ok());
  EXPECT_EQ(ExportAll(roomy, "copy").size(), 30u * plays);
}

// Snapshot scheduling: the change count alone triggers a snapshot of an instance without a log;
// one with a log waits until its log took in kLogGrowthPerSnapshot times what the last stored
// snapshot held (rewriting the whole log each time cost more than journaling it).
TEST(DecisionLog, AChangeCountSnapshotWaitsUntilTheLogGrewByItsFactor) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("logged", kGlmEps), &out).ok());
  std::string plain_config = kGlmEps;
  plain_config.erase(plain_config.find(" decision_log"));
  ASSERT_TRUE(svc.CreateInstance(Create("plain", plain_config), &out).ok());
  auto logged = svc.registry().Get("logged");
  auto plain = svc.registry().Get("plain");
  ASSERT_TRUE(logged.ok() && plain.ok());
  PlayCandidates(svc, clock, "logged");
  PlayCandidates(svc, clock, "plain");
  for (auto* inst : {&*logged, &*plain}) {
    int64_t covered = 0;
    (void)(*inst)->Snapshot(&covered);
    (*inst)->MarkSnapshotted(covered);
    EXPECT_FALSE((*inst)->SnapshotDue(1));  // nothing changed since
  }
  const int64_t held = (*logged)->Stats(nullptr).decision_log_bytes();
  ASSERT_GT(held, 0);
  // Rounds until the log took in 4 x `held` bytes: due exactly from then on (the plain
  // instance from its first change).
  int64_t appended = 0;
  for (int round = 0; appended < Instance::kLogGrowthPerSnapshot * held; ++round) {
    ASSERT_LT(round, 10000);
    EXPECT_FALSE((*logged)->SnapshotDue(1)) << "round " << round << ", " << appended << " of "
                                            << Instance::kLogGrowthPerSnapshot * held << " bytes";
    const int64_t before = (*logged)->Stats(nullptr).decision_log_bytes();
    v1::Decision d;
    ASSERT_TRUE(svc.Select(CandidateSelect("logged", round), &d).ok());
    appended += (*logged)->Stats(nullptr).decision_log_bytes() - before;  // no retention here
    ASSERT_TRUE(svc.Select(CandidateSelect("plain", round), &d).ok());
    EXPECT_TRUE((*plain)->SnapshotDue(1));
  }
  EXPECT_TRUE((*logged)->SnapshotDue(1));
  EXPECT_FALSE((*logged)->SnapshotDue(1'000'000));  // the change count still applies
  // Once stored, the next one waits for 4 x the (larger) log again.
  int64_t covered = 0;
  (void)(*logged)->Snapshot(&covered);
  (*logged)->MarkSnapshotted(covered);
  v1::Decision d;
  ASSERT_TRUE(svc.Select(CandidateSelect("logged", 0), &d).ok());
  EXPECT_FALSE((*logged)->SnapshotDue(1));
}

TEST(DecisionLog, ExportFiltersByTimeAndResumesAfterAnEventSeq) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("c", kGlmEps), &out).ok());
  const int64_t t0 = clock.NowMs();
  PlayCandidates(svc, clock, "c");
  v1::ExportDecisionLogRequest req;
  req.set_since_ms(t0 + 50);
  req.set_until_ms(t0 + 100);
  auto part = ExportAll(svc, "c", req);
  ASSERT_EQ(part.size(), 5u);  // decided at t0+50 .. t0+90
  EXPECT_EQ(part.front().event_seq(), 6u);
  req.Clear();
  req.set_after_event_seq(27);
  part = ExportAll(svc, "c", req);
  ASSERT_EQ(part.size(), 3u);
  EXPECT_EQ(part.front().event_seq(), 28u);
  req.Clear();
  req.set_max_events(4);
  EXPECT_EQ(ExportAll(svc, "c", req).size(), 4u);
}

TEST(DecisionLog, RetentionKeepsTheNewestWithinEventsAndAgeAndCountsTheDropped) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("n",
                                        "policy { epsilon_greedy { epsilon: 0.2 } num_arms: 3 } "
                                        "decision_log { enabled: true max_events: 5 }"),
                                 &out)
                  .ok());
  for (int i = 0; i < 8; ++i) {
    v1::SelectRequest sel;
    sel.set_instance("n");
    v1::Decision d;
    ASSERT_TRUE(svc.Select(sel, &d).ok());
  }
  auto log = ExportAll(svc, "n");
  ASSERT_EQ(log.size(), 5u);
  EXPECT_EQ(log.front().event_seq(), 4u);
  EXPECT_EQ(log.back().event_seq(), 8u);
  EXPECT_EQ(log.front().arm_ids_size(), 3);
  v1::GetInstanceRequest g;
  g.set_name("n");
  ASSERT_TRUE(svc.GetInstance(g, &out).ok());
  EXPECT_EQ(out.stats().decision_log_evicted(), 3);

  ASSERT_TRUE(svc.CreateInstance(Create("a",
                                        "policy { epsilon_greedy { epsilon: 0.2 } num_arms: 3 } "
                                        "decision_log { enabled: true max_age_ms: 1000 }"),
                                 &out)
                  .ok());
  for (int i = 0; i < 3; ++i) {
    v1::SelectRequest sel;
    sel.set_instance("a");
    v1::Decision d;
    ASSERT_TRUE(svc.Select(sel, &d).ok());
    clock.Advance(600);
  }
  // Decided at t, t+600, t+1200: at t+1200 the first is older than 1000 ms.
  log = ExportAll(svc, "a");
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log.front().event_seq(), 2u);
}

// Turning the log on changes no decision: each policy decides exactly like a twin without it.
TEST(DecisionLog, DecisionsAreIdenticalWithTheLogOnOrOff) {
  const std::vector<std::string> configs = {
      "policy { epsilon_greedy { epsilon: 0.3 } num_arms: 4 } seed: 5",
      "policy { thompson { } num_arms: 4 } seed: 5",
      "policy { thompson { propensity_method: MONTE_CARLO propensity_samples: 50 } num_arms: 4 } "
      "seed: 5",
      "policy { glm_epsilon_greedy { dimension: 3 link: GAUSSIAN epsilon: 0.3 } } seed: 5",
      "policy { linucb { dimension: 3 } } seed: 5",
  };
  for (const auto& config : configs) {
    SCOPED_TRACE(config);
    ManualClock clock;
    DecisionService svc(&clock);
    v1::Instance out;
    ASSERT_TRUE(svc.CreateInstance(Create("off", config), &out).ok());
    ASSERT_TRUE(
        svc.CreateInstance(Create("on", config + " decision_log { enabled: true }"), &out).ok());
    const bool candidates = config.find("num_arms") == std::string::npos;
    for (int i = 0; i < 60; ++i) {
      v1::Decision d[2];
      const char* names[2] = {"off", "on"};
      for (int k = 0; k < 2; ++k) {
        v1::SelectRequest sel = candidates ? CandidateSelect(names[k], i) : v1::SelectRequest();
        sel.set_instance(names[k]);
        ASSERT_TRUE(svc.Select(sel, &d[k]).ok());
        v1::UpdateRequest up;
        up.set_instance(names[k]);
        up.set_event_id(d[k].event_id());
        up.set_reward(0.08 * ((i * 37) % 10) + 0.05 * d[k].arm_index());
        v1::UpdateResponse r;
        ASSERT_TRUE(svc.Update(up, &r).ok());
      }
      ASSERT_EQ(d[0].arm_index(), d[1].arm_index()) << "round " << i;
      ASSERT_EQ(d[0].propensity(), d[1].propensity()) << "round " << i;
    }
    const auto log = ExportAll(svc, "on");
    ASSERT_EQ(log.size(), 60u);
    for (const auto& e : log) {
      // Probability vectors where the policy has one, one-hot for the deterministic LinUCB.
      ASSERT_EQ(e.probabilities_size(), e.num_actions()) << e.policy();
      EXPECT_NEAR(e.probabilities(e.chosen_index()), e.propensity(), 1e-12);
    }
  }
}

// Thompson sampling's log keeps the posteriors each decision drew from (not the probability
// vector, a quadrature per arm) and the export computes the vector from them: the posteriors
// must be the conjugate ones counted here from the rewards sent, and the exported vector must
// equal, bit for bit, what a twin instance without the log returned when asked for its scores
// at each Select (the same decisions: same seed and rewards).
TEST(DecisionLog, ThompsonKeepsItsPosteriorsAndTheExportComputesTheirProbabilities) {
  for (const bool gaussian : {false, true}) {
    SCOPED_TRACE(gaussian ? "gaussian" : "bernoulli");
    const std::string config =
        gaussian ? "policy { thompson { likelihood: GAUSSIAN prior_variance: 4 "
                   "noise_variance: 0.25 } num_arms: 5 } seed: 9"
                 : "policy { thompson { prior_alpha: 2 prior_beta: 3 } num_arms: 5 } seed: 9";
    ManualClock clock;
    DecisionService svc(&clock);
    v1::Instance out;
    ASSERT_TRUE(svc.CreateInstance(Create("twin", config), &out).ok());
    ASSERT_TRUE(
        svc.CreateInstance(Create("on", config + " decision_log { enabled: true }"), &out).ok());
    std::vector<double> counts(5, 0.0), sums(5, 0.0);  // rewards per arm before each decision
    std::vector<std::vector<double>> want_first, want_second, twin_scores;
    std::vector<double> twin_propensity;
    for (int i = 0; i < 80; ++i) {
      v1::Decision d[2];
      const char* names[2] = {"twin", "on"};
      std::vector<double> first(5), second(5);
      for (int a = 0; a < 5; ++a) {
        if (gaussian) {
          // Normal-Normal (prior N(0, 4), noise variance 0.25): precision 1/4 + n/0.25.
          const double v = 1.0 / (1.0 / 4 + counts[a] / 0.25);
          first[a] = v * (sums[a] / 0.25), second[a] = std::sqrt(v);
        } else {
          first[a] = 2 + sums[a], second[a] = 3 + counts[a] - sums[a];
        }
      }
      want_first.push_back(first);
      want_second.push_back(second);
      const double reward =
          gaussian ? 0.3 * ((i * 7) % 5) - 0.4 : static_cast<double>((i * 7) % 10 < 4);
      for (int k = 0; k < 2; ++k) {
        v1::SelectRequest sel;
        sel.set_instance(names[k]);
        sel.set_return_scores(k == 0);
        ASSERT_TRUE(svc.Select(sel, &d[k]).ok());
        v1::UpdateRequest up;
        up.set_instance(names[k]);
        up.set_event_id(d[k].event_id());
        up.set_reward(reward);
        v1::UpdateResponse r;
        ASSERT_TRUE(svc.Update(up, &r).ok());
      }
      ASSERT_EQ(d[0].arm_index(), d[1].arm_index()) << "round " << i;
      ASSERT_EQ(d[0].propensity(), d[1].propensity()) << "round " << i;
      EXPECT_EQ(d[1].scores_size(), 0);  // the logged instance was not asked for scores
      twin_scores.emplace_back(d[0].scores().begin(), d[0].scores().end());
      twin_propensity.push_back(d[0].propensity());
      counts[d[0].arm_index()] += 1;
      sums[d[0].arm_index()] += reward;
    }
    const auto log = ExportAll(svc, "on");
    ASSERT_EQ(log.size(), 80u);
    for (size_t i = 0; i < log.size(); ++i) {
      SCOPED_TRACE(i);
      const v1::LoggedDecision& e = log[i];
      ASSERT_TRUE(e.has_posteriors());
      EXPECT_EQ(e.posteriors().family(),
                gaussian ? v1::ArgmaxPosteriors::NORMAL : v1::ArgmaxPosteriors::BETA);
      ASSERT_EQ(e.posteriors().first_size(), 5);
      ASSERT_EQ(e.posteriors().second_size(), 5);
      for (int a = 0; a < 5; ++a) {
        EXPECT_NEAR(e.posteriors().first(a), want_first[i][a], 1e-12) << "arm " << a;
        EXPECT_NEAR(e.posteriors().second(a), want_second[i][a], 1e-12) << "arm " << a;
      }
      ASSERT_EQ(e.probabilities_size(), 5);
      ASSERT_EQ(twin_scores[i].size(), 5u);
      for (int a = 0; a < 5; ++a) EXPECT_EQ(e.probabilities(a), twin_scores[i][a]) << "arm " << a;
      EXPECT_EQ(e.propensity(), twin_propensity[i]);
    }
  }
}

// Runs `script` with /usr/bin/python3 on `input`; returns its standard output.
std::string RunPython(const std::string& script, const std::string& input_path) {
  const std::string cmd = absl::StrCat("/usr/bin/python3 -c '", script, "' ", input_path);
  FILE* p = popen(cmd.c_str(), "r");
  EXPECT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0);
  return out;
}

TEST(DecisionLog, DsjsonExportReadsBackThroughAnIndependentJsonReader) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("c", kGlmEps), &out).ok());
  PlayCandidates(svc, clock, "c");
  // Also one decision that never gets a reward (dropped, so unlabeled in DSJSON).
  ASSERT_TRUE(svc.CreateInstance(Create("arms",
                                        "policy { epsilon_greedy { epsilon: 0.5 } num_arms: 3 } "
                                        "pending { on_expiry: DROP reward_wait_ms: 5 } "
                                        "decision_log { enabled: true }"),
                                 &out)
                  .ok());
  v1::SelectRequest sel;
  sel.set_instance("arms");
  v1::Decision dropped;
  ASSERT_TRUE(svc.Select(sel, &dropped).ok());
  clock.Advance(10);
  svc.ExpireAll();

  std::vector<v1::LoggedDecision> log = ExportAll(svc, "c");
  const auto arms_log = ExportAll(svc, "arms");
  ASSERT_EQ(arms_log.size(), 1u);
  EXPECT_EQ(arms_log[0].outcome(), v1::OUTCOME_EXPIRED_DROPPED);
  const std::string path = ::testing::TempDir() + "/decision_log.dsjson";
  {
    std::ofstream f(path);
    for (const auto& d : log)
      f << client::FormatDecision(client::LogFormat::kDsjson, d, "c") << "\n";
    f << client::FormatDecision(client::LogFormat::kDsjson, arms_log[0], "arms") << "\n";
  }
  log.push_back(arms_log[0]);
  // Python's json module reads every line; it prints the fields VW reads, one line per event,
  // floats by repr (which round-trips exactly).
  const std::string script =
      "import json, sys\n"
      "for line in open(sys.argv[1]):\n"
      "    j = json.loads(line)\n"
      "    lab = \"_label_cost\" in j\n"
      "    f = [j[\"EventId\"], j[\"Timestamp\"], j[\"Version\"], str(len(j[\"a\"]))]\n"
      "    f += [str(x) for x in j[\"a\"]]\n"
      "    f += [repr(x) for x in j.get(\"p\", [])]\n"
      "    if lab:\n"
      "        f += [repr(j[\"_label_cost\"]), repr(j[\"_label_probability\"]),\n"
      "              str(j[\"_label_Action\"]), str(j[\"_labelIndex\"])]\n"
      "    else:\n"
      "        f += [\"unlabeled\"]\n"
      "    for m in j[\"c\"][\"_multi\"]:\n"
      "        f += [repr(v) for v in m[\"x\"]] if \"x\" in m else [m[\"arm\"]]\n"
      "    print(\" \".join(f))\n";
  std::istringstream lines(RunPython(script, path));
  std::string line;
  size_t i = 0;
  for (; std::getline(lines, line); ++i) {
    ASSERT_LT(i, log.size());
    const auto& d = log[i];
    SCOPED_TRACE(line);
    std::istringstream f(line);
    std::string event_id, timestamp, version;
    int n;
    f >> event_id >> timestamp >> version >> n;
    EXPECT_EQ(event_id, d.event_id());
    EXPECT_EQ(timestamp, client::DsjsonTimestamp(d.decided_at_ms()));
    EXPECT_EQ(version, "1");
    ASSERT_EQ(n, d.num_actions());
    std::vector<int> a(n);
    for (int k = 0; k < n; ++k) f >> a[k];
    EXPECT_EQ(a[0], d.chosen_index() + 1);  // the chosen action first, 1-based
    for (int k = 0; k < n; ++k) {
      double p;
      f >> p;
      EXPECT_EQ(p, d.probabilities(a[k] - 1));
    }
    if (d.outcome() == v1::OUTCOME_REWARDED || d.outcome() == v1::OUTCOME_EXPIRED_DEFAULT) {
      double cost, prob;
      int action, index;
      f >> cost >> prob >> action >> index;
      EXPECT_EQ(cost, -d.reward());
      EXPECT_EQ(prob, d.propensity());
      EXPECT_EQ(action, d.chosen_index() + 1);
      EXPECT_EQ(index, d.chosen_index());
    } else {
      std::string word;
      f >> word;
      EXPECT_EQ(word, "unlabeled");
    }
    if (d.num_candidates() > 0) {
      for (int k = 0; k < d.candidates_size(); ++k) {
        double x;
        f >> x;
        EXPECT_EQ(x, d.candidates(k));
      }
    } else {
      for (const auto& id : d.arm_ids()) {
        std::string got;
        f >> got;
        EXPECT_EQ(got, id);
      }
    }
    // And our own reader gives back the same decision, field for field.
    std::ifstream again(path);
    std::string dsjson;
    for (size_t k = 0; k <= i; ++k) std::getline(again, dsjson);
    auto parsed = client::ParseDsjson(dsjson);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    std::string diff;
    MessageDifferencer md;
    md.ReportDifferencesToString(&diff);
    EXPECT_TRUE(md.Compare(*parsed, d)) << diff;
  }
  EXPECT_EQ(i, log.size());
}

TEST(DecisionLog, DsjsonReaderRefusesWhatCannotBeALoggedDecision) {
  const std::string ok =
      R"({"_label_cost":-1,"_label_probability":0.5,"_label_Action":2,"_labelIndex":1,)"
      R"("EventId":"e","a":[2,1],"c":{"_multi":[{"x":[1,2]},{"x":[3,4]}]},"p":[0.5,0.5]})";
  ASSERT_TRUE(client::ParseDsjson(ok).ok());
  auto refused = [](const std::string& line, const std::string& field) {
    auto r = client::ParseDsjson(line);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << line;
    EXPECT_NE(r.status().message().find(field), std::string::npos) << r.status();
  };
  refused("{", "JSON");
  refused(R"({"EventId":"e","a":[1],"c":{"_multi":[{"x":[1]}]},"_label_cost":-1})",
          "_label_probability");
  refused(R"({"EventId":"e","a":[1],"c":{"_multi":[{"x":[1]}]},"_label_cost":-1,)"
          R"("_label_probability":1.5})",
          "_label_probability");
  refused(R"({"EventId":"e","a":[1,3],"c":{"_multi":[{"x":[1]},{"x":[2]}]}})", "a[1]");
  refused(R"({"EventId":"e","a":[1,2],"c":{"_multi":[{"x":[1]},{"x":[2,3]}]}})", "c._multi[1].x");
  refused(R"({"EventId":"e","a":[1,2],"c":{"_multi":[{"x":[1]}]}})", "c._multi");
  refused(R"({"EventId":"e","a":[1,2],"p":[0.5],"c":{"_multi":[{"x":[1]},{"x":[2]}]}})", "p");
  refused(R"({"a":[1],"c":{"_multi":[{"x":[1]}]}})", "EventId");
}

TEST(DecisionLog, RefusedRequestsNameTheProblemAndChangeNothing) {
  ManualClock clock;
  DecisionService svc(&clock);
  v1::Instance out;
  auto bad = svc.CreateInstance(
      Create("b",
             "policy { epsilon_greedy { } num_arms: 2 } decision_log { enabled: true "
             "max_events: -1 }"),
      &out);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("config.decision_log.max_events"), std::string::npos) << bad;
  EXPECT_EQ(svc.registry().size(), 0);

  ASSERT_TRUE(
      svc.CreateInstance(Create("plain", "policy { epsilon_greedy { } num_arms: 2 }"), &out).ok());
  ASSERT_TRUE(svc.CreateInstance(Create("c", kGlmEps), &out).ok());
  PlayCandidates(svc, clock, "c");
  const auto before = ExportAll(svc, "c");
  auto read = [&](v1::ExportDecisionLogRequest req) {
    DecisionService::DecisionLogCursor cursor;
    v1::DecisionLogChunk chunk;
    bool done = false;
    return svc.ReadDecisionLog(req, &cursor, &chunk, &done);
  };
  v1::ExportDecisionLogRequest req;
  EXPECT_EQ(read(req).code(), StatusCode::kInvalidArgument);  // no name
  req.set_name("nope");
  EXPECT_EQ(read(req).code(), StatusCode::kNotFound);
  req.set_name("plain");
  EXPECT_EQ(read(req).code(), StatusCode::kFailedPrecondition);
  req.set_name("c");
  req.set_since_ms(100);
  req.set_until_ms(100);
  auto s = read(req);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("until_ms"), std::string::npos) << s;
  req.set_until_ms(0);
  req.set_since_ms(-1);
  EXPECT_EQ(read(req).code(), StatusCode::kInvalidArgument);
  req.set_since_ms(0);
  req.set_max_events(-1);
  EXPECT_EQ(read(req).code(), StatusCode::kInvalidArgument);
  const auto after = ExportAll(svc, "c");
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i)
    EXPECT_TRUE(MessageDifferencer::Equals(after[i], before[i]));
}

using Node = testing::FileNode;

// In `always`, a Select or Update is acknowledged once its journal record is fsynced, and the
// log entry is rebuilt from that same record: after a crash the log holds every acknowledged
// decision and outcome, exactly; after snapshot and compaction too. LinUCB (a read-only
// policy) checks that its selects are journaled whole when the log is on.
TEST(DecisionLog, EveryAcknowledgedDecisionSurvivesACrashExactly) {
  FaultInjectionFs fs;
  ManualClock clock;
  const std::vector<std::pair<std::string, std::string>> instances = {
      {"c", kGlmEps}, {"lin", "policy { linucb { dimension: 3 } } decision_log { enabled: true }"}};
  std::map<std::string, std::vector<v1::LoggedDecision>> before;
  {
    Node a(&fs, &clock);
    v1::Instance out;
    for (const auto& [name, config] : instances) {
      uint64_t seq = 0;
      ASSERT_TRUE(a.svc.CreateInstance(Create(name, config), &out, &seq).ok());
      for (int i = 0; i < 20; ++i) {
        v1::Decision d;
        ASSERT_TRUE(a.svc.Select(CandidateSelect(name, i), &d, &seq).ok());
        if (i % 3 != 0) {
          v1::UpdateRequest up;
          up.set_instance(name);
          up.set_event_id(d.event_id());
          up.set_reward(0.05 * i);
          v1::UpdateResponse r;
          ASSERT_TRUE(a.svc.Update(up, &r, &seq).ok());
        }
        if (i == 10) {
          ASSERT_TRUE(a.persistence->SnapshotAll().ok());
        }
      }
      // What the gRPC layer waits for before acknowledging the last call.
      std::promise<absl::Status> durable;
      a.svc.WhenDurable(seq, [&](absl::Status s) { durable.set_value(s); });
      ASSERT_TRUE(durable.get_future().get().ok());
      before[name] = ExportAll(a.svc, name);
      ASSERT_EQ(before[name].size(), 20u);
    }
    fs.Crash();
  }
  Node b(&fs, &clock);
  for (const auto& [name, config] : instances) {
    SCOPED_TRACE(name);
    const auto after = ExportAll(b.svc, name);
    ASSERT_EQ(after.size(), before[name].size());
    for (size_t i = 0; i < after.size(); ++i) {
      std::string diff;
      MessageDifferencer md;
      md.ReportDifferencesToString(&diff);
      EXPECT_TRUE(md.Compare(after[i], before[name][i])) << i << ": " << diff;
    }
  }
}

// The grouping rule: consecutive entries with one event id and slot_index 0, 1, ... are one
// decision; a slot-less entry, another event id, or a slot_index out of sequence begins the next.
// Each group is reported with the line its first entry was added with.
TEST(DecisionLog, GrouperJoinsASlotRunAndReportsTheLineItBeganOn) {
  auto entry = [](const std::string& event, const std::string& slot, int index) {
    v1::LoggedDecision d;
    d.set_event_id(event);
    d.set_slot_id(slot);
    d.set_slot_index(index);
    return d;
  };
  std::vector<std::pair<std::vector<std::string>, int64_t>> groups;
  client::DecisionGrouper grouper(
      [&](std::span<const v1::LoggedDecision> decision, int64_t line) {
        std::vector<std::string> ids;
        for (const auto& d : decision) ids.push_back(d.event_id() + "/" + d.slot_id());
        groups.emplace_back(ids, line);
      });
  grouper.Add(entry("a", "", 0), 1);      // single
  grouper.Add(entry("p", "hero", 0), 2);  // page p: two slots, read from lines 2 and 3
  grouper.Add(entry("p", "tile", 1), 3);
  grouper.Add(entry("q", "hero", 0), 4);  // page q: one slot, then p's index 1 again (new event)
  grouper.Add(entry("p", "tile", 1), 4);  // out of sequence: a group of its own
  grouper.Add(entry("b", "", 0), 5);      // single, flushes the held group first
  grouper.Add(entry("r", "hero", 0), 6);
  grouper.Add(entry("r", "tile", 1), 6);  // both slots from one (CCB) line
  EXPECT_EQ(groups.size(), 5u);
  grouper.Flush();
  using G = std::pair<std::vector<std::string>, int64_t>;
  EXPECT_EQ(groups, (std::vector<G>{{{"a/"}, 1},
                                    {{"p/hero", "p/tile"}, 2},
                                    {{"q/hero"}, 4},
                                    {{"p/tile"}, 4},
                                    {{"b/"}, 5},
                                    {{"r/hero", "r/tile"}, 6}}));
  grouper.Flush();  // nothing held: no call
  EXPECT_EQ(groups.size(), 6u);
}

}  // namespace
}  // namespace bandit::server
