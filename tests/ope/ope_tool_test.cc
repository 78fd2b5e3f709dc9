// bandit-ope end to end: the real binary on DSJSON logs written by the export formatter.
// Closed form through the whole tool (uniform logging, a uniform candidate: IPS and SNIPS equal
// the logged mean), progressive evaluation of a learning candidate, and refused inputs that
// name the line and field and write nothing.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <google/protobuf/text_format.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "client/cpp/decision_log_format.h"
#include "core/ope/evaluator.h"

namespace bandit::ope {
namespace BANDIT_UNITY_ID {

namespace v1 = bandit::v1;

struct OpeRun {
  int exit_code;
  std::string output;  // stdout and stderr
};

OpeRun RunOpe(const std::string& args) {
  const char* bin = std::getenv("BANDIT_OPE");
  EXPECT_NE(bin, nullptr) << "BANDIT_OPE is not set (ctest sets it)";
  FILE* p = popen(absl::StrCat(bin ? bin : "bandit-ope", " ", args, " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

std::string Dir() {
  const std::string d = ::testing::TempDir() + "/ope_tool_test";
  std::filesystem::create_directories(d);
  return d;
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = Dir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// A log over arms a0..a3 from a uniform logging policy, Bernoulli rewards with known means.
std::vector<v1::LoggedDecision> UniformArmLog(int n, uint64_t seed) {
  const double means[] = {0.2, 0.4, 0.5, 0.7};
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<v1::LoggedDecision> log;
  for (int t = 0; t < n; ++t) {
    v1::LoggedDecision d;
    d.set_event_seq(t + 1);
    d.set_event_id(absl::StrCat("0000000000000001-", t + 1));
    d.set_decided_at_ms(1'700'000'000'000 + t);
    d.set_policy("epsilon_greedy");
    for (int a = 0; a < 4; ++a) d.add_arm_ids(absl::StrCat("a", a));
    d.set_num_actions(4);
    const int a = static_cast<int>(rng() % 4);
    d.set_chosen_index(a);
    d.set_chosen_arm_id(absl::StrCat("a", a));
    d.set_propensity(0.25);
    for (int k = 0; k < 4; ++k) d.add_probabilities(0.25);
    d.set_outcome(v1::OUTCOME_REWARDED);
    d.set_reward(u(rng) < means[a] ? 1.0 : 0.0);
    log.push_back(d);
  }
  return log;
}

std::string ToDsjson(const std::vector<v1::LoggedDecision>& log) {
  std::string out;
  for (const auto& d : log)
    out += client::FormatDecision(client::LogFormat::kDsjson, d, "sim") + "\n";
  return out;
}

TEST(OpeTool, UniformCandidateOnAUniformLogEstimatesThePlainMean) {
  const auto log = UniformArmLog(500, 3);
  double mean = 0;
  for (const auto& d : log) mean += d.reward();
  mean /= log.size();
  const std::string log_path = WriteFile("uniform.dsjson", ToDsjson(log));
  const std::string uniform =
      WriteFile("uniform.txtpb",
                "policy { epsilon_greedy { epsilon: 1.0 } arms { id: 'a0' } arms { id: 'a1' } "
                "arms { id: 'a2' } arms { id: 'a3' } }");
  const std::string greedy =
      WriteFile("greedy.txtpb",
                "policy { epsilon_greedy { epsilon: 0.05 } arms { id: 'a0' } arms { id: 'a1' } "
                "arms { id: 'a2' } arms { id: 'a3' } } seed: 9");
  const std::string json = Dir() + "/uniform.json";
  const std::string png = Dir() + "/uniform.png";
  std::filesystem::remove(json);
  std::filesystem::remove(png);
  const OpeRun r = RunOpe(absl::StrCat("--log=", log_path, " --json=", json, " --plot=", png, " ",
                                       uniform, " ", greedy));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream f(json);
  const auto j = nlohmann::json::parse(f);
  EXPECT_EQ(j["events"], 500);
  EXPECT_NEAR(j["logging_policy"]["value"].get<double>(), mean, 1e-12);
  const auto& u = j["candidates"][0];
  EXPECT_EQ(u["name"], "uniform");
  // pi = mu = 1/4 everywhere: every weight is 1.
  EXPECT_NEAR(u["ips"]["value"].get<double>(), mean, 1e-12);
  EXPECT_NEAR(u["snips"]["value"].get<double>(), mean, 1e-12);
  EXPECT_NEAR(u["effective_sample_size"].get<double>(), 500, 1e-9);
  EXPECT_EQ(u["exact_distribution_events"], 500);
  // A near-greedy learner ends up on a3 (mean 0.7): its progressive value lies well above the
  // uniform policy's 0.45, and its weights reach 0.9625 / 0.25.
  const auto& g = j["candidates"][1];
  EXPECT_GT(g["snips"]["value"].get<double>(), mean);
  EXPECT_NEAR(g["largest_weight"].get<double>(), (0.95 + 0.05 / 4) / 0.25, 1e-12);
  EXPECT_TRUE(std::filesystem::exists(png)) << r.output;
}

// A two-slot page over arms a0..a3 from a uniform logging policy: slot 0 among the four arms
// (probability 1/4), slot 1 among the three slot 0 left (1/3), one DSJSON line per slot.
std::vector<v1::LoggedDecision> UniformTwoSlotLog(int pages, uint64_t seed) {
  const double means[2][4] = {{0.2, 0.4, 0.5, 0.7}, {0.1, 0.2, 0.25, 0.35}};
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<v1::LoggedDecision> log;
  for (int t = 0; t < pages; ++t) {
    std::vector<int> free = {0, 1, 2, 3};
    for (int k = 0; k < 2; ++k) {
      v1::LoggedDecision d;
      d.set_event_seq(2 * t + k + 1);
      d.set_event_id(absl::StrCat("0000000000000001-", t + 1));
      d.set_decided_at_ms(1'700'000'000'000 + t);
      d.set_policy("epsilon_greedy");
      d.set_slot_id(k == 0 ? "hero" : "tile");
      d.set_slot_index(k);
      for (int a : free) d.add_arm_ids(absl::StrCat("a", a));
      const int n = static_cast<int>(free.size());
      d.set_num_actions(n);
      const int pick = static_cast<int>(rng() % n);
      const int arm = free[pick];
      d.set_chosen_index(pick);
      d.set_chosen_arm_id(absl::StrCat("a", arm));
      d.set_propensity(1.0 / n);
      for (int i = 0; i < n; ++i) d.add_probabilities(1.0 / n);
      d.set_outcome(v1::OUTCOME_REWARDED);
      d.set_reward(u(rng) < means[k][arm] ? 1.0 : 0.0);
      free.erase(free.begin() + pick);
      log.push_back(d);
    }
  }
  return log;
}

// Per slot, a uniform candidate's conditional probabilities equal the logging policy's (1/4,
// then 1/3 of the arms left): every weight is 1, so each slot's IPS and SNIPS are that slot's
// logged mean, and the page's value is their sum.
TEST(OpeTool, MultiSlotLogIsEstimatedPerSlotAndForThePage) {
  const auto log = UniformTwoSlotLog(400, 5);
  double mean[2] = {0, 0};
  for (const auto& d : log) mean[d.slot_index()] += d.reward() / 400;
  const std::string log_path = WriteFile("slots.dsjson", ToDsjson(log));
  const std::string uniform =
      WriteFile("uniform_slots.txtpb",
                "policy { epsilon_greedy { epsilon: 1.0 } arms { id: 'a0' } arms { id: 'a1' } "
                "arms { id: 'a2' } arms { id: 'a3' } }");
  const std::string json = Dir() + "/slots.json";
  std::filesystem::remove(json);
  const OpeRun r = RunOpe(absl::StrCat("--log=", log_path, " --json=", json, " ", uniform));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream f(json);
  const auto j = nlohmann::json::parse(f);
  EXPECT_EQ(j["events"], 800);
  const auto& c = j["candidates"][0];
  ASSERT_EQ(c["slots"].size(), 2u);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(c["slots"][k]["events"], 400);
    EXPECT_NEAR(c["slots"][k]["ips"]["value"].get<double>(), mean[k], 1e-12) << k;
    EXPECT_NEAR(c["slots"][k]["snips"]["value"].get<double>(), mean[k], 1e-12) << k;
    EXPECT_NEAR(c["slots"][k]["logged"]["value"].get<double>(), mean[k], 1e-12) << k;
  }
  EXPECT_NEAR(c["page"]["ips"].get<double>(), mean[0] + mean[1], 1e-12);
  // The slot fields survive the DSJSON round trip.
  auto back = client::ParseDsjson(client::FormatDecision(client::LogFormat::kDsjson, log[1], "s"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->slot_id(), "tile");
  EXPECT_EQ(back->slot_index(), 1);
}

TEST(OpeTool, ToolAgreesWithTheLibraryOnTheSameLog) {
  const auto log = UniformArmLog(300, 8);
  const std::string log_path = WriteFile("agree.dsjson", ToDsjson(log));
  const std::string config_text =
      "policy { epsilon_greedy { epsilon: 0.2 } arms { id: 'a0' } arms { id: 'a1' } "
      "arms { id: 'a2' } arms { id: 'a3' } } seed: 4";
  const std::string cand = WriteFile("eg.txtpb", config_text);
  const std::string json = Dir() + "/agree.json";
  const OpeRun r = RunOpe(absl::StrCat("--log=", log_path, " --json=", json, " ", cand));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Candidate c;
  c.name = "eg";
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(config_text, &c.config));
  auto ev = Evaluator::Create({c}, {});
  ASSERT_TRUE(ev.ok());
  for (const auto& d : log) ASSERT_TRUE((*ev)->Add(d, "x").ok());
  const auto& e = (*ev)->results()[0].estimators;
  std::ifstream f(json);
  const auto j = nlohmann::json::parse(f)["candidates"][0];
  EXPECT_DOUBLE_EQ(j["ips"]["value"].get<double>(), e.Ips().value);
  EXPECT_DOUBLE_EQ(j["dr"]["value"].get<double>(), e.DoublyRobust().value);
  EXPECT_DOUBLE_EQ(j["dr"]["ci95"][1].get<double>(), e.DoublyRobust().hi);
}

TEST(OpeTool, BadInputNamesTheLineAndFieldAndWritesNothing) {
  auto log = UniformArmLog(5, 1);
  const std::string arms4 =
      WriteFile("arms4.txtpb",
                "policy { epsilon_greedy { } arms { id: 'a0' } arms { id: 'a1' } "
                "arms { id: 'a2' } arms { id: 'a3' } }");
  const std::string json = Dir() + "/bad.json";
  auto expect_refused = [&](const std::string& log_text, const std::string& candidate,
                            const std::vector<std::string>& needles) {
    std::filesystem::remove(json);
    const std::string path = WriteFile("bad.dsjson", log_text);
    const OpeRun r = RunOpe(absl::StrCat("--log=", path, " --json=", json, " ", candidate));
    EXPECT_EQ(r.exit_code, 1) << r.output;
    for (const auto& n : needles) EXPECT_NE(r.output.find(n), std::string::npos) << r.output;
    EXPECT_FALSE(std::filesystem::exists(json));
  };
  // Zero propensity on line 3.
  auto zero = log;
  zero[2].set_propensity(0.0);
  expect_refused(ToDsjson(zero), arms4, {"bad.dsjson:3", "_label_probability", "is 0"});
  // Missing propensity on line 2 (a hand-edited line without _label_probability).
  std::string text = ToDsjson(log);
  const size_t second = text.find('\n') + 1;
  const size_t at = text.find("\"_label_probability\":0.25,", second);
  text.erase(at, std::string("\"_label_probability\":0.25,").size());
  expect_refused(text, arms4, {"bad.dsjson:2", "_label_probability", "missing"});
  // Not JSON on line 4.
  text = ToDsjson(log);
  size_t pos = 0;
  for (int i = 0; i < 3; ++i) pos = text.find('\n', pos) + 1;
  text.insert(pos, "{oops\n");
  expect_refused(text, arms4, {"bad.dsjson:4", "not valid JSON"});
  // A candidate with other arms than the logged decisions.
  const std::string arms3 =
      WriteFile("arms3.txtpb",
                "policy { epsilon_greedy { } arms { id: 'a0' } arms { id: 'a1' } "
                "arms { id: 'b2' } }");
  expect_refused(ToDsjson(log), arms3, {"bad.dsjson:1", "arms3", "3 arms"});
  // Candidate vectors of the wrong dimension.
  v1::LoggedDecision c;
  c.set_event_id("e1");
  c.set_num_candidates(2);
  c.set_candidate_dim(3);
  for (int k = 0; k < 6; ++k) c.add_candidates(0.1 * k);
  c.set_num_actions(2);
  c.set_chosen_index(1);
  c.set_propensity(0.5);
  c.set_outcome(v1::OUTCOME_REWARDED);
  c.set_reward(1.0);
  const std::string lin4 = WriteFile("lin4.txtpb", "policy { linucb { dimension: 4 } }");
  expect_refused(client::FormatDecision(client::LogFormat::kDsjson, c, "x") + "\n", lin4,
                 {"bad.dsjson:1", "lin4", "4"});
  // A candidate config that does not parse, and one the registry refuses.
  expect_refused(ToDsjson(log), WriteFile("typo.txtpb", "policy { no_such_policy {} }"),
                 {"typo.txtpb", "InstanceConfig"});
  expect_refused(ToDsjson(log), WriteFile("empty.txtpb", "seed: 3"), {"empty", "no policy"});
}

}  // namespace
}  // namespace bandit::ope
